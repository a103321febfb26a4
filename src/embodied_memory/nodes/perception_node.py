"""perception_node: /memory/keyframes -> /memory/observations (+ /memory/identity_merges,
/memory/identity_changes; serves /perception/consolidate).

Keyframes are queued by the subscription (acknowledged as accepted) and perceived in a worker
thread, so no callback waits for the models or a VLM endpoint. Observations and identity merges
are kept until the memory acknowledges them (``/memory/acks``) and sent again to a restarted
memory node. A keyframe that fails ``max_attempts`` times (a VLM endpoint down) or cannot be
decoded is acknowledged as dropped, so the frame selector stops keeping it; a full queue
accepts nothing more, so the frame selector sends it again later. ``/memory/forgotten_identities``
(from the memory node, on an operator's forget request) makes it drop the identity's face and
re-ID points at once.

Consolidation ("sleep", ``consolidate_memory.consolidate_live``) runs on a
``/perception/consolidate`` request and every ``consolidate_every_h`` hours of operation (steady clock),
in its own callback group: it reads the stored sightings from ``data_dir/memory.sqlite3``
read-only, rebuilds the identity state (split ids from its counter) and sends each move as an
``IdentitySplit`` on ``/memory/identity_changes``, kept (durably, in the identity state) and sent
again until the memory acknowledges it.  Once no keyframe has come for ``attach_after_idle_s``
(node clock: sim time in a replay) the attach pass runs, once per idle spell, the same way: it
only gives identities to stored sightings without one whose face is now clearly someone's.

Lifecycle (nodes/lifecycle.py): configure loads the models and the identity state (missing
weights fail it, the reason logged) and starts the worker; activate subscribes to keyframes
and lets the worker take them; deactivate unsubscribes (the frame selector keeps what is not
accepted) and the worker stops taking keyframes after the one in hand; cleanup stops the worker
and releases the models. Keyframes accepted but not perceived stay queued, and observations
not yet acknowledged stay kept and are still delivered, across deactivate and cleanup.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
from collections import OrderedDict

from embodied_memory_interfaces.msg import Ack, IdentityForgotten, IdentityMerge, IdentitySplit
from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import Consolidate
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ..consolidate_memory import consolidate_live, refresh_live

from ..ingest.images import ImageDecodeError, decode_depth, decode_image_msg, pixel_intrinsics
from ..params import CONSOLIDATE_SERVICE, PerceptionNodeParams
from ..perception.pipeline import Perception, PerceptionParams
from ..types import Keyframe
from .common import forgotten_qos, from_time_msg, keyframe_qos, node_options, node_params, run_node, to_time_msg
from .conversions import observation_to_msg, optional_pose_from_msg
from .delivery import AckPublisher, AcknowledgedPublisher
from .health import NodeHealth
from .lifecycle import DRAIN_TIMEOUT_S, ManagedNode, ServingGate
from .node_clock import steady_clock

RECENT_KEYFRAMES = 2000   # keyframe ids already queued or perceived (a resent keyframe is not perceived twice)


def merge_id(msg: IdentityMerge) -> str:
    return f"merge:{msg.absorbed_id}>{msg.surviving_id}"


class PerceptionNode(ManagedNode):
    def __init__(self, **kwargs):
        super().__init__("perception", **node_options(kwargs))
        p = self.params = node_params(self, PerceptionNodeParams)
        self.perception: Perception | None = None   # loaded by configure
        self.health = h = NodeHealth(self)
        self._observations = self._merges = self._changes = self._acks = None   # created by the first configure
        self._consolidation = MutuallyExclusiveCallbackGroup()   # seconds of work: never on the keyframe path
        self._consolidate_srv = self._consolidate_timer = self._idle_timer = None
        self._last_perceived = 0.0                 # node clock (s) when the last keyframe was perceived (0: none)
        self._attached_at = 0                      # self.processed when the last attach pass began
        self._queue: queue.Queue = queue.Queue(maxsize=p.max_queued_keyframes)
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._in_work: set[str] = set()            # queued or being perceived
        self._lock = threading.Lock()
        self.forgotten: set[str] = set()
        self.processed = 0
        h.gauges["keyframes_perceived"] = lambda: self.processed
        h.gauges["keyframes_queued"] = self._queue.qsize
        h.gauges["sightings_of_forgotten_faces_not_recorded"] = \
            lambda: self.perception.suppressed_sightings if self.perception else "n/a"
        self._gate = ServingGate()                 # open while active
        self._drained = True                       # no callback left running when it last closed
        self._taking = threading.Event()           # set while active: the worker takes keyframes
        self._stop = threading.Event()             # set by cleanup: the worker ends
        self._worker: threading.Thread | None = None
        self._keyframes_sub = self._forgotten_sub = None
        self.start_serving(p.autostart)

    # -- lifecycle (ManagedNode's transitions call these) -------------------------------------------
    def _configure(self) -> None:
        p, h = self.params, self.health
        core = {f.name: getattr(p, f.name) for f in dataclasses.fields(PerceptionParams)}
        self.perception = Perception(PerceptionParams(**core))  # missing weights: error naming the parameter
        if self._observations is None:   # created once: what they keep outlives a cleanup
            reliable = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
            self._observations = AcknowledgedPublisher(
                self, ObservationMsg, p.observations_topic, reliable, acks_topic=p.acks_topic, health=h,
                id_of=lambda m: m.observation_id, what="observation", max_unacked=p.max_unacked_observations,
                resend_after_s=p.resend_after_s)
            self._merges = AcknowledgedPublisher(
                self, IdentityMerge, p.merges_topic, reliable, acks_topic=p.acks_topic, health=h, id_of=merge_id,
                what="identity_merge", max_unacked=10_000, resend_after_s=p.resend_after_s,
                on_done=lambda key, _status: self._acknowledged(merge=tuple(key[len("merge:"):].split(">", 1))))
            self._changes = AcknowledgedPublisher(
                self, IdentitySplit, p.identity_changes_topic, reliable, acks_topic=p.acks_topic, health=h,
                id_of=lambda m: m.change_id, what="identity_change", max_unacked=10_000,
                resend_after_s=p.resend_after_s, on_done=lambda key, _status: self._acknowledged(change_id=key))
            self._acks = AckPublisher(self, p.acks_topic)
        self.forgotten = set()   # the memory's transient-local history applies every forget to these identities
        self._forgotten_sub = self.create_subscription(
            IdentityForgotten, p.forgotten_topic, h.guard(self._on_forgotten, "forgotten identity"), forgotten_qos())
        self._stop.clear()
        self._worker = threading.Thread(target=self._work, name="perception", daemon=True)
        self._worker.start()
        self.get_logger().info(f"perception: {self.perception.describer.name} describer, "
                               f"{p.person_detector} people, {p.face_backend} faces")

    def _activate(self) -> None:
        self._gate.open()
        self._taking.set()
        self._keyframes_sub = self.create_subscription(
            KeyframeMsg, self.params.keyframes_topic, self.health.guard(self._on_keyframe, "keyframe"),
            keyframe_qos())
        for absorbed, survivor in self.perception.take_merges():   # recomputed from the identity journal
            self._publish_merge(absorbed, survivor)
        for change in self.perception.identities.change_log:       # applied once however often sent
            self._publish_change(change)
        self._consolidate_srv = self.create_service(
            Consolidate, CONSOLIDATE_SERVICE, self.health.guard_service(self._on_consolidate, "consolidate"),
            callback_group=self._consolidation)
        if self.params.consolidate_every_h > 0:
            self._consolidate_timer = self.create_timer(   # hours of operation (steady): a replay's sim clock
                self.params.consolidate_every_h * 3600.0,      # may stop or leap
                self.health.guard(self._on_timer, "consolidation"), callback_group=self._consolidation,
                clock=steady_clock())
        if self.params.attach_after_idle_s > 0:
            self._idle_timer = self.create_timer(      # steady: checks the node clock's idle time
                min(60.0, self.params.attach_after_idle_s / 4), self.health.guard(self._on_idle_check, "attach pass"),
                callback_group=self._consolidation, clock=steady_clock())

    def _stop_serving(self) -> None:
        """Takes no keyframes any more (the frame selector keeps them); the worker finishes the
        one in hand and waits."""
        self._drained = self._gate.close(DRAIN_TIMEOUT_S)
        if not self._drained:
            self.get_logger().warning(f"a consolidation pass still running after {DRAIN_TIMEOUT_S:.0f} s")
        self._taking.clear()
        sub, self._keyframes_sub = self._keyframes_sub, None
        if sub is not None:
            self.destroy_subscription(sub)
        srv, self._consolidate_srv = self._consolidate_srv, None
        if srv is not None:
            self.destroy_service(srv)
        for timer in (self._consolidate_timer, self._idle_timer):
            if timer is not None:
                self.destroy_timer(timer)
        self._consolidate_timer = self._idle_timer = None

    def release(self) -> None:
        """Back to unconfigured: stop the worker, release the models (the identity state is saved)."""
        self._stop_serving()
        if not self._drained:      # do not close the identity state under a pass that still writes it
            raise RuntimeError(f"a consolidation pass did not finish in {DRAIN_TIMEOUT_S:.0f} s; identity state "
                               "saved as of its last change")
        sub, self._forgotten_sub = self._forgotten_sub, None
        if sub is not None:
            self.destroy_subscription(sub)
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout=DRAIN_TIMEOUT_S)
            if self._worker.is_alive():   # a model call that does not return: do not close under it
                raise RuntimeError(f"the perception worker did not stop in {DRAIN_TIMEOUT_S:.0f} s; identity "
                                   "state saved as of its last keyframe")
            self._worker = None
        perception, self.perception = self.perception, None
        if perception is not None:
            perception.close()

    # -- the subscription: queue, never perceive here ------------------------------------------
    def _on_keyframe(self, msg: KeyframeMsg) -> None:
        with self._gate.entered() as active:
            if active:
                self._take_keyframe(msg)
            else:   # not acknowledged: the frame selector keeps it and sends it again
                self.health.count("keyframes_while_inactive")

    def _take_keyframe(self, msg: KeyframeMsg) -> None:
        with self._lock:
            if msg.keyframe_id in self._recent:   # sent again: say where it is, so it is not resent forever
                self.health.count("keyframes_already_perceived")
                done = not self._observations.pending(msg.keyframe_id) and msg.keyframe_id not in self._in_work
                self._acks.send(msg.keyframe_id, Ack.DUPLICATE if done else Ack.ACCEPTED)
                return
            try:
                self._queue.put_nowait(msg)
                self._in_work.add(msg.keyframe_id)
            except queue.Full:   # not accepted: the frame selector sends it again later
                self.health.drop("perception_queue_full", f"keyframe {msg.keyframe_id} (queue of "
                                                          f"{self.params.max_queued_keyframes})")
                return
            self._recent[msg.keyframe_id] = None
            while len(self._recent) > RECENT_KEYFRAMES:
                self._recent.popitem(last=False)
        self._acks.send(msg.keyframe_id, Ack.ACCEPTED)

    def _drop(self, msg: KeyframeMsg, reason: str, detail: str) -> None:
        self.health.drop(reason, f"keyframe {msg.keyframe_id}: {detail}")
        self._acks.send(msg.keyframe_id, Ack.DROPPED, f"{reason}: {detail}")

    # -- the worker ------------------------------------------------------------------------------
    def _work(self) -> None:
        while not self._stop.is_set():
            if not self._taking.wait(0.2):   # inactive: what is queued waits for the next activation
                continue
            try:
                msg = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            requeued = False
            try:
                requeued = self._perceive(msg)
            except Exception as exc:  # noqa: BLE001 - the worker must survive anything one keyframe does
                self._drop(msg, "perception_error", f"{type(exc).__name__}: {exc}")
            finally:
                if not requeued:
                    with self._lock:
                        self._in_work.discard(msg.keyframe_id)

    def _put_back(self, msg: KeyframeMsg) -> bool:
        """Stopping before the keyframe was perceived: queue it again for the next configuration
        (True); a full queue forgets it, and the frame selector sends it again on activation."""
        try:
            self._queue.put_nowait(msg)
            return True
        except queue.Full:
            with self._lock:
                self._recent.pop(msg.keyframe_id, None)
            return False

    def _keyframe(self, msg: KeyframeMsg) -> Keyframe:
        image = decode_image_msg(msg.compressed_image if len(msg.compressed_image.data) else msg.image)
        depth = None
        if msg.has_depth:
            d = msg.depth
            try:
                depth = decode_depth(d.encoding, d.height, d.width, d.step, d.data)
            except ImageDecodeError as exc:
                self.health.count("depth_ignored")
                self.get_logger().warning(f"keyframe {msg.keyframe_id}: depth ignored: {exc}")
        intrinsics = pixel_intrinsics(msg.camera_info, (image.shape[1], image.shape[0]))
        return Keyframe(msg.keyframe_id, from_time_msg(msg.header.stamp), msg.episode_id, optional_pose_from_msg(msg.pose),
                        image, segment_id=msg.segment_id, waypoint_id=msg.waypoint_id, depth=depth,
                        intrinsics=intrinsics, selection_score=msg.selection_score)

    def _perceive(self, msg: KeyframeMsg) -> bool:
        """Perceive one keyframe and publish its observations; True when it was queued again."""
        try:
            kf = self._keyframe(msg)
        except ImageDecodeError as exc:
            self._drop(msg, "undecodable_image", str(exc))
            return False
        for attempt in range(1, self.params.max_attempts + 1):
            try:   # a retry reuses the people (and identities) of the failed attempt: no face counted twice
                observations = self.perception.process([kf])
                break
            except Exception as exc:  # noqa: BLE001 - e.g. the VLM endpoint is down: wait, try again
                if self._stop.is_set() or not self.context.ok():   # cleanup or the process ends: not a failure
                    self.perception.forget_attempt(kf.keyframe_id)
                    return self._put_back(msg)
                if attempt == self.params.max_attempts:
                    self.perception.forget_attempt(kf.keyframe_id)
                    self._drop(msg, "perception_failed", f"{type(exc).__name__}: {exc} ({attempt} attempts)")
                    return False
                self.health.count("perception_retries")
                self.get_logger().warning(f"keyframe {msg.keyframe_id}: perception failed (attempt {attempt} of "
                                          f"{self.params.max_attempts}): {type(exc).__name__}: {exc}")
                self._stop.wait(min(30.0, 2.0 ** attempt))
        if not self.context.ok():
            return False   # the process ends: nothing can be published; the frame selector resends it
        for obs in observations:
            obs.people = [s for s in obs.people if s.identity_id not in self.forgotten]
            self._observations.publish(observation_to_msg(obs))
        for absorbed, survivor in self.perception.take_merges():
            self._publish_merge(absorbed, survivor)
        self.processed += 1
        self._last_perceived = self.get_clock().now().nanoseconds * 1e-9   # 0 before a sim clock starts
        if self.processed % 50 == 0:
            self.perception.identities.save()
        return False

    def _publish_merge(self, absorbed: str, survivor: str) -> None:
        self._merges.publish(IdentityMerge(stamp=to_time_msg(self.get_clock().now().nanoseconds * 1e-9),
                                           absorbed_id=absorbed, surviving_id=survivor))

    def _publish_change(self, change: dict) -> None:
        self._changes.publish(IdentitySplit(
            stamp=to_time_msg(self.get_clock().now().nanoseconds * 1e-9), change_id=change["change_id"],
            kind=change["kind"], source_id=change["source"], target_id=change["target"],
            sighting_ids=change["sightings"]))

    def _acknowledged(self, merge=None, change_id: str = "") -> None:
        perception = self.perception
        if perception is not None:
            perception.identities.acknowledged(merge=merge, change_id=change_id)

    def _consolidate(self, dry_run: bool, mode: str = "full"):
        """One consolidation pass (the service's and the timers', one at a time: one callback
        group); returns its report."""
        with self._gate.entered() as active:      # a deactivation waits for the pass in hand
            if not active or self.perception is None:
                raise RuntimeError("perception is not active")
            report = self._consolidate_active(dry_run, mode)
        summary = report.summary()
        self.get_logger().info(f"consolidation ({mode}): " + (summary.splitlines()[0] if mode == "attach" else summary))
        return report

    def _consolidate_active(self, dry_run: bool, mode: str = "full"):
        perception = self.perception
        db = perception.data_dir / "memory.sqlite3"
        if not db.exists():
            raise FileNotFoundError(f"no memory at {db}: consolidation reads the memory node's database (give "
                                    "both nodes one data_dir)")
        forgotten_before = set(self.forgotten)
        report, changes = consolidate_live(db, perception.identities, dry_run=dry_run, mode=mode)
        if report.applied:     # the database may have been read before a forget: forgotten stays forgotten
            for identity in sorted(self.forgotten):
                perception.identities.forget(identity, suppress=self.params.forgotten_person == "drop")
            if self.forgotten - forgotten_before:     # their faces may be under the moves' targets
                refresh_live(db, perception.identities)
        for change in changes:
            self._publish_change(change)
        return report

    def _on_consolidate(self, request, response):
        report = self._consolidate(request.dry_run)
        response.success, response.message = True, report.summary()
        response.merges, response.splits, response.relabelled = len(report.merges), len(report.splits), \
            report.relabelled
        return response

    def _on_timer(self) -> None:
        self._consolidate(dry_run=False)

    def _on_idle_check(self) -> None:
        """The attach pass, once the robot has been idle ``attach_after_idle_s`` of node clock after
        perceiving a keyframe: once per idle spell, when the memory holds everything perception sent
        (observations, merges and earlier moves acknowledged); a pass that fails is tried again at
        the next check.  A replay's sim clock that stops at the end of the bag never gets there."""
        perception, seen = self.perception, self.processed
        now = self.get_clock().now().nanoseconds * 1e-9
        if seen == self._attached_at or self._last_perceived <= 0 or \
                now - self._last_perceived < self.params.attach_after_idle_s or perception is None:
            return
        if perception.identities.change_log or perception.identities.merge_log or self._observations.unacknowledged:
            return      # the memory does not hold all of it yet: the pass would plan on an older memory
        if not (perception.data_dir / "memory.sqlite3").exists():
            self._attached_at = seen       # no memory beside us (another data_dir): nothing to attach to
            return
        self._consolidate(dry_run=False, mode="attach")
        self._attached_at = seen

    def _on_forgotten(self, msg: IdentityForgotten) -> None:
        forgot = False
        for identity in [msg.identity_id, *msg.aliases]:
            if identity and identity not in self.forgotten:
                self.forgotten.add(identity)
                known = self.perception.identities.forget(identity, suppress=self.params.forgotten_person == "drop")
                self.get_logger().info(f"forgot identity {identity}" + ("" if known else " (not known here)"))
                forgot = True
        db = self.perception.data_dir / "memory.sqlite3"
        if forgot and db.exists() and refresh_live(db, self.perception.identities):
            # a pass's pending moves had given the person's faces to other identities
            self.get_logger().info("identity state rebuilt from the memory after a forget during consolidation")

    def close(self) -> None:
        """The process ends (run_node): whatever the state, stop the worker and save the identities."""
        try:
            self.release()
        except RuntimeError as exc:   # a model call that does not return: do not close under it
            self.get_logger().warning(str(exc))


def main() -> None:
    run_node(PerceptionNode, threads=2)


if __name__ == "__main__":
    main()
