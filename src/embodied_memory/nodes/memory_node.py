"""memory_node: writes observations into the MemoryStore and serves it.

Subscribes  /memory/observations (embodied_memory_interfaces/Observation),
            /memory/episode_maps (EpisodeMap: an exploration episode's occupancy grid)
Services    /memory/query (QueryMemory), /memory/stats (GetMemoryStats),
            /memory/forget (Forget), /memory/name_identity (NameIdentity)
Publishes   /memory/markers (visualization_msgs/MarkerArray, transient local)
"""
from __future__ import annotations

import json
import threading

from embodied_memory_interfaces.msg import EpisodeMap, IdentityMerge, MemoryStats
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import Forget, GetMemoryStats, NameIdentity, QueryMemory
from geometry_msgs.msg import Point
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from ..params import MemoryNodeParams, StoreParams
from ..store import StoreError, open_store
from .common import node_params, run_node, to_time_msg
from .conversions import grid_from_msg, observation_from_msg


class MemoryNode(Node):
    def __init__(self, **kwargs):
        super().__init__("memory", **kwargs)
        self.params = node_params(self, MemoryNodeParams)
        store_fields = StoreParams.__dataclass_fields__
        self.store = open_store(StoreParams(**{k: getattr(self.params, k) for k in store_fields}))
        self.get_logger().info(f"memory store ({self.params.backend}) at {self.store.data_dir}: "
                               f"{self.store.observation_count()} observations")
        threading.Thread(target=self.store.warm_up, name="index_warm_up", daemon=True).start()
        writes = MutuallyExclusiveCallbackGroup()
        reads = ReentrantCallbackGroup()
        self.create_subscription(ObservationMsg, self.params.observations_topic, self._on_observation,
                                 QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE),
                                 callback_group=writes)
        self.create_subscription(IdentityMerge, self.params.merges_topic, self._on_merge,
                                 QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE), callback_group=writes)
        self.create_subscription(EpisodeMap, self.params.episode_maps_topic, self._on_episode_map,
                                 QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE), callback_group=writes)
        self.create_service(QueryMemory, "/memory/query", self._on_query, callback_group=reads)
        self.create_service(GetMemoryStats, "/memory/stats", self._on_stats, callback_group=reads)
        self.create_service(Forget, "/memory/forget", self._on_forget, callback_group=writes)
        self.create_service(NameIdentity, "/memory/name_identity", self._on_name, callback_group=writes)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self._markers_pub = self.create_publisher(MarkerArray, self.params.markers_topic, latched)
        self._dirty = threading.Event()
        self._dirty.set()
        self.create_timer(self.params.markers_period_s, self._publish_markers, callback_group=reads)
        self.stored = 0
        self.rejected = 0

    def _save_image(self, msg: ObservationMsg) -> str:
        if msg.image_path or not len(msg.image.data):
            return msg.image_path
        ext = "png" if "png" in msg.image.format.lower() else "jpg"
        path = self.store.images_dir / msg.episode_id.replace("/", "_") / f"{msg.observation_id.replace('/', '_')}.{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(msg.image.data))
        return str(path)

    def _on_observation(self, msg: ObservationMsg) -> None:
        try:
            obs = observation_from_msg(msg)
            obs.image_path = self._save_image(msg)
            stored = self.store.insert([obs])
        except (StoreError, ValueError) as exc:
            self.rejected += 1
            self.get_logger().error(f"rejected observation {msg.observation_id!r}: {exc}")
            return
        self.stored += len(stored)
        self._dirty.set()

    def _on_episode_map(self, msg: EpisodeMap) -> None:
        try:
            values, resolution, origin = grid_from_msg(msg.map)
            self.store.save_occupancy_map(msg.episode_id, values, resolution, origin)
        except (StoreError, ValueError) as exc:
            self.get_logger().error(f"rejected the map of episode {msg.episode_id!r}: {exc}")
            return
        self.get_logger().info(f"saved the occupancy map of episode {msg.episode_id} ({values.shape[1]}x{values.shape[0]})")

    def _on_merge(self, msg: IdentityMerge) -> None:
        moved = self.store.merge_identities(msg.absorbed_id, msg.surviving_id)
        self.get_logger().info(f"identity {msg.absorbed_id} merged into {msg.surviving_id} ({moved} sightings)")
        self._dirty.set()

    def _on_query(self, request, response):
        try:
            arguments = json.loads(request.arguments_json or "{}")
            result = self.store.call_tool(request.tool, arguments)
            response.result_json = json.dumps(result, default=str)
            response.success = True
        except (StoreError, ValueError) as exc:  # json errors are ValueErrors
            response.success, response.error = False, str(exc)
        return response

    def _on_stats(self, _request, response):
        s = self.store.stats()
        response.stats = MemoryStats(
            backend=s["backend"], data_dir=s["data_dir"], episodes=s["episodes"],
            observations=s["observations"], regions=s["regions"], person_sightings=s["person_sightings"],
            identities=s["identities"], rules=s["rules"], bytes_on_disk=s["bytes_on_disk"],
            oldest=to_time_msg(s["oldest"] or 0.0), newest=to_time_msg(s["newest"] or 0.0))
        return response

    def _on_forget(self, request, response):
        try:
            if request.mode == Forget.Request.MODE_IDENTITY:
                result = self.store.forget_identity(request.identity_id, dry_run=request.dry_run)
            elif request.mode == Forget.Request.MODE_OLDER_THAN:
                result = self.store.forget_older_than(request.older_than_hours, dry_run=request.dry_run)
            elif request.mode == Forget.Request.MODE_EPISODE:
                result = self.store.forget_episode(request.episode_id, dry_run=request.dry_run)
            else:
                raise StoreError(f"unknown mode {request.mode!r} (identity | older_than | episode)")
        except StoreError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success = True
        response.observations_removed = result["observations_removed"]
        response.sightings_removed = result["sightings_removed"]
        response.files_removed = result["files_removed"]
        response.message = ("would remove" if request.dry_run else "removed") + \
            f" {result['observations_removed']} observations, {result['sightings_removed']} sightings"
        self._dirty.set()
        return response

    def _on_name(self, request, response):
        try:
            survivor = self.store.name_identity(request.identity_id, request.display_name)
            response.success = True
            response.message = "ok" if survivor == request.identity_id else \
                f"{request.display_name!r} already named {survivor}: {request.identity_id} merged into it"
            self._dirty.set()
        except StoreError as exc:
            response.success, response.message = False, str(exc)
        return response

    def _publish_markers(self) -> None:
        if not self._dirty.is_set():
            return
        self._dirty.clear()
        rows = self.store.recent_positions(self.params.markers_max)
        stamp = self.get_clock().now().to_msg()
        markers = MarkerArray()
        layers = (("observations", ColorRGBA(r=0.2, g=0.6, b=1.0, a=0.8), 0.15, False),
                  ("person_sightings", ColorRGBA(r=1.0, g=0.4, b=0.1, a=0.9), 0.25, True))
        for mid, (ns, colour, size, people_only) in enumerate(layers):
            m = Marker(ns=ns, id=mid, type=Marker.SPHERE_LIST, action=Marker.ADD)
            m.header.frame_id, m.header.stamp = self.params.map_frame, stamp
            m.pose.orientation.w = 1.0
            m.scale.x = m.scale.y = m.scale.z = size
            m.color = colour
            m.points = [Point(x=x, y=y, z=z + 0.3 * mid) for x, y, z, has_person in rows
                        if has_person or not people_only]
            markers.markers.append(m)
        self._markers_pub.publish(markers)

    def close(self) -> None:
        self.store.close()


def main() -> None:
    run_node(MemoryNode)


if __name__ == "__main__":
    main()
