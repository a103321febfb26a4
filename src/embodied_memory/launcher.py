"""Start a stack's nodes as separate processes and supervise them (``ros2 launch`` is not
available here).

Each node runs as ``<venv>/bin/<executable> --ros-args -r __node:=NAME --params-file F``.
Its stdout and stderr go through a pipe that a thread reads: every line is forwarded to the
launcher's stdout as ``[NAME] line`` and kept in a ring buffer (the node's last lines).

Supervision (the node keys of :mod:`embodied_memory.stack`):

* a node that crashes (any exit but 0 and 2, or a signal) is restarted when ``respawn`` is
  set, after ``respawn_delay_s`` doubled after every crash up to ``respawn_max_delay_s``; the
  restart is scheduled, so supervising the other nodes goes on while one waits;
* a node that ran longer than ``crash_window_s`` starts again from the first delay;
* more than ``max_respawns`` crashes within ``crash_window_s`` is a crash loop: the node is
  given up and its last log lines are printed; so is a node without ``respawn`` that crashes,
  and one that exits with code 2 (a configuration error, which a restart cannot fix);
* a required node given up stops the stack with exit code 1; an optional one is left down;
* exit code 0 is a natural end (an importer that is done), not a crash: the node is not
  restarted; a required node that ends stops the stack (exit code 0).

Managed (lifecycle) nodes (``stack.LIFECYCLE_EXECUTABLES``: memory, perception) start
unconfigured. After every start of one with ``autostart`` (the default) the launcher runs
``nodes/lifecycle_driver.py`` beside it, which configures and then activates it through
``/<node>/change_state``, each step within ``transition_timeout_s``; perception is activated
only once the memory is active (``stack.ACTIVATE_AFTER``). A node whose configure fails (bad
data directory, missing weights: its log says why) is a configuration error like exit code 2:
it is stopped and given up, not restarted. One that does not reach active in time is stopped
and handled as a crash (restarted when ``respawn`` is set). ``autostart: false`` leaves the
node unconfigured for a lifecycle manager of the robot.

SIGINT/SIGTERM to the launcher are forwarded once to every node; a node that ignores them for
``shutdown_timeout_s`` is killed.
"""
from __future__ import annotations

import collections
import ctypes
import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, TextIO

from .stack import RUN_ID_ENV, NodeSpec, StackSpec

log = logging.getLogger("embodied_memory.launcher")

LOG_TAIL_LINES = 20
CONFIG_ERROR_EXIT = 2     # nodes exit 2 on a configuration error (nodes/common.py run_node)
ACTIVE_LINE = re.compile(r": (active after \d+(\.\d+)? s|already active)$")   # the lifecycle driver's success


def active_line(name: str, seconds: Optional[float] = None) -> str:
    """What the lifecycle driver prints once ``name`` is active (``seconds`` after it began;
    None: it already was): the launcher reads the node's state from it."""
    return f"{name}: already active" if seconds is None else f"{name}: active after {seconds:.1f} s"


try:   # loaded here: the child of a fork in a threaded process must not import anything
    _LIBC = ctypes.CDLL(None)
    _PRCTL = _LIBC.prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent(launcher_pid: int) -> None:
    """In the child before exec (Linux): SIGTERM when the launcher dies, even by kill -9, so
    no orphaned node keeps the data directory (or the identity state) of the next launch."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
        if os.getppid() != launcher_pid:   # the launcher died before the call: do not start at all
            os._exit(1)


class LaunchError(RuntimeError):
    pass


def _package_lib_dir() -> Optional[Path]:
    """<prefix>/lib/embodied_memory of a colcon install (ament_python convention), if indexed."""
    try:
        from ament_index_python.packages import get_package_prefix
        return Path(get_package_prefix("embodied_memory")) / "lib" / "embodied_memory"
    except Exception:  # noqa: BLE001 - not installed with colcon / no ament index
        return None


def find_executable(name: str) -> str:
    """A console script next to this Python (a pip install into the venv), else in
    <prefix>/lib/embodied_memory (a colcon install), else on PATH."""
    lib_dir = _package_lib_dir()
    for local in (Path(sys.executable).parent / name, lib_dir / name if lib_dir else None):
        if local is not None and local.is_file() and os.access(local, os.X_OK):
            return str(local)
    found = shutil.which(name)
    if not found:
        raise LaunchError(f"executable '{name}' not found next to {sys.executable}, in "
                          f"{lib_dir or '<prefix>/lib/embodied_memory'} or on PATH; run "
                          "scripts/setup.sh (or colcon build): it installs the node executables")
    return found


def exit_reason(code: int) -> str:
    """'exit code 1', 'killed by SIGKILL'."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class _Node:
    """One node of the stack across its restarts."""
    spec: NodeSpec
    tail: collections.deque
    process: Optional[subprocess.Popen] = None
    pump: Optional[threading.Thread] = None
    started: float = 0.0
    restart_at: Optional[float] = None          # a scheduled restart (monotonic time)
    crashes: collections.deque = field(default_factory=collections.deque)  # times, within the window
    consecutive: int = 0                        # crashes since a run that outlived crash_window_s
    starts: int = 0
    done: bool = False                          # finished or given up
    driver: Optional[subprocess.Popen] = None   # the lifecycle driver of this run (managed nodes)
    lifecycle_error: Optional[tuple[str, bool]] = None   # (why, a configuration error): the launcher stops it
    kill_at: Optional[float] = None             # stopped by the launcher: SIGKILL if still running then


class Launcher:
    """Runs a :class:`StackSpec` until stopped, until every node has ended, or until a
    required node fails for good."""

    def __init__(self, stack: StackSpec, *, shutdown_timeout_s: float = 10.0,
                 poll_s: float = 0.1, extra_env: dict[str, str] | None = None,
                 output: TextIO | None = None, log_tail_lines: int = LOG_TAIL_LINES,
                 clock: Callable[[], float] = time.monotonic):
        self.stack = stack
        self.shutdown_timeout_s = shutdown_timeout_s
        self.poll_s = poll_s
        self._env = {**os.environ, **stack.environment, **(extra_env or {})}
        self._env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        self._env.setdefault("PYTHONUNBUFFERED", "1")   # node output through the pipe, line by line
        # one id for this run of the stack: a respawned frame selector keeps the same episode
        self._env.setdefault(RUN_ID_ENV, time.strftime("run_%Y%m%dT%H%M%S", time.gmtime()))
        self._params_dir = Path(tempfile.mkdtemp(prefix=f"em_launch_{stack.name}_"))
        self._nodes: dict[str, _Node] = {
            spec.name: _Node(spec, collections.deque(maxlen=max(1, log_tail_lines))) for spec in stack.nodes}
        self._output = output
        self._output_lock = threading.Lock()
        self._clock = clock
        self._stop_signal: int | None = None
        self.exit_code = 0

    # -- output ------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        out = self._output or sys.stdout
        with self._output_lock:
            try:
                out.write(text)
                out.flush()
            except (OSError, ValueError):  # a closed stdout must not kill supervision
                pass

    def _pump(self, node: _Node, stream) -> None:
        prefix = f"[{node.spec.name}] "
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                node.tail.append(line)
                self._write(prefix + line + "\n")

    def _drain(self, node: _Node, timeout: float = 1.0) -> None:
        """Wait (briefly) until the output of a process that ended has been read."""
        if node.pump is not None:
            node.pump.join(timeout)

    def last_lines(self, name: str) -> list[str]:
        """The last lines (at most ``log_tail_lines``) a node wrote, over all its runs."""
        return list(self._nodes[name].tail)

    def _print_tail(self, node: _Node) -> None:
        lines = list(node.tail)
        name = node.spec.name
        if not lines:
            log.error("node '%s' wrote nothing", name)
            return
        log.error("last %d log lines of '%s':\n%s", len(lines), name,
                  "\n".join(f"  [{name}] {line}" for line in lines))

    # -- process handling -------------------------------------------------------------------
    def _start(self, node: _Node) -> None:
        spec = node.spec
        params_file = self._params_dir / f"{spec.name}.yaml"
        params_file.write_text(spec.ros_params_yaml(), encoding="utf-8")
        cmd = [find_executable(spec.executable), *spec.ros_arguments(str(params_file))]
        # own session: a terminal's Ctrl-C reaches the launcher only, which forwards it once
        proc = subprocess.Popen(cmd, env=self._env, start_new_session=True, stdin=subprocess.DEVNULL,
                                preexec_fn=functools.partial(_die_with_parent, os.getpid()),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        node.process, node.started = proc, self._clock()
        node.starts += 1
        node.pump = threading.Thread(target=self._pump, args=(node, proc.stdout), daemon=True,
                                     name=f"output-{spec.name}")
        node.pump.start()
        log.info("started node '%s' (%s, pid %d)", spec.name, spec.executable, proc.pid)
        if spec.lifecycle and spec.autostart:
            self._start_driver(node)
        elif spec.lifecycle:
            log.info("node '%s' is left unconfigured (autostart: false): its lifecycle is driven through "
                     "%s/change_state", spec.name, spec.fully_qualified_name)

    # -- lifecycle (managed nodes) ----------------------------------------------------------
    def _start_driver(self, node: _Node) -> None:
        spec = node.spec
        cmd = [sys.executable, "-m", "embodied_memory.nodes.lifecycle_driver", spec.fully_qualified_name,
               "--timeout-s", str(spec.transition_timeout_s)]
        for other in self.stack.activate_after(spec):
            cmd += ["--after", other]
        node.driver = subprocess.Popen(cmd, env=self._env, start_new_session=True, stdin=subprocess.DEVNULL,
                                       preexec_fn=functools.partial(_die_with_parent, os.getpid()),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def _stop_driver(self, node: _Node) -> None:
        driver, node.driver = node.driver, None
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait()
        if driver is not None and driver.stdout is not None:
            driver.stdout.close()

    def _check_driver(self, node: _Node, now: float) -> None:
        """The driver of a managed node has ended: active, or the node is stopped (a failed
        configure is a configuration error; anything else is handled as a crash)."""
        code = node.driver.poll()
        if code is None:
            return
        lines = [line for line in node.driver.stdout.read().decode("utf-8", "replace").splitlines() if line.strip()]
        self._stop_driver(node)
        what = lines[-1].strip() if lines else f"lifecycle driver {exit_reason(code)}"
        name = node.spec.name
        if code == 0:
            log.info("node '%s' is active (%s)", name, what)
            return
        if any(ACTIVE_LINE.search(line) for line in lines):   # the node is active: only the driver's teardown failed
            log.warning("node '%s' is active (%s); its lifecycle driver then ended with %s", name, what,
                        exit_reason(code))
            return
        if node.process is None:
            return
        node.lifecycle_error = (what, code == CONFIG_ERROR_EXIT)
        log.error("node '%s' did not come up: %s; stopping it", name, what)
        node.process.send_signal(signal.SIGTERM)
        node.kill_at = now + self.shutdown_timeout_s

    def _on_signal(self, signum: int, _frame) -> None:
        if self._stop_signal is None:
            log.info("received %s: stopping the stack", signal.Signals(signum).name)
        self._stop_signal = signum

    def start(self) -> None:
        for node in self._nodes.values():
            self._start(node)

    def _give_up(self, node: _Node, why: str) -> bool:
        """The node stays down; False when that stops the stack."""
        node.done = True
        self._print_tail(node)
        if node.spec.required:
            log.error("required node '%s' failed (%s): stopping the stack", node.spec.name, why)
            self.exit_code = 1
            return False
        log.warning("optional node '%s' is not restarted (%s); the stack keeps running", node.spec.name, why)
        return True

    def _on_exit(self, node: _Node, code: int, now: float) -> bool:
        spec, proc = node.spec, node.process
        uptime = now - node.started
        self._drain(node)
        self._stop_driver(node)
        node.process = node.pump = node.kill_at = None
        failed, node.lifecycle_error = node.lifecycle_error, None
        if failed is not None:   # stopped by the launcher: its lifecycle failed
            why, config_error = failed
            log.error("node '%s' (pid %d) stopped after %.1f s (%s): %s", spec.name, proc.pid, uptime,
                      exit_reason(code), why)
            if config_error:
                return self._give_up(node, "configuration error, configure failed (its log says why): a restart "
                                           "cannot fix it")
            return self._respawn_or_give_up(node, why, f"did not come up ({why})", uptime, now)
        if code == 0:
            node.done = True
            log.info("node '%s' (pid %d) finished after %.1f s: exit code 0", spec.name, proc.pid, uptime)
            if spec.required:
                log.warning("required node '%s' has ended: stopping the stack", spec.name)
                return False
            return True
        reason = exit_reason(code)
        last = next((line for line in reversed(node.tail) if line.strip()), "")
        log.error("node '%s' (pid %d) died after %.1f s: %s%s", spec.name, proc.pid, uptime, reason,
                  f" (last output: {last.strip()[:300]})" if last else "")
        if code == CONFIG_ERROR_EXIT:
            return self._give_up(node, "configuration error, exit code 2: a restart cannot fix it")
        return self._respawn_or_give_up(node, reason, f"was {reason}" if code < 0 else f"exited with code {code}",
                                        uptime, now)

    def _respawn_or_give_up(self, node: _Node, reason: str, how: str, uptime: float, now: float) -> bool:
        spec = node.spec
        if not spec.respawn:
            return self._give_up(node, f"{reason}, respawn is off")
        while node.crashes and node.crashes[0] < now - spec.crash_window_s:
            node.crashes.popleft()
        node.crashes.append(now)
        if uptime > spec.crash_window_s:
            node.consecutive = 0    # it ran well for a while: back to the first delay
        node.consecutive += 1
        if len(node.crashes) > spec.max_respawns:
            log.error("node '%s' is in a crash loop: %d crashes within %.0f s (max_respawns %d)",
                      spec.name, len(node.crashes), spec.crash_window_s, spec.max_respawns)
            return self._give_up(node, f"crash loop, last {reason}")
        delay = spec.respawn_delay(node.consecutive)
        node.restart_at = now + delay
        log.warning("respawning '%s' in %.3g s after it %s at %.1f s uptime (restart %d; %d crash(es) "
                    "in the last %.0f s, more than %d stop it)",
                    spec.name, delay, how, uptime, node.starts,
                    len(node.crashes), spec.crash_window_s, spec.max_respawns)
        return True

    def poll(self) -> bool:
        """One supervision step; returns False when the stack must stop."""
        now = self._clock()
        for node in self._nodes.values():
            if node.driver is not None:
                self._check_driver(node, now)
            if node.process is not None:
                code = node.process.poll()
                if code is None and node.kill_at is not None and now >= node.kill_at:
                    log.warning("node '%s' ignored SIGTERM for %.0f s: killing it", node.spec.name,
                                self.shutdown_timeout_s)
                    node.process.kill()
                    node.kill_at = None
                elif code is not None and not self._on_exit(node, code, now):
                    return False
            elif node.restart_at is not None and now >= node.restart_at:
                node.restart_at = None
                try:
                    self._start(node)
                except (OSError, LaunchError) as exc:
                    log.error("cannot restart '%s': %s", node.spec.name, exc)
                    if not self._give_up(node, f"cannot start: {exc}"):
                        return False
        if all(node.done for node in self._nodes.values()):
            log.info("all nodes have exited")
            return False
        return True

    def shutdown(self) -> None:
        sig = signal.SIGINT if self._stop_signal in (None, signal.SIGINT) else signal.SIGTERM
        running = [n for n in self._nodes.values() if n.process is not None]
        for node in self._nodes.values():
            node.restart_at = None
            self._stop_driver(node)
        for node in running:
            if node.process.poll() is None:
                node.process.send_signal(sig)
        deadline = time.monotonic() + self.shutdown_timeout_s
        for node in running:
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("node '%s' ignored %s for %.0f s: killing it", node.spec.name,
                            signal.Signals(sig).name, self.shutdown_timeout_s)
                node.process.kill()
                node.process.wait()
        for node in running:
            self._drain(node, 2.0)
            node.process = node.pump = None
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
