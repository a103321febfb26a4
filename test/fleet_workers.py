"""Robots writing one fleet memory, each in its own process (test_fleet.py starts them)."""
from __future__ import annotations

import json
import time

from store_fixtures import DIMS, T0, unit
from embodied_memory.params import StoreParams
from embodied_memory.store import StoreWriteError, open_store
from embodied_memory.types import Observation, PersonSighting, Pose

ROOMS = ("lab", "kitchen", "corridor")


def observation(robot: str, i: int, stamp: float, person: str = "") -> Observation:
    room = ROOMS[i % len(ROOMS)]
    people = [PersonSighting((0, 0, 10, 20), person, 0.9, 0.8, face_embedding=unit(hash(person) % 1000, 8))] \
        if person else []
    return Observation(f"{robot}/{i}", stamp, f"{robot}/day1", Pose(float(i % 7), float(i % 5), 0.0, 0.0, "map"),
                       description=f"{robot} sees a {room} scene number {i}", waypoint_id=room,
                       global_embedding=unit(i), people=people)


def write(url: str, data_dir: str, robot: str, n: int, ack_file: str = "", batch: int = 5) -> None:
    """Store ``n`` observations as a robot's memory node does: a batch is resent until it is
    acknowledged (the server may be down for a while); acknowledged ids go to ``ack_file``."""
    store = open_store(StoreParams(backend="postgres", postgres_url=url, data_dir=data_dir, robot_id=robot,
                                   text_embedder="hash", **DIMS))
    acked = open(ack_file, "a") if ack_file else None
    retries = 0
    for start in range(0, n, batch):
        records = [observation(robot, i, T0 + i * 10.0 + ROOMS.index(ROOMS[hash(robot) % 3]))
                   for i in range(start, min(n, start + batch))]
        while True:
            try:
                result = store.insert_batch(records)
                break
            except StoreWriteError:
                retries += 1
                time.sleep(0.2)                         # the server is away: keep the records, retry
        if acked:
            acked.write(json.dumps(result.stored + result.duplicates) + "\n")
            acked.flush()
    if acked:
        acked.write(json.dumps({"retries": retries}) + "\n")
    store.close()
