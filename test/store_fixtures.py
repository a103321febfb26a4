"""Known data for store tests: times, places, people chosen so every answer is predictable."""
from __future__ import annotations

import datetime as dt

import numpy as np

from embodied_memory.params import StoreParams
from embodied_memory.store import open_store
from embodied_memory.types import Observation, PersonSighting, Pose

DIMS = dict(image_dim=16, face_dim=8, reid_dim=8)
# 2026-03-10 08:00 UTC
T0 = dt.datetime(2026, 3, 10, 8, 0, tzinfo=dt.timezone.utc).timestamp()
HOUR = 3600.0


POSTGRES = {"url": ""}    # the test's database on the fleet server (set by the backend fixture)


def make_params(tmp_path, backend, **kw):
    extra = {"milvus_uri": str(tmp_path / "milvus" / "m.db")} if backend == "milvus" else {}
    if backend == "postgres":
        extra = {"postgres_url": POSTGRES["url"]}
    return StoreParams(backend=backend, data_dir=str(tmp_path / "store"),
                       **{"text_embedder": "hash", **DIMS, **extra, **kw})


def unit(seed: int, dim: int = 16) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


def obs(i, t, desc, x=0.0, y=0.0, wp="", people=(), episode="day1", image=None, image_path=""):
    return Observation(f"o{i}", t, episode, Pose(x, y, 0.0, 0.0), description=desc, waypoint_id=wp,
                       global_embedding=image, image_path=image_path,
                       people=[PersonSighting((0, 0, 10, 20), p, 0.9, 0.8, face_embedding=unit(hash(p) % 1000, 8))
                               for p in people])


def fixture_observations(tmp_path):
    img_dir = tmp_path / "store" / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in ("mug", "bike"):
        paths[name] = img_dir / f"{name}.jpg"
        paths[name].write_bytes(b"\xff\xd8jpeg")
    return [
        obs(0, T0, "a red mug on the kitchen counter", 1, 1, "kitchen", ["alice"], image=unit(1),
            image_path=str(paths["mug"])),
        obs(1, T0 + 1 * HOUR, "a bicycle leaning on the corridor wall", 10, 0, "corridor", ["bob"],
            image=unit(2), image_path=str(paths["bike"])),
        obs(2, T0 + 2 * HOUR, "alice drinking coffee with a red mug in the kitchen", 1.5, 1, "kitchen",
            ["alice"], image=unit(3)),
        obs(3, T0 + 3 * HOUR, "an empty meeting room with a whiteboard", 20, 5, "meeting_room", image=unit(4)),
        obs(4, T0 + 15.75 * HOUR, "bob locking the front door at night", 0, -5, "entrance", ["bob"],
            image=unit(5)),  # 23:45 UTC = 00:45 next day in Europe/Zurich
        obs(5, T0 + 26 * HOUR, "a red mug in the sink of the kitchen", 1, 1.5, "kitchen", image=unit(6),
            episode="day2"),
    ]


def filled_store(tmp_path, backend, **kw):
    store = open_store(make_params(tmp_path, backend, **kw))
    store.insert(fixture_observations(tmp_path))
    return store
