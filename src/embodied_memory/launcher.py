"""Start a stack's nodes as separate processes (``ros2 launch`` is not available here).

Each node runs as ``<venv>/bin/<executable> --ros-args -r __node:=NAME --params-file F``.
The launcher forwards SIGINT/SIGTERM to every node, reports a node that exits, respawns it
when the stack says so, and stops the whole stack with a non-zero status when a required
node fails.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .stack import NodeSpec, StackSpec

log = logging.getLogger("embodied_memory.launcher")


class LaunchError(RuntimeError):
    pass


def find_executable(name: str) -> str:
    """A console script next to this Python (the venv), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which(name)
    if not found:
        raise LaunchError(f"executable '{name}' not found next to {sys.executable} or on PATH; "
                          "run scripts/setup.sh (it installs the package's console scripts)")
    return found


@dataclass
class _Running:
    spec: NodeSpec
    process: subprocess.Popen
    started: float
    respawns: int = 0


class Launcher:
    """Runs a :class:`StackSpec` until stopped or a required node fails."""

    def __init__(self, stack: StackSpec, *, shutdown_timeout_s: float = 10.0,
                 poll_s: float = 0.1, extra_env: dict[str, str] | None = None):
        self.stack = stack
        self.shutdown_timeout_s = shutdown_timeout_s
        self.poll_s = poll_s
        self._env = {**os.environ, **stack.environment, **(extra_env or {})}
        self._env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        self._params_dir = Path(tempfile.mkdtemp(prefix=f"em_launch_{stack.name}_"))
        self._running: dict[str, _Running] = {}
        self._stop_signal: int | None = None
        self.exit_code = 0

    # -- process handling -------------------------------------------------------------------
    def _start(self, spec: NodeSpec, respawns: int = 0) -> None:
        params_file = self._params_dir / f"{spec.name}.yaml"
        params_file.write_text(spec.ros_params_yaml(), encoding="utf-8")
        cmd = [find_executable(spec.executable), *spec.ros_arguments(str(params_file))]
        # own session: a terminal's Ctrl-C reaches the launcher only, which forwards it once
        proc = subprocess.Popen(cmd, env=self._env, start_new_session=True)
        self._running[spec.name] = _Running(spec, proc, time.monotonic(), respawns)
        log.info("started node '%s' (%s, pid %d)", spec.name, spec.executable, proc.pid)

    def _on_signal(self, signum: int, _frame) -> None:
        if self._stop_signal is None:
            log.info("received %s: stopping the stack", signal.Signals(signum).name)
        self._stop_signal = signum

    def start(self) -> None:
        for spec in self.stack.nodes:
            self._start(spec)

    def poll(self) -> bool:
        """One supervision step; returns False when the stack must stop."""
        for name, run in list(self._running.items()):
            code = run.process.poll()
            if code is None:
                continue
            spec = run.spec
            uptime = time.monotonic() - run.started
            reason = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            log.error("node '%s' (pid %d) died after %.1f s: %s", name, run.process.pid, uptime, reason)
            del self._running[name]
            if spec.respawn and run.respawns < spec.max_respawns:
                log.warning("respawning '%s' in %.1f s (%d/%d)", name, spec.respawn_delay_s,
                            run.respawns + 1, spec.max_respawns)
                time.sleep(spec.respawn_delay_s)
                self._start(spec, run.respawns + 1)
            elif spec.required:
                log.error("required node '%s' failed: stopping the stack", name)
                self.exit_code = 1
                return False
            elif code != 0:
                log.warning("optional node '%s' is not restarted", name)
        if not self._running:
            log.info("all nodes have exited")
            return False
        return True

    def shutdown(self) -> None:
        sig = signal.SIGINT if self._stop_signal in (None, signal.SIGINT) else signal.SIGTERM
        for run in self._running.values():
            if run.process.poll() is None:
                run.process.send_signal(sig)
        deadline = time.monotonic() + self.shutdown_timeout_s
        for name, run in self._running.items():
            try:
                run.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("node '%s' ignored %s for %.0f s: killing it", name,
                            signal.Signals(sig).name, self.shutdown_timeout_s)
                run.process.kill()
                run.process.wait()
        self._running.clear()
        shutil.rmtree(self._params_dir, ignore_errors=True)

    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while self._stop_signal is None and self.poll():
                time.sleep(self.poll_s)
        finally:
            self.shutdown()
            for s, handler in previous.items():
                signal.signal(s, handler)
        return self.exit_code
