"""``embodied-memory demo``: the main job on the embedded default, offline.

Builds (once, cached) a simulated office day as a rosbag2, launches the default stack as
processes, replays the bag into it, lets an operator step name the pseudonymous identities
(from the simulator's ground truth, as a person at the robot would), asks questions of every
type through the Ask service and prints the answers next to the truth.
"""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the simulator loads MiniWorld: only when the demo runs
    from .episode import EpisodeConfig

log = logging.getLogger("embodied_memory.demo")


def _wait(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception:  # noqa: BLE001 - services not up yet
            pass
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


class StackRun:
    """The default stack launched as processes on a fresh memory, fed by replaying a simulated
    episode's bag (paced), identities named by the operator step; then ``ask`` goes through the
    Ask service. Used by the demo and by ``eval --path nodes``."""

    def __init__(self, episode_dir: Path, truth, data: Path, overrides: tuple[str, ...] = (), progress: bool = True,
                 label: str = "demo"):
        self.episode_dir, self.truth, self.data, self.progress, self.label = episode_dir, truth, data, progress, label
        self.overrides = overrides
        self.names_of: dict[str, str] = {}
        self.launcher = None

    def __enter__(self) -> "StackRun":
        from embodied_memory_interfaces.srv import GetMemoryStats, NameIdentity

        from ..nodes.diagnostics_client import read_diagnostics, records_in_flight
        from ..nodes.replay import replay
        from ..nodes.service_client import call_service
        from .naming import label_identities
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(50, 99)))  # not a robot's domain 0
        data = self.data
        data.mkdir(parents=True, exist_ok=True)
        print(f"[{self.label}] memory in {data}; launching the default stack "
              f"(ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']})", flush=True)
        from ..ingest.bag_writer import CAMERA_INFO_TOPIC, DEPTH_TOPIC
        sets = [f"perception.data_dir={data}", f"memory.data_dir={data}", "frame_selector.episode_id=demo_day",
                "frame_selector.flush_after_s=1.0", f"frame_selector.depth_topic={DEPTH_TOPIC}",   # where people stood
                f"frame_selector.camera_info_topic={CAMERA_INFO_TOPIC}", *self.overrides]
        self.launcher = subprocess.Popen(
            [str(Path(sys.executable).parent / "embodied-memory"), "launch", "default",
             *[arg for item in sets for arg in ("--set", item)]],
            stdout=open(data / "stack.log", "w"), stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            _wait(lambda: call_service(GetMemoryStats, "/memory/stats", GetMemoryStats.Request(), 5.0, 2.0), 120,
                  "the memory node")
            print(f"[{self.label}] replaying the bag (paced by the pipeline)", flush=True)
            report = replay(str(self.episode_dir / "bag"), paced=True, rate=0.0, wait_subscribers_s=60.0,
                            progress=self.progress)
            print(report.summary().splitlines()[0], flush=True)
            counts = []

            def settled():   # nothing in flight in the pipeline (/diagnostics), the count stable
                counts.append(call_service(GetMemoryStats, "/memory/stats", GetMemoryStats.Request(),
                                           5.0).stats.observations)
                report = read_diagnostics(3.0, ("/frame_selector", "/perception"))
                return len(counts) > 3 and counts[-1] == counts[-3] and counts[-1] > 0 and \
                    "/perception" in report and records_in_flight(report) == 0
            _wait(settled, 900, "perception to finish", interval=1.0)
            self.stats = call_service(GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats
            print(f"[{self.label}] memory: {self.stats.observations} observations, {self.stats.person_sightings} "
                  f"person sightings, {self.stats.identities} identities", flush=True)
            # operator step: name the pseudonymous identities (see sim/naming.py)
            self.names_of = label_identities(
                lambda tool, args: self.query(tool, **args),
                lambda ident, display: call_service(NameIdentity, "/memory/name_identity",
                                                    NameIdentity.Request(identity_id=ident, display_name=display)),
                self.truth).named
            print(f"[{self.label}] operator named identities: " + (", ".join(
                f"{k} = {v.capitalize()}" for k, v in self.names_of.items()) or "none"), flush=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def query(self, tool: str, **args):
        from embodied_memory_interfaces.srv import QueryMemory

        from ..nodes.service_client import call_service
        res = call_service(QueryMemory, "/memory/query", QueryMemory.Request(tool=tool, arguments_json=json.dumps(args)),
                           retry_s=5.0)
        if not res.success:
            raise RuntimeError(res.error)
        return json.loads(res.result_json)

    def ask(self, question: str, as_of: float, planner: str = ""):
        """The Answer message from the query agent node."""
        from embodied_memory_interfaces.srv import Ask

        from ..nodes.common import to_time_msg
        from ..nodes.service_client import call_service
        request = Ask.Request(question=question, as_of=to_time_msg(as_of), planner=planner)
        return call_service(Ask, "/agent/ask", request, 120.0).answer

    def __exit__(self, *exc) -> None:
        if self.launcher is None:
            return
        self.launcher.send_signal(signal.SIGINT)
        try:
            self.launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.launcher.kill()
        self.launcher = None


def run_demo(seed: int = 0, work_dir: str = "", progress: bool = True,
             config: "EpisodeConfig | None" = None) -> dict[str, tuple[int, int]]:
    """Returns {question type: (correct, asked)}."""
    from .episode import EpisodeConfig, GroundTruth, cached_episode

    config = config or EpisodeConfig(seed=seed)
    episode_dir = cached_episode(config, progress)
    truth = GroundTruth.load(episode_dir / "ground_truth.json")
    data = Path(work_dir or tempfile.mkdtemp(prefix="em_demo_"))
    try:
        return _ask_and_score(episode_dir, truth, data, config, progress)
    finally:
        if work_dir:
            print(f"[demo] the memory is kept in {data}: look at it and ask it with "
                  f"`embodied-memory inspect --data-dir {data}`", flush=True)
        else:
            shutil.rmtree(data, ignore_errors=True)


def _ask_and_score(episode_dir: Path, truth, data: Path, config, progress: bool) -> dict[str, tuple[int, int]]:
    from .questions import generate_questions, score
    with StackRun(episode_dir, truth, data, progress=progress) as run:
        questions = generate_questions(truth, seed=config.seed)
        right = Counter()
        total = Counter()
        print(f"\n{'question':52s} {'answer':44s} {'truth':24s} ok")
        for q in questions:
            ans = run.ask(q.question, q.asked_at)
            data_answer = json.loads(ans.json) if ans.json else {}
            ok, compared = score(q, data_answer, run.names_of)
            total[q.type] += 1
            right[q.type] += ok
            shown_truth = {k: (v if k != "time" else time.strftime("%H:%M", time.gmtime(v))) for k, v in q.answer.items()}
            truth_text = ", ".join(f"{v}" for v in shown_truth.values())[:24]
            print(f"{q.question[:52]:52s} {(ans.text or ans.error)[:44]:44s} {truth_text:24s} {'yes' if ok else 'no'} ({compared})")
        print("\n[demo] correct: " + ", ".join(f"{t} {right[t]}/{total[t]}" for t in total)
              + f"; overall {sum(right.values())}/{sum(total.values())}", flush=True)
        return {t: (right[t], total[t]) for t in total}
