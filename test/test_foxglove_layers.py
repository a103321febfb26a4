"""The inspector's live Foxglove layers: what the memory becomes (scene entities, the occupancy
grid) and the foxglove-sdk WebSocket server a Foxglove client connects to (a real client here,
speaking the Foxglove WebSocket protocol)."""
from __future__ import annotations

import asyncio
import json
import struct

import numpy as np
import pytest

from embodied_memory.inspector.foxglove_layers import TOPICS, FoxgloveLayers, memory_layers, to_foxglove
from embodied_memory.inspector.reader import MemoryReader
from embodied_memory.store import open_store
from embodied_memory.types import Observation, PersonSighting, Pose

from store_fixtures import make_params

T0 = 1_773_050_000.0
# foxglove-sdk 0.30 servers speak foxglove.sdk.v1; older ones foxglove.websocket.v1
SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]


@pytest.fixture
def memory(tmp_path):
    store = open_store(make_params(tmp_path, "sqlite_faiss"))
    sighting = lambda who, x, y: PersonSighting((0, 0, 10, 20), who, 0.9, 0.8, position=(x, y, 0.0))  # noqa: E731
    store.insert([
        Observation("o1", T0, "ep", Pose(1.0, 2.0, frame_id="map"), description="kitchen", waypoint_id="kitchen",
                    people=[sighting("person_0001", 1.5, 2.5)]),
        Observation("o2", T0 + 60, "ep", Pose(4.0, 2.0, frame_id="map"), description="corridor", waypoint_id="corridor",
                    people=[sighting("person_0001", 4.5, 2.5), sighting("person_0002", 4.0, 3.0)]),
        Observation("o3", T0 + 120, "ep", Pose(4.0, 6.0, frame_id="map"), description="lab", waypoint_id="lab"),
    ])
    store.name_identity("person_0001", "Alice")
    grid = np.zeros((20, 30), np.int8)
    grid[0, :] = 100                     # the wall at the lowest y
    grid[10:, :] = -1
    store.save_occupancy_map("ep", grid, 0.25, (-1.0, -2.0))
    store.close()
    return MemoryReader(tmp_path / "store")


def test_the_memory_becomes_scene_entities_and_a_grid_in_its_frame(memory):
    layers, stamp = memory_layers(memory)
    assert set(layers) == set(TOPICS) and stamp == T0 + 120
    (observations,) = layers["/memory/observations"]
    assert observations["frame"] == "map" and len(observations["spheres"]) == 3
    first, last = observations["spheres"][0][3], observations["spheres"][-1][3]
    assert first[2] > first[0] and last[0] > last[2]               # early blue, late red
    people = {e["id"]: e for e in layers["/memory/sightings"]}
    assert set(people) == {"person/person_0001", "person/person_0002"}
    alice = people["person/person_0001"]
    assert len(alice["spheres"]) == 2 and alice["texts"][0][:4] == (4.5, 2.5, 0.6, "Alice")   # at her last sighting
    assert people["person/person_0002"]["texts"][0][3] == "person_0002"
    assert sorted(t[3] for t in layers["/memory/waypoints"][0]["texts"]) == ["corridor", "kitchen", "lab"]
    grid = layers["/memory/occupancy"]
    assert (grid["width"], grid["origin"], grid["resolution"]) == (30, (-1.0, -2.0), 0.25)
    assert grid["grid"][0].tolist() == [100] * 30                    # row 0 is the lowest y
    messages = to_foxglove(layers, stamp)
    assert set(messages) == set(TOPICS)
    assert b"Alice" in messages["/memory/sightings"].encode()
    assert len(messages["/memory/occupancy"].encode()) > 600         # the 30 x 20 cells and the header


async def _first_message(port: int, topic: str) -> tuple[dict, bytes]:
    import websockets
    async with websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=SUBPROTOCOLS) as ws:
        channels = {}
        while topic not in channels:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if msg.get("op") == "advertise":
                channels.update({c["topic"]: c for c in msg["channels"]})
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": 7, "channelId": channels[topic]["id"]}]}))
        while True:
            data = await asyncio.wait_for(ws.recv(), 10)
            if isinstance(data, bytes) and data[0] == 0x01:       # messageData: opcode, subscription id, time
                assert struct.unpack_from("<I", data, 1)[0] == 7
                return channels, data[13:]


def test_a_foxglove_client_sees_every_layer_advertised_and_receives_the_people(memory):
    layers = FoxgloveLayers(memory, port=0, period_s=0.2).start()
    try:
        channels, payload = asyncio.run(_first_message(layers.port, "/memory/sightings"))
        assert set(TOPICS) <= set(channels)
        assert channels["/memory/sightings"]["schemaName"] == "foxglove.SceneUpdate"
        assert channels["/memory/occupancy"]["schemaName"] == "foxglove.Grid"
        assert b"Alice" in payload            # the named identity's label, protobuf-encoded
    finally:
        layers.stop()
    assert layers.publications >= 1
