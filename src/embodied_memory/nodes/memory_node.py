"""memory_node: writes observations into the MemoryStore and serves it (a managed node).

Subscribes  /memory/observations (embodied_memory_interfaces/Observation),
            /memory/identity_merges (IdentityMerge),
            /memory/identity_changes (IdentitySplit: consolidation's splits and merges, by sighting),
            /memory/episode_maps (EpisodeMap: an exploration episode's occupancy grid)
Services    /memory/query (QueryMemory), /memory/stats (GetMemoryStats),
            /memory/forget (Forget), /memory/name_identity (NameIdentity)
Publishes   /memory/acks (Ack: stored, duplicate or rejected, per observation; nothing while the
            data directory cannot be written, so senders keep the observation and send it again),
            /memory/forgotten_identities (IdentityForgotten, transient local: perception forgets too),
            /memory/markers (visualization_msgs/MarkerArray, transient local), /diagnostics
Every callback answers or counts: a malformed request gets success=false with the error's kind
and message, and the node keeps serving.

Lifecycle (nodes/lifecycle.py): unconfigured = parameters only; configure opens the store (a
bad data directory or backend fails it, the reason logged) and creates the publishers; activate
creates the subscriptions, services and the marker timer; deactivate destroys them (senders keep
what is not acknowledged and send it again on activation); cleanup closes the store.
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time

from embodied_memory_interfaces.msg import Ack, EpisodeMap, IdentityForgotten, IdentityMerge, IdentitySplit, MemoryStats
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import Forget, GetMemoryStats, NameIdentity, QueryMemory
from geometry_msgs.msg import Point
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from ..config import ConfigError
from ..params import (MEMORY_FORGET_SERVICE, MEMORY_NAME_SERVICE, MEMORY_QUERY_SERVICE, MEMORY_STATS_SERVICE,
                      MemoryNodeParams, StoreParams)
from ..fleet.ids import FleetIds
from ..store import open_store
from ..store.errors import SERVER_UNREACHABLE, StoreConfigError, StoreError, StoreWriteError
from ..store.image_files import insert_with_images, sweep_partial_images
from ..store.outbox import Outbox
from .common import forgotten_qos, node_options, node_params, robot_id_of, run_node, service_qos, to_time_msg
from .conversions import grid_from_msg, observation_from_msg
from .delivery import AckPublisher
from .health import NodeHealth
from .node_clock import now_s, steady_clock, waiting_for_clock
from .lifecycle import DRAIN_TIMEOUT_S, ManagedNode, NotActiveError, ServingGate


OUTBOX_BATCHES_PER_POLL = 20   # the outbox sent 20 x 50 observations per fleet poll at most (a short callback)
MAX_INSERT_TRIES = 3   # an observation that fails unexpectedly this often is rejected (no endless resends)
STORE_OPEN_WAIT_S = 120.0   # configure waits this long for a store server (Milvus) that is not up yet


def open_store_waiting(params: StoreParams, log, wait_s: float = STORE_OPEN_WAIT_S, sleep=time.sleep, **kwargs):
    """open_store, tried again with backoff (1 s doubling to 15 s) for ``wait_s`` while it fails
    for a reason that may pass (a Milvus server still starting as the robot boots); a bad
    configuration (ConfigError/ValueError, a data directory that cannot be made) fails at once."""
    deadline, delay = time.monotonic() + wait_s, 1.0
    while True:
        try:
            return open_store(params, **kwargs)
        except (ConfigError, ValueError) as exc:
            raise exc
        except OSError as exc:
            if not isinstance(exc, (ConnectionError, TimeoutError)):
                raise
            error = exc
        except Exception as exc:  # noqa: BLE001 - e.g. pymilvus' MilvusException: maybe transient
            error = exc
        if time.monotonic() + delay > deadline:
            raise error
        log.warning(f"the store could not be opened ({type(error).__name__}: {error}); trying again in {delay:.0f} s")
        sleep(delay)
        delay = min(15.0, delay * 2)


class MemoryNode(ManagedNode):
    def __init__(self, **kwargs):
        super().__init__("memory", **node_options(kwargs))
        self.params = node_params(self, MemoryNodeParams)
        self.store = None                      # opened by configure
        self.health = h = NodeHealth(self)
        h.gauges["observations_stored_total"] = lambda: self.store.observation_count() if self.store else "n/a"
        h.gauges["store_bytes_on_disk"] = lambda: self.store.bytes_on_disk() if self.store else "n/a"
        h.gauges["fleet_outbox_pending"] = lambda: len(self._outbox) if self._outbox is not None else "n/a"
        h.gauges["fleet_clock_offset_s"] = lambda: round(self._clock_offset, 3) if self._clock_offset is not None \
            else "n/a"                         # a fleet's server: its clock minus this one (fleet_poll_s)
        self._clock_offset: float | None = None
        self._clock_skewed = False
        self._gate = ServingGate()             # open while active
        self._serving: list = []               # (destroy, entity): what activate created
        self._writes = MutuallyExclusiveCallbackGroup()
        self._reads = ReentrantCallbackGroup()
        self._fleet_group = MutuallyExclusiveCallbackGroup()   # the fleet poll: network calls, one at a time
        self._acks = self._forgotten_pub = self._markers_pub = None
        self._warm_up: threading.Thread | None = None
        self._forgotten_sent: set[str] = set()
        self._ids = FleetIds("")                   # a fleet's server: this robot's ids, qualified (fleet/ids.py)
        self._outbox: Outbox | None = None         # a fleet's server: what it could not take yet (store/outbox.py)
        self._server_away = False                  # the server did not answer: questions from the outbox
        self._failures: dict[str, int] = {}   # observation id -> unexpected insert failures so far
        self._dirty = threading.Event()
        self.start_serving(self.params.autostart)

    # -- lifecycle (ManagedNode's transitions call these) -------------------------------------------
    def _configure(self) -> None:
        p = self.params
        store_fields = StoreParams.__dataclass_fields__
        query_encoder = None
        if p.clip_weights:                       # missing weights or open_clip: configure fails naming the setting
            from ..perception.image_embedding import ClipTextQuery
            query_encoder = ClipTextQuery(p.clip_model, p.clip_weights, p.device)
            if query_encoder.dim != p.image_dim:
                raise ConfigError(f"clip_weights: {p.clip_model} embeds into {query_encoder.dim} dimensions but "
                                  f"image_dim is {p.image_dim}: set image_dim to the image embedder's (CLIP's)")
        store_params = StoreParams(**{k: getattr(p, k) for k in store_fields})
        if store_params.robot_id == "auto" or (store_params.backend == "postgres" and not store_params.robot_id):
            store_params = dataclasses.replace(store_params, robot_id=robot_id_of(self.get_namespace()))
        if "{robot_id}" in store_params.postgres_url:    # one stack file for every robot: its login is its id
            store_params = dataclasses.replace(store_params, postgres_url=store_params.postgres_url.replace(
                "{robot_id}", store_params.robot_id))
        self.store = open_store_waiting(store_params, self.get_logger(), image_query_embedder=query_encoder)
        self._ids = FleetIds(store_params.robot_id if self.store.on_server else "")
        if self.store.on_server and self._outbox is None:   # the server away: observations kept here, in order
            self._outbox = Outbox(store_params.data_dir, store_params)
        self.get_logger().info(f"memory store ({p.backend}) at {self.store.location}"
                               f"{' as robot ' + store_params.robot_id if store_params.robot_id else ''}: "
                               f"{self.store.observation_count()} observations")
        sweep_partial_images(self.store.images_dir)
        self._warm_up = threading.Thread(target=self.store.warm_up, name="index_warm_up", daemon=True)
        self._warm_up.start()
        if self._acks is None:   # transient local: created once, their history outlives a cleanup
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)
            self._acks = AckPublisher(self, p.acks_topic)
            self._forgotten_pub = self.create_publisher(IdentityForgotten, p.forgotten_topic, forgotten_qos())
            self._markers_pub = self.create_publisher(MarkerArray, p.markers_topic, latched)

    def _activate(self) -> None:
        p, h = self.params, self.health
        writes, reads = self._writes, self._reads
        self._gate.open()
        add = self._serving.append
        add((self.destroy_subscription, self.create_subscription(
            ObservationMsg, p.observations_topic, h.guard(self._gated(self._on_observation), "observation"),
            QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE), callback_group=writes)))
        add((self.destroy_subscription, self.create_subscription(
            IdentityMerge, p.merges_topic, h.guard(self._gated(self._on_merge), "identity merge"),
            QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE), callback_group=writes)))
        add((self.destroy_subscription, self.create_subscription(
            IdentitySplit, p.identity_changes_topic, h.guard(self._gated(self._on_identity_change), "identity change"),
            QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE), callback_group=writes)))
        add((self.destroy_subscription, self.create_subscription(
            EpisodeMap, p.episode_maps_topic, h.guard(self._gated(self._on_episode_map), "episode map"),
            QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE), callback_group=writes)))
        for srv_type, name, callback, group in (
                (QueryMemory, MEMORY_QUERY_SERVICE, self._on_query, reads),
                (GetMemoryStats, MEMORY_STATS_SERVICE, self._on_stats, reads),
                (Forget, MEMORY_FORGET_SERVICE, self._on_forget, writes),
                (NameIdentity, MEMORY_NAME_SERVICE, self._on_name, writes)):
            add((self.destroy_service, self.create_service(
                srv_type, name, h.guard_service(self._gated(callback, refuse=True), name.rsplit("/", 1)[-1]),
                qos_profile=service_qos(), callback_group=group)))
        self._dirty.set()
        add((self.destroy_timer, self.create_timer(p.markers_period_s, h.guard(self._gated(self._publish_markers),
                                                                               "markers"), callback_group=reads, clock=steady_clock())))
        self._publish_forgotten()             # a perception node that starts later forgets them too
        if self.store.on_server:              # a forget anywhere in the fleet reaches this robot's perception
            h.guard(lambda: self._fleet_poll(flush=False), "fleet poll")()   # the outbox: in the timer
            add((self.destroy_timer, self.create_timer(p.fleet_poll_s, h.guard(self._gated(self._fleet_poll),
                                                                                 "fleet poll"),
                                                       callback_group=self._fleet_group, clock=steady_clock())))

    def _to_outbox(self, obs, local_id: str, why: str) -> None:
        """Keep an observation the server cannot take now in the outbox (durably), then acknowledge it
        (one the store would reject is rejected now, as it would be on the server)."""
        reason = self.store.rejection(obs)
        if reason is not None:
            self._reject(local_id, reason)
            return
        first = not len(self._outbox)
        try:
            self._outbox.put(obs)
        except StoreWriteError as exc:                     # this robot's disk too: not acknowledged, resent
            self.health.drop("store_write_error", f"observation {local_id!r}: {why}; outbox: {exc}")
            return
        if first:
            self.get_logger().warning(f"the fleet's server cannot take observations ({why}); keeping them in the "
                                      f"outbox at {self._outbox.folder} until it answers")
        self._acks.send(local_id, Ack.STORED)
        self.health.count("observations_to_outbox")

    def _flush_outbox(self) -> None:
        """What waits in the outbox to the server, oldest first (the rest stays if it is still away)."""
        if self._outbox is None or not len(self._outbox):
            return
        try:
            sent = self._outbox.flush(self.store, max_batches=OUTBOX_BATCHES_PER_POLL)
        except (StoreWriteError, StoreConfigError) as exc:
            self.get_logger().info(f"outbox: {len(self._outbox)} observations wait; the server: {exc}",
                                   throttle_duration_sec=60.0)
            return
        if not len(self._outbox):
            self.get_logger().info(f"outbox: {sent} observations handed to the fleet's server; the fleet's view "
                                   "is current again")
        self._dirty.set()

    def _fleet_poll(self, flush: bool = True) -> None:
        """A fleet's server: the outbox sent (a share per poll), forgets made elsewhere, files to remove
        here, this clock against the server's."""
        if flush:
            self._flush_outbox()
        self._publish_forgotten()
        self.store.remove_files_handed_over()   # images of records an operator deleted, kept on this robot
        offset = self.store.server_clock_offset_s()
        skewed = abs(offset) > self.params.max_clock_skew_s
        if skewed and not self._clock_skewed:
            self.get_logger().warning(f"this clock is {offset:+.2f} s off the fleet server's (more than "
                                      f"max_clock_skew_s {self.params.max_clock_skew_s} s): other robots' records "
                                      "are not in time order with this robot's; fix NTP/chrony")
        self._clock_skewed, self._clock_offset = skewed, offset
        self._server_away = False          # every call above reached it: questions go to the server again

    def _publish_forgotten(self) -> None:
        """Forgotten identities, as this robot's perception names them (on a fleet: its own ids,
        the aliases a reconcile gave another robot's person included)."""
        for fleet_id in self.store.forgotten_identities():
            identity = self._ids.local_identity(fleet_id)
            if identity and identity not in self._forgotten_sent:
                self._forgotten_pub.publish(IdentityForgotten(stamp=self.get_clock().now().to_msg(),
                                                              identity_id=identity))
                self._forgotten_sent.add(identity)

    def _stop_serving(self) -> None:
        """Not active any more: nothing new starts; what runs finishes (bounded); the
        subscriptions and services go, so senders keep their records and clients see no server."""
        if not self._gate.close(DRAIN_TIMEOUT_S):
            self.get_logger().warning(f"callbacks still running after {DRAIN_TIMEOUT_S:.0f} s")
        serving, self._serving = self._serving, []
        for destroy, entity in serving:
            destroy(entity)

    def release(self) -> None:
        """Back to unconfigured (cleanup, shutdown, an error): close the store."""
        self._stop_serving()
        if self._warm_up is not None:
            self._warm_up.join(DRAIN_TIMEOUT_S)
            self._warm_up = None
        store, self.store = self.store, None
        if store is not None:
            store.close()
        outbox, self._outbox = self._outbox, None
        if outbox is not None:
            outbox.close()

    def _gated(self, callback, refuse: bool = False):
        """``callback`` only while active: an input is then not acknowledged (its sender sends it
        again), a request gets success=false (``refuse``)."""
        def gated(*args):
            with self._gate.entered() as active:
                if active:
                    return callback(*args)
            if refuse:
                raise NotActiveError(f"the memory node is {self.lifecycle_state}, not active")
            self.health.count("inputs_while_inactive")
            return None
        return gated

    # -- inputs and requests (active) -------------------------------------------------------------
    def _on_observation(self, msg: ObservationMsg) -> None:
        try:
            obs = observation_from_msg(msg)
        except (ValueError, TypeError) as exc:
            self._reject(msg.observation_id, f"malformed: {exc}")
            return
        local_id = obs.observation_id
        self._ids.qualify(obs)
        if self._outbox is not None and len(self._outbox):    # older ones wait to be sent: keep their order
            self._to_outbox(obs, local_id, "older observations wait in the outbox")
            return
        try:
            result = insert_with_images(self.store, [obs])
        except StoreWriteError as exc:
            if self._outbox is not None:                       # the fleet's server away: kept on this robot
                self._server_away = True
                self._to_outbox(obs, local_id, str(exc))
            else:                                              # not acknowledged: the sender keeps it, resends it
                self.health.drop("store_write_error", f"observation {msg.observation_id!r}: {exc}")
            return
        except StoreConfigError as exc:   # not acknowledged: the sender keeps it, sends it again
            self.health.drop("store_write_error", f"observation {msg.observation_id!r}: {exc}")
            return
        except (StoreError, ValueError, TypeError) as exc:   # the record itself: it will fail again
            self._reject(msg.observation_id, f"{getattr(exc, 'kind', type(exc).__name__)}: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - maybe transient (a remote index): not acknowledged, so
            tries = self._failures[msg.observation_id] = self._failures.get(msg.observation_id, 0) + 1  # resent
            if tries < MAX_INSERT_TRIES:
                self.health.drop(f"insert_failed: {type(exc).__name__}", f"observation {msg.observation_id!r} "
                                 f"(try {tries} of {MAX_INSERT_TRIES}): {exc}")
            else:
                self._failures.pop(msg.observation_id, None)
                self._reject(msg.observation_id, f"{type(exc).__name__} in {MAX_INSERT_TRIES} tries: {exc}")
            return
        self._failures.pop(msg.observation_id, None)
        if result.stored:                                # acknowledged under the sender's own id
            self._acks.send(local_id, Ack.STORED)
        if result.duplicates:
            self._acks.send(local_id, Ack.DUPLICATE)
        for reason in result.rejected.values():
            self._reject(local_id, reason)
        self.health.count("observations_stored", len(result.stored))
        self.health.count("observations_duplicate", len(result.duplicates))
        if result.sightings_dropped:
            self.health.count("sightings_of_forgotten_identities_dropped", result.sightings_dropped)
        self._dirty.set()

    def _reject(self, observation_id: str, reason: str) -> None:
        self.health.drop(f"observation_rejected: {reason.split(':', 1)[0]}", f"observation {observation_id!r}")
        self.get_logger().error(f"rejected observation {observation_id!r}: {reason}")
        self._acks.send(observation_id, Ack.REJECTED, reason)

    def _on_episode_map(self, msg: EpisodeMap) -> None:
        try:
            values, resolution, origin = grid_from_msg(msg.map)
            self.store.save_occupancy_map(self._ids.record(msg.episode_id), values, resolution, origin)
        except (StoreError, ValueError) as exc:
            self.health.drop("episode_map_rejected", f"the map of episode {msg.episode_id!r}: {exc}")
            return
        self.get_logger().info(f"saved the occupancy map of episode {msg.episode_id} ({values.shape[1]}x{values.shape[0]})")

    def _on_merge(self, msg: IdentityMerge) -> None:
        merge = f"merge:{msg.absorbed_id}>{msg.surviving_id}"   # perception keeps it until acknowledged
        try:
            moved = self.store.merge_identities(self._ids.identity(msg.absorbed_id), self._ids.identity(msg.surviving_id))
        except (StoreWriteError, StoreConfigError) as exc:   # kept by perception, sent again
            self.health.drop("store_write_error", f"identity merge {merge}: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - an invalid merge will not become valid
            self.health.drop("identity_merge_rejected", f"identity merge {merge}: {exc}")
            self._acks.send(merge, Ack.REJECTED, str(exc))
            return
        self._acks.send(merge, Ack.STORED)
        self.get_logger().info(f"identity {msg.absorbed_id} merged into {msg.surviving_id} ({moved} sightings)")
        self._dirty.set()

    def _on_identity_change(self, msg: IdentitySplit) -> None:
        """Consolidation's move of some sightings (perception keeps it until acknowledged; applied
        once, a resend changes nothing)."""
        if msg.kind not in (IdentitySplit.KIND_SPLIT, IdentitySplit.KIND_MERGE, IdentitySplit.KIND_ASSIGN):
            self.health.drop("identity_change_rejected", f"identity change {msg.change_id}: kind {msg.kind!r}")
            self._acks.send(msg.change_id, Ack.REJECTED, f"unknown kind {msg.kind!r} (split | merge | assign)")
            return
        try:
            journalled = self.store.relabel_sightings([(msg.kind, self._ids.identity(msg.source_id),
                                                        self._ids.identity(msg.target_id),
                                                        [int(i) for i in msg.sighting_ids])])
        except (StoreWriteError, StoreConfigError) as exc:
            self.health.drop("store_write_error", f"identity change {msg.change_id}: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - an invalid change will not become valid
            self.health.drop("identity_change_rejected", f"identity change {msg.change_id}: {exc}")
            self._acks.send(msg.change_id, Ack.REJECTED, str(exc))
            return
        self._acks.send(msg.change_id, Ack.STORED)
        if journalled:
            self.get_logger().info(f"identity {msg.kind}: {len(msg.sighting_ids)} sightings of {msg.source_id} -> "
                                   f"{msg.target_id}")
            self._dirty.set()

    def _on_query(self, request, response):
        try:
            arguments = json.loads(request.arguments_json or "{}")
        except (ValueError, RecursionError) as exc:
            raise StoreError(f"arguments_json is not JSON: {exc}", kind="InvalidArgumentError") from exc
        if isinstance(arguments, dict):          # a peer's own episode (the explorer's run): the fleet's id for it
            self._ids.qualify_arguments(arguments)
        outbox = self._outbox
        try:
            if not (self._server_away and outbox is not None and len(outbox)):
                result = self.store.call_tool(request.tool, arguments)
            else:           # away: no wait for a connection timeout; the fleet poll finds it again
                raise StoreError("the fleet's memory server is away", kind=SERVER_UNREACHABLE)
        except StoreError as exc:
            if exc.kind == SERVER_UNREACHABLE and outbox is not None:
                self._server_away = True
            if outbox is None or exc.kind != SERVER_UNREACHABLE or not len(outbox):
                raise
            result = outbox.answer(request.tool, arguments)       # what this robot has not sent yet
            response.notice = (f"the fleet's memory server is not reachable: answered from the {len(outbox)} "
                               "observations this robot has not sent yet; the fleet's view is stale")
        response.result_json = json.dumps(result, default=str, allow_nan=False)
        response.success = True
        return response

    def _on_stats(self, _request, response):
        with self.store.read_errors("stats"):
            s = self.store.stats()
        response.stats = MemoryStats(
            backend=s["backend"], data_dir=s["data_dir"], timezone=self.params.timezone, episodes=s["episodes"],
            observations=s["observations"], regions=s["regions"], person_sightings=s["person_sightings"],
            identities=s["identities"], rules=s["rules"], bytes_on_disk=s["bytes_on_disk"],
            oldest=to_time_msg(s["oldest"] or 0.0), newest=to_time_msg(s["newest"] or 0.0))
        return response

    def _on_forget(self, request, response):
        if request.mode == Forget.Request.MODE_IDENTITY:
            result = self.store.forget_identity(request.identity_id, dry_run=request.dry_run)
            if not request.dry_run:   # perception drops the face and re-ID points too
                self._forgotten_pub.publish(IdentityForgotten(
                    stamp=self.get_clock().now().to_msg(), identity_id=result["identity_id"],
                    aliases=list(result.get("aliases", []))))
        elif request.mode == Forget.Request.MODE_OLDER_THAN:
            # robot time: with use_sim_time a replayed day is not "older than" the wall clock's now
            if waiting_for_clock(self):
                raise StoreError("forget older_than: use_sim_time is set but no /clock received yet")
            result = self.store.forget_older_than(request.older_than_hours, now=now_s(self), dry_run=request.dry_run)
        elif request.mode == Forget.Request.MODE_EPISODE:
            result = self.store.forget_episode(request.episode_id, dry_run=request.dry_run)
        else:
            raise StoreError(f"unknown mode {request.mode!r} (identity | older_than | episode)")
        response.success = True
        response.observations_removed = result["observations_removed"]
        response.sightings_removed = result["sightings_removed"]
        response.files_removed = result["files_removed"]
        response.images_removed = result.get("images_removed", 0)
        response.identity_id = result.get("identity_id", "")
        response.message = ("would remove" if request.dry_run else "removed") + \
            f" {result['observations_removed']} observations, {result['sightings_removed']} sightings"
        self._dirty.set()
        return response

    def _on_name(self, request, response):
        survivor = self.store.name_identity(request.identity_id, request.display_name)
        response.success = True
        response.message = "ok" if survivor == request.identity_id else \
            f"{request.display_name!r} already named {survivor}: {request.identity_id} merged into it"
        self._dirty.set()
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
        """The process ends (run_node): whatever the state, close the store."""
        self.release()


def main() -> None:
    run_node(MemoryNode)


if __name__ == "__main__":
    main()
