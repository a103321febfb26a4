"""Bring one managed node to active: ``ros2 lifecycle set NODE configure`` then ``activate``,
for the launcher (a process of its own, so the launcher needs no DDS participant; it runs in
the environment the launcher gives its nodes).

    python -m embodied_memory.nodes.lifecycle_driver /memory [--after /other ...] [--timeout-s 300]

It waits for ``NODE/get_state``, configures the node if it is unconfigured, waits until every
``--after`` node reports active (at most the timeout; then it goes on with a warning: senders
keep what is not acknowledged, so the order is a matter of noise, not of data), and
activates it. A node that is already active is left as it is.

Exit codes: 0 active; 2 configure failed (the node logged why: a configuration error, which a
restart cannot fix); 1 anything else (no answer within the timeout, activate failed, the node
is in another state).
"""
from __future__ import annotations

import argparse
import sys
import time

from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState

from ..launcher import active_line
from .service_client import DISCOVERY_SETTLE_S, short_lived_node

EXIT_ACTIVE, EXIT_FAILED, EXIT_CONFIGURE_FAILED = 0, 1, 2
STATE_POLL_S = 2.0        # get_state is asked again this often (a reply lost in discovery)


class LifecycleClient:
    """GetState / ChangeState of one node, from a short-lived node."""

    def __init__(self, node, executor, name: str):
        self.name, self._node, self._executor = name, node, executor
        self._get = node.create_client(GetState, f"{name}/get_state")
        self._change = node.create_client(ChangeState, f"{name}/change_state")

    def _spin_until(self, futures: list, deadline: float, every_s: float | None = None, again=None):
        next_again = time.monotonic() + every_s if every_s else float("inf")
        while time.monotonic() < deadline:
            done = next((f for f in futures if f.done()), None)
            if done is not None:
                return done.result()
            if time.monotonic() >= next_again and again is not None:
                futures.append(again())
                next_again = time.monotonic() + every_s
            self._executor.spin_once(timeout_sec=0.05)
        return None

    def state(self, timeout_s: float) -> str | None:
        """The node's state label (None: no answer within ``timeout_s``). A node that is in a
        transition answers when it is done (its lifecycle services share one callback group)."""
        deadline = time.monotonic() + timeout_s
        if not self._get.wait_for_service(timeout_sec=timeout_s):
            return None
        settle = time.monotonic() + DISCOVERY_SETTLE_S
        while time.monotonic() < settle:
            self._executor.spin_once(timeout_sec=0.05)
        response = self._spin_until([self._get.call_async(GetState.Request())], deadline, STATE_POLL_S,
                                    lambda: self._get.call_async(GetState.Request()))
        return response.current_state.label if response is not None else None

    def change(self, transition_id: int, goal: str, timeout_s: float) -> bool | None:
        """One transition: True (done), False (the node refused or failed it), None (no answer
        within ``timeout_s``; the state decides if the reply was lost)."""
        deadline = time.monotonic() + timeout_s
        if not self._change.wait_for_service(timeout_sec=timeout_s):
            return None
        request = ChangeState.Request(transition=Transition(id=transition_id))
        pending = self._change.call_async(request)
        response = self._spin_until([pending], deadline)
        if response is not None:
            return bool(response.success)
        self._change.remove_pending_request(pending)
        return True if self.state(5.0) == goal else None


def drive(name: str, after: list[str], timeout_s: float, out=sys.stdout) -> int:
    def say(text: str) -> None:
        print(text, file=out, flush=True)
    with short_lived_node("em_lifecycle") as (node, executor):
        target = LifecycleClient(node, executor, name)
        start = time.monotonic()
        state = target.state(timeout_s)
        if state is None:
            say(f"{name}: no answer from {name}/get_state within {timeout_s:g} s")
            return EXIT_FAILED
        if state == "unconfigured":
            done = target.change(Transition.TRANSITION_CONFIGURE, "inactive", timeout_s)
            if done is None:
                say(f"{name}: configure did not finish within {timeout_s:g} s")
                return EXIT_FAILED
            if not done:
                say(f"{name}: configure failed (see the node's log)")
                return EXIT_CONFIGURE_FAILED
            say(f"{name}: configured in {time.monotonic() - start:.1f} s")
            state = "inactive"
        if state == "active":
            say(active_line(name))
            return EXIT_ACTIVE
        if state != "inactive":
            say(f"{name}: is {state}; cannot activate it")
            return EXIT_FAILED
        for other in after:
            peer = LifecycleClient(node, executor, other)
            deadline = time.monotonic() + timeout_s
            while (peer_state := peer.state(max(0.1, deadline - time.monotonic()))) != "active" \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
            if peer_state != "active":
                say(f"{name}: {other} is not active after {timeout_s:g} s ({peer_state or 'no answer'}); "
                    "activating anyway (what it has not acknowledged is kept and sent again)")
        done = target.change(Transition.TRANSITION_ACTIVATE, "active", timeout_s)
        if not done:
            say(f"{name}: activate " + ("failed (see the node's log)" if done is False else
                                         f"did not finish within {timeout_s:g} s"))
            return EXIT_FAILED
        say(active_line(name, time.monotonic() - start))
        return EXIT_ACTIVE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("node", help="fully qualified node name, e.g. /memory")
    parser.add_argument("--after", action="append", default=[], help="activate only once this node is active")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per step (service wait, transition)")
    args = parser.parse_args(argv)
    return drive(args.node, args.after, args.timeout_s)


if __name__ == "__main__":
    sys.exit(main())
