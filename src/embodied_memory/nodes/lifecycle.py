"""Managed (lifecycle) nodes: what the memory and perception nodes share.

Both are ``rclpy.lifecycle.LifecycleNode`` objects with the standard ROS 2 states::

    unconfigured --configure--> inactive --activate--> active
    active --deactivate--> inactive --cleanup--> unconfigured;  any --shutdown--> finalized

* **unconfigured** (after construction): parameters declared and validated, /diagnostics
  published, nothing else: no store opened, no model loaded.
* **configure**: the heavy part (the memory opens its store, perception loads its models) and
  the publishers. A failure (bad data directory, missing weights, a bad parameter value)
  returns FAILURE with the reason in the node's log, and the node stays unconfigured.
* **activate**: subscriptions and services are created: the node serves.
* **deactivate**: they are destroyed again. Nothing is lost: an inactive receiver
  acknowledges nothing, so its senders keep every record (nodes/delivery.py) and send them
  all again when its subscription reappears.
* **cleanup**: the store is closed / the models released; **shutdown** does the same from any
  state.

Who drives the transitions: ``embodied-memory launch`` (launcher.py), ``ros2 launch``
(launch_ros ``LifecycleNode(autostart=True)``), a lifecycle manager, ``ros2 lifecycle set``,
or the node itself with the parameter ``autostart: true`` (a hand-run ``ros2 run``; the
default is false, as for every managed node, so that a launch system can sequence it).
The current state is on /diagnostics as ``lifecycle_state``.
"""
from __future__ import annotations

import threading
import traceback
from contextlib import contextmanager
from typing import Callable, Iterator

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ..config import ConfigError

SUCCESS, FAILURE, ERROR = (TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE,
                           TransitionCallbackReturn.ERROR)
DRAIN_TIMEOUT_S = 30.0   # deactivate/cleanup wait this long for callbacks still running


class NotActiveError(RuntimeError):
    """A request reached a node that is not active (its service is being torn down)."""
    kind = "NotActiveError"


class ServingGate:
    """Open while the node is active. A callback runs inside :meth:`entered` (False: the node is
    not active, answer or drop without acknowledging); :meth:`close` waits for those running,
    so a cleanup does not close the store under a write."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open = False
        self._busy = 0

    def open(self) -> None:
        with self._cond:
            self._open = True

    def close(self, timeout: float = DRAIN_TIMEOUT_S) -> bool:
        """Refuse new callbacks; True when those in progress finished within ``timeout``."""
        with self._cond:
            self._open = False
            return self._cond.wait_for(lambda: self._busy == 0, timeout)

    @contextmanager
    def entered(self) -> Iterator[bool]:
        with self._cond:
            admitted = self._open
            if admitted:
                self._busy += 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()


class ManagedNode(LifecycleNode):
    """A LifecycleNode whose transition callbacks log why they failed (rclpy turns an exception
    into ERROR silently) and whose state is reported on /diagnostics."""

    @property
    def lifecycle_state(self) -> str:
        return self._state_machine.current_state[1]

    def transition(self, what: str, step: Callable[[], None], failed: TransitionCallbackReturn = FAILURE,
                   undo: Callable[[], None] | None = None) -> TransitionCallbackReturn:
        """Run one transition's work: SUCCESS, or ``failed`` with the reason logged (after
        ``undo`` released what the step had already set up)."""
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the reason goes to the log, the node stays up
            if isinstance(exc, (ConfigError, ValueError, OSError)):   # the configuration, not our code
                self.get_logger().error(f"{what} failed: {type(exc).__name__}: {exc}")
            else:
                self.get_logger().error(f"{what} failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            if undo is not None:
                try:
                    undo()
                except Exception as undo_exc:  # noqa: BLE001
                    self.get_logger().error(f"{what}: releasing after the failure failed too: {undo_exc}")
                    return ERROR
            return failed
        self.get_logger().info(f"{what}: done")
        return SUCCESS

    def start_serving(self, autostart: bool) -> None:
        """With ``autostart``: configure and activate now (a node run by hand); a failure is a
        configuration error (the process exits 2, see common.run_node)."""
        self.health.gauges["lifecycle_state"] = lambda: self.lifecycle_state
        if not autostart:
            self.get_logger().info(f"{self.get_fully_qualified_name()} starts unconfigured: waiting for configure "
                                   f"and activate on {self.get_fully_qualified_name()}/change_state (the launcher, a "
                                   "lifecycle manager; or set autostart: true)")
            return
        for name, trigger in (("configure", self.trigger_configure), ("activate", self.trigger_activate)):
            if trigger() != SUCCESS:
                raise ConfigError(f"{self.get_fully_qualified_name()}: autostart: {name} failed (see the log above)")

    # the standard transitions; a subclass implements _configure (open / load), _activate (create
    # subscriptions and services), _stop_serving (destroy them) and release (close what configure opened)
    def on_configure(self, _state: LifecycleState) -> TransitionCallbackReturn:
        return self.transition("configure", self._configure, undo=self.release)

    def on_activate(self, _state: LifecycleState) -> TransitionCallbackReturn:
        return self.transition("activate", self._activate, undo=self._stop_serving)

    def on_deactivate(self, _state: LifecycleState) -> TransitionCallbackReturn:
        return self.transition("deactivate", self._stop_serving)

    def on_cleanup(self, _state: LifecycleState) -> TransitionCallbackReturn:
        return self.transition("cleanup", self.release)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised or returned ERROR: release everything, back to unconfigured."""
        self.get_logger().error(f"error while {state.label}: releasing everything (back to unconfigured)")
        return self.transition("error recovery", self.release, failed=FAILURE)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self.transition("shutdown", self.release, failed=ERROR)

    def _configure(self) -> None:
        raise NotImplementedError

    def _activate(self) -> None:
        raise NotImplementedError

    def _stop_serving(self) -> None:
        raise NotImplementedError

    def release(self) -> None:   # a subclass closes what configure opened (idempotent)
        raise NotImplementedError
