"""The memory as live Foxglove layers: a ``foxglove-sdk`` WebSocket server (the Foxglove app's
"Foxglove WebSocket" connection, default ws://127.0.0.1:8765) publishing, every ``period_s``,

- ``/memory/observations``  SceneUpdate: a sphere per keyframe pose, early blue to late red;
- ``/memory/sightings``     SceneUpdate: a sphere per person sighting (a colour per identity)
  and the identity's name at its last sighting;
- ``/memory/waypoints``     SceneUpdate: each waypoint's name at its keyframes' mean position;
- ``/memory/occupancy``     Grid: the newest episode's occupancy map (0 free .. 100 occupied,
  -1 unknown), row 0 at the lowest y as in nav_msgs/OccupancyGrid.

Everything is in the frame the memory stored (``frame_id`` of the keyframes, e.g. ``map``), so a
Foxglove user sees it beside the robot's live topics in that frame. Entities are replaced by
id on every publication (a client that connects late gets the whole memory within a period).
"""
from __future__ import annotations

import logging
import threading
from typing import Optional

from .map_view import person_colour, time_colour
from .reader import MemoryReader

log = logging.getLogger(__name__)
TOPICS = ("/memory/observations", "/memory/sightings", "/memory/waypoints", "/memory/occupancy")
DEFAULT_PORT = 8765
OBS_SIZE_M, SIGHTING_SIZE_M, TEXT_SIZE = 0.15, 0.35, 14.0


def _rgba(hex_colour: str, alpha: float = 1.0) -> tuple[float, float, float, float]:
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255.0 for i in (1, 3, 5))
    return r, g, b, alpha


def memory_layers(reader: MemoryReader) -> tuple[dict, Optional[float]]:
    """({topic: content}, newest keyframe time) of the memory now, plain data: a SceneUpdate topic holds entities
    ``{"id", "frame", "spheres": [(x, y, size, rgba)], "texts": [(x, y, z, text, rgba)]}``, the
    occupancy topic ``{"frame", "origin", "resolution", "width", "grid"}`` (``to_foxglove``)."""
    points = reader.map_points()
    frame = points["frames"][0] if points["frames"] else "map"
    obs = points["observations"]
    t0, t1 = (obs[0]["t"], obs[-1]["t"]) if obs else (0.0, 0.0)
    names = reader.names()
    by_person: dict[str, list[dict]] = {}
    for s in points["sightings"]:
        by_person.setdefault(s["person"] or "unknown", []).append(s)
    layers = {
        "/memory/observations": [{"id": "observations", "frame": frame, "texts": [], "spheres": [
            (o["x"], o["y"], OBS_SIZE_M, _rgba(time_colour(o["t"], t0, t1))) for o in obs]}],
        "/memory/sightings": [{"id": f"person/{person}", "frame": frame,
                               "spheres": [(s["x"], s["y"], SIGHTING_SIZE_M, _rgba(person_colour(person), 0.8))
                                           for s in seen],
                               "texts": [(seen[-1]["x"], seen[-1]["y"], 0.6, names.get(person, person),
                                          _rgba(person_colour(person)))]}
                              for person, seen in sorted(by_person.items())],
        "/memory/waypoints": [{"id": "waypoints", "frame": frame, "spheres": [], "texts": [
            (w["x"], w["y"], 1.0, w["id"], _rgba("#263238")) for w in points["waypoints"]]}]}
    maps = reader.occupancy_maps()
    if maps:
        m = maps[0]
        layers["/memory/occupancy"] = {"frame": frame, "origin": tuple(m["origin"]), "resolution": m["resolution"],
                                       "width": m["width"], "grid": reader.occupancy_grid(m["episode"])}
    return layers, (t1 if obs else None)


def to_foxglove(layers: dict, stamp: Optional[float]) -> dict:
    """``memory_layers`` as ``foxglove.messages`` (SceneUpdate per scene topic, Grid)."""
    from foxglove.messages import (Color, Grid, PackedElementField, PackedElementFieldNumericType, Pose, Quaternion,
                                   SceneEntity, SceneUpdate, SpherePrimitive, TextPrimitive, Timestamp, Vector2,
                                   Vector3)
    ts = Timestamp.from_epoch_secs(stamp) if stamp is not None else None

    def pose(x, y, z=0.0):
        return Pose(position=Vector3(x=x, y=y, z=z), orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0))

    def colour(rgba):
        return Color(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3])

    out = {}
    for topic, content in layers.items():
        if topic == "/memory/occupancy":
            out[topic] = Grid(frame_id=content["frame"], timestamp=ts, pose=pose(*content["origin"]),
                              column_count=content["width"], row_stride=content["width"], cell_stride=1,
                              cell_size=Vector2(x=content["resolution"], y=content["resolution"]),
                              fields=[PackedElementField(name="occupancy", offset=0,
                                                         type=PackedElementFieldNumericType.Int8)],
                              data=content["grid"].tobytes())
            continue
        out[topic] = SceneUpdate(entities=[SceneEntity(
            id=e["id"], frame_id=e["frame"], timestamp=ts,
            spheres=[SpherePrimitive(pose=pose(x, y, 0.1), size=Vector3(x=size, y=size, z=size), color=colour(c))
                     for x, y, size, c in e["spheres"]],
            texts=[TextPrimitive(pose=pose(x, y, z), billboard=True, font_size=TEXT_SIZE, scale_invariant=True,
                                 color=colour(c), text=text) for x, y, z, text, c in e["texts"]]) for e in content])
    return out


class FoxgloveLayers:
    """The WebSocket server and the thread that publishes ``memory_layers`` every ``period_s``."""

    def __init__(self, reader: MemoryReader, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 period_s: float = 5.0):
        import foxglove
        from foxglove.channels import GridChannel, SceneUpdateChannel
        self.reader, self.period_s = reader, period_s
        self.context = foxglove.Context()
        self.channels = {topic: (GridChannel if topic.endswith("occupancy") else SceneUpdateChannel)(
            topic, context=self.context) for topic in TOPICS}
        self.server = foxglove.start_server(name="embodied_memory", host=host, port=port, context=self.context)
        self.port = self.server.port
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.publications = 0

    def publish_once(self) -> None:
        for topic, message in to_foxglove(*memory_layers(self.reader)).items():
            self.channels[topic].log(message)
        self.publications += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.publish_once()
            except Exception as exc:  # noqa: BLE001 - a bad read is logged, the next period tries again
                log.warning("foxglove layers: %s", exc)
            self._stop.wait(self.period_s)

    def start(self) -> "FoxgloveLayers":
        self._thread = threading.Thread(target=self._run, name="foxglove_layers", daemon=True)
        self._thread.start()
        log.info("Foxglove layers on ws://%s:%d (%s)", "127.0.0.1", self.port, ", ".join(TOPICS))
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.server.stop()
