"""``embodied-memory eval``: planners and ablations side by side on a simulated episode.

Library path (one process, the same core the nodes run): the episode bag is ingested once per
memory variant (psfr; uniform; psfr without people memory; psfr without body re-ID; the
labelled ground-truth object ablation), the operator names identities from a few stored crops
(``sim/naming.py``; or ``naming="enrolment"``: one labelled photo per person), then every
planner answers every question as of its time; answers are scored by ``sim/scoring.py`` at
HUMEMBR's and at tight thresholds. Questions come from ``sim/questions_v2.py`` in the
evaluation phrasing set (never used by the planners or their tests). Output: ``report.md``,
``results.json`` and plots (``evaluation/report.py``).

Worlds: ``building`` (default: 10 rooms and a reception on two corridors, 8 people and a visitor, patrols and
waits) and ``small`` (the first five-room office).
"""
from __future__ import annotations

import contextlib
import json
import logging
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

from ..ingest.selection import SelectionParams
from ..sim import scoring
from ..sim.naming import MAX_IMAGES as OPERATOR_IMAGES, MIN_SIGHTINGS as OPERATOR_MIN_SIGHTINGS, MIXED_LOOK, NamingReport
from .llm_match import JUDGE_CORRECT_MARK, JudgeError, llm_match, llm_match_accuracy

log = logging.getLogger(__name__)

MEMORY_VARIANTS = {
    "psfr": {"selection": "psfr", "people": True},
    "uniform": {"selection": "uniform", "people": True},
    "psfr_no_people": {"selection": "psfr", "people": False},
    "psfr_no_reid": {"selection": "psfr", "people": True, "reid": False},     # HUMEMBR: faces only
    # labelled ablation: the simulator's ground truth of visible objects appended to each
    # description (what a VLM describer would add); never used by the default pipeline or the demo
    "psfr_gt_objects": {"selection": "psfr", "people": True, "gt_objects": True},
    # labelled ablation: people perception replaced by the simulator's ground truth of who is in
    # view (named identities): the planner's accuracy on a perfect people memory
    "psfr_gt_people": {"selection": "psfr", "people": False, "gt_people": True},
}
ANSWER_FIELDS = ("type", "binary", "position", "time_iso", "duration_minutes", "persons", "waypoint", "error")
OPERATOR = {"max_images": OPERATOR_IMAGES, "min_sightings": OPERATOR_MIN_SIGHTINGS, "mixed_look": MIXED_LOOK}   # what the operator step does
MEMORY_MARKER = "eval_memory.json"     # written into a variant's memory once it is ingested and named
SELECTION = SelectionParams()          # the default selection (T = 10 s, K = 6); variants set the policy
ERROR_GROUPS = {"position": scoring.POSITION_TYPES, "time": scoring.TIME_TYPES, "duration": ("duration",)}


@dataclass
class RunResult:
    variant: str
    planner: str
    phrasing: str = "evaluation"                          # the question phrasing set
    prompt_only: bool = False      # full_context without an endpoint: only its prompt size is measured
    scores: dict[str, list] = field(default_factory=dict)   # type -> [sim.scoring.Score]
    tokens: list[int] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    tool_calls: list[int] = field(default_factory=list)
    answers: list[dict] = field(default_factory=list)
    llm_match: list[int] = field(default_factory=list)     # judge marks 1-5 for text answers (with an endpoint)

    @property
    def label(self) -> str:
        return f"{self.planner} / {self.variant}" + ("" if self.phrasing == "evaluation" else f" / {self.phrasing}")

    def _scores(self, category: Optional[str]) -> list:
        return self.scores.get(category, []) if category else [v for vs in self.scores.values() for v in vs]

    def accuracy(self, category: Optional[str] = None) -> float:
        values = self._scores(category)
        return sum(v.correct for v in values) / len(values) if values else 0.0

    def split_accuracy(self, answerable: bool) -> float:
        """Accuracy over the answerable questions only (or the unanswerable ones only)."""
        values = [v for c, vs in self.scores.items() if c.startswith(scoring.UNANSWERABLE) != answerable for v in vs]
        return sum(v.correct for v in values) / len(values) if values else 0.0

    def strict_accuracy(self, category: Optional[str] = None) -> float:
        values = self._scores(category)
        return sum(v.strict for v in values) / len(values) if values else 0.0

    def errors(self, group: str) -> list[float]:
        return [v.error for c in ERROR_GROUPS[group] for v in self.scores.get(c, []) if v.error is not None]

    def summary(self) -> dict:
        return {"variant": self.variant, "planner": self.planner, "phrasing": self.phrasing,
                "prompt_only": self.prompt_only, "accuracy": round(self.accuracy(), 3),
                "strict_accuracy": round(self.strict_accuracy(), 3),
                "answerable_accuracy": round(self.split_accuracy(True), 3),
                "unanswerable_accuracy": round(self.split_accuracy(False), 3), "per_category": scoring.summarize(self.scores),
                "tokens_median": statistics.median(self.tokens) if self.tokens else 0,
                "tokens_p95": sorted(self.tokens)[int(0.95 * (len(self.tokens) - 1))] if self.tokens else 0,
                "latency_median_s": round(statistics.median(self.latency_s), 4) if self.latency_s else 0.0,
                "tool_calls_median": statistics.median(self.tool_calls) if self.tool_calls else 0,
                "llm_match_text": round(llm_match_accuracy(self.llm_match), 3) if self.llm_match else None}


def ground_truth_objects(truth):
    """Annotator for the labelled ablation: the objects in view at the observation's time."""
    import bisect
    times = [f["t"] for f in truth.frames]

    def annotate(obs) -> None:
        i = bisect.bisect_left(times, obs.stamp)
        near = [j for j in (i - 1, i) if 0 <= j < len(times) and abs(times[j] - obs.stamp) < 0.6]
        if not near:
            return
        objects = sorted(truth.frames[min(near, key=lambda j: abs(times[j] - obs.stamp))].get("objects", {}))
        if objects:
            text = "Objects in view: " + ", ".join(f"a {name}" for name in objects) + "."
            obs.description = f"{obs.description} {text}".strip()
            obs.text_embedding = None          # re-embedded by the store
    return annotate


def ground_truth_people(truth):
    """Annotator for the labelled ablation: everyone in view at the observation's time, as an
    identity named after them, where they stood (no detector, face, re-ID or depth involved)."""
    import bisect
    from ..types import PersonSighting
    times = [f["t"] for f in truth.frames]

    def annotate(obs) -> None:
        i = bisect.bisect_left(times, obs.stamp)
        near = [j for j in (i - 1, i) if 0 <= j < len(times) and abs(times[j] - obs.stamp) < 0.6]
        if near:
            frame = truth.frames[min(near, key=lambda j: abs(times[j] - obs.stamp))]
            seen = frame.get("seen", {})
            obs.people = [PersonSighting((0.0, 0.0, 1.0, 1.0), name, 1.0, 1.0,
                                         position=(*seen[name]["position"][:2], 0.0) if name in seen else None)
                          for name in sorted(frame["visible"])]
    return annotate


def _annotator(truth, variant: dict):
    steps = ([ground_truth_objects(truth)] if variant.get("gt_objects") else []) + \
            ([ground_truth_people(truth)] if variant.get("gt_people") else [])
    if not steps:
        return None

    def annotate(obs) -> None:
        for step in steps:
            step(obs)
    return annotate


def _sim_bag_topics():
    """The simulated bag's topics (``ingest/bag_writer.py``): colour, registered depth, the colour
    camera's intrinsics."""
    from ..ingest.bag_writer import CAMERA_INFO_TOPIC, DEPTH_TOPIC
    from ..ingest.offline import TopicParams
    return TopicParams(depth_topic=DEPTH_TOPIC, camera_info_topic=CAMERA_INFO_TOPIC)


def _ingest(bag: Path, data: Path, variant: dict, progress: bool, truth=None):
    """A fresh memory for the variant (a rerun into the same directory starts over)."""
    from ..consolidate_memory import attach_in_process
    from ..ingest.offline import ingest_bag
    from ..params import ATTACH_AFTER_IDLE_S, StoreParams
    from ..perception.pipeline import Perception, PerceptionParams
    from ..store import open_store
    if data.exists():
        log.info("removing the previous run's memory %s", data)
        shutil.rmtree(data)
    store = open_store(StoreParams(data_dir=str(data)))
    store.warm_up()
    people = {} if variant["people"] else {"person_detector": "none", "face_backend": "none", "reid": "none"}
    if not variant.get("reid", True):
        people["reid"] = "none"
    perception = Perception(PerceptionParams(data_dir=str(data), **people))
    annotate = _annotator(truth, variant)
    report = ingest_bag(str(bag), store, perception, progress=progress, annotate=annotate,
                        selection=replace(SELECTION, policy=variant["selection"]), topics=_sim_bag_topics(),
                        on_idle=lambda: attach_in_process(store, perception.identities), idle_s=ATTACH_AFTER_IDLE_S)
    perception.close()
    return store, report


NODE_VARIANT_SETTINGS = {   # eval --path nodes: the same memory variants as stack parameter overrides
    "psfr": (), "uniform": ("frame_selector.policy=uniform",),
    "psfr_no_people": ("perception.person_detector=none", "perception.face_backend=none", "perception.reid=none"),
    "psfr_no_reid": ("perception.reid=none",),
}
NODE_PLANNERS = ("rules", "full_context", "llm")
LLM_ABLATIONS = ("llm_remembr_tools", "llm_limit5", "llm_limit15")   # with an endpoint; llm itself: limit 10


def llm_ablations(client) -> dict:
    """HUMEMBR's agent ablations: only ReMEmbR's three tools; function-call limits 5 and 15."""
    if client is None:
        return {}
    from ..agent.llm_planner import LLMPlanner
    from ..agent.tools import REMEMBR_TOOLS
    return {"llm_remembr_tools": LLMPlanner(client, 10, tool_names=REMEMBR_TOOLS),
            "llm_limit5": LLMPlanner(client, 5), "llm_limit15": LLMPlanner(client, 15)}


def run_eval(out_dir: Path, config=None, planners: tuple[str, ...] = ("rules", "text_top_k", "full_context"),
             variants: tuple[str, ...] = ("psfr", "uniform", "psfr_no_people"), llm_base_url: str = "",
             llm_model: str = "", per_type: int = 4, progress: bool = True, objects: bool = False,
             path: str = "library", phrasings: tuple[str, ...] = ("evaluation",),
             naming: str = "operator", reuse_memory: bool = False) -> list[RunResult]:
    """``config``: a ``BuildingConfig`` (default world) or an ``EpisodeConfig`` (the small
    office). ``path``: ``library`` (the core in this process) or ``nodes`` (the default stack
    launched as processes, the bag replayed into it, every question through the Ask service).
    ``phrasings``: question phrasing sets (``evaluation``; ``dev`` is the set the planner's
    tests may use: both side by side measure robustness to wording). ``naming``: ``operator`` (a
    few stored crops per identity) or ``enrolment`` (one labelled photo per person).
    ``reuse_memory``: a variant's memory left in ``out_dir`` by an earlier run on the same
    episode and naming (``MEMORY_MARKER``) is answered from again, not rebuilt (library path)."""
    from ..sim.building_episode import BuildingConfig
    from ..sim.episode import GroundTruth, cached_episode
    from ..sim.questions_v2 import generate_questions

    planners = tuple(planners) + (("llm",) if llm_base_url and "llm" not in planners else ())
    if any(p in LLM_ABLATIONS for p in planners) and not llm_base_url:
        raise ValueError(f"planners {', '.join(LLM_ABLATIONS)} need an endpoint (--llm-base-url)")
    if path not in ("library", "nodes"):
        raise ValueError(f"path: unknown {path!r} (library | nodes)")
    if naming not in ("operator", "enrolment"):
        raise ValueError(f"naming: unknown {naming!r} (operator | enrolment)")
    if path == "nodes" and naming != "operator":
        raise ValueError("--path nodes names identities with the operator step only (naming=operator)")
    unknown = [v for v in variants if v not in MEMORY_VARIANTS]
    if unknown:
        raise ValueError(f"variants: unknown {', '.join(unknown)} ({', '.join(MEMORY_VARIANTS)})")
    if path == "nodes":
        bad = [v for v in variants if v not in NODE_VARIANT_SETTINGS] + [p for p in planners if p not in NODE_PLANNERS]
        if bad:
            raise ValueError(f"--path nodes cannot run {', '.join(bad)} (library-only: the text-only baseline and "
                             f"the ground-truth object ablation); nodes run variants "
                             f"{', '.join(NODE_VARIANT_SETTINGS)} and planners {', '.join(NODE_PLANNERS)}")
    config = config or BuildingConfig(days=1)
    out_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    episode = cached_episode(config, progress)
    timings["simulate_s"] = time.perf_counter() - start
    truth = GroundTruth.load(episode / "ground_truth.json")
    questions = [q for phrasing in phrasings for q in generate_questions(
        truth, seed=config.seed, per_type=per_type, phrasing_set=phrasing, objects=objects)]
    judge = None
    if llm_base_url:
        from ..llm.chat_client import ChatClient, LLMConfig
        judge = ChatClient(LLMConfig(base_url=llm_base_url, model=llm_model, max_tokens=8))
    results: list[RunResult] = []
    identity: dict[str, dict] = {}
    described_memory: dict[str, dict] = {}
    for variant in variants:
        start = time.perf_counter()
        with _memory(path, episode, truth, out_dir / f"memory_{variant}", variant, progress, llm_base_url,
                     llm_model, naming, reuse_memory) as memory:
            timings[f"ingest_{variant}_s"] = "reused" if memory.reused else time.perf_counter() - start
            if memory.identity:
                identity[variant] = memory.identity
            for planner in planners:
                start = time.perf_counter()
                for phrasing in phrasings:
                    results.append(_answer_all(RunResult(variant, planner, phrasing,
                                                         prompt_only=planner == "full_context" and not llm_base_url),
                                               [q for q in questions if q.phrasing_set == phrasing], planner,
                                               memory, judge))
                timings[f"answer_{planner}_{variant}_s"] = time.perf_counter() - start
            described_memory[variant] = {"keyframes": memory.keyframes, "reused": memory.reused,
                                         "ingest_stages_s": {k: round(v, 1) for k, v in memory.stage_s.items()}}
    described = {**asdict(config), "world": truth.config.get("world", "small"), "world_description": describe_world(truth),
                 "episode": episode.name, "phrasings": list(phrasings), "naming": naming, "path": path,
                 "variants": {v: MEMORY_VARIANTS[v] for v in variants}, "selection": asdict(SELECTION),
                 "operator": OPERATOR,
                 "scoring": scoring_constants(), "planners": list(planners), "per_type": per_type,
                 "objects": objects, "llm_model": llm_model if llm_base_url else "", "commit": _commit(),
                 "memories": described_memory}
    from .report import write_report
    write_report(out_dir, results, questions, timings, described, identity)
    return results


def _commit() -> str:
    import subprocess
    try:
        return subprocess.run(["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def scoring_constants() -> dict:
    from ..sim import scoring
    return {k: v for k, v in vars(scoring).items() if k.isupper() and isinstance(v, (int, float))}


def describe_world(truth) -> str:
    people = truth.people or {name: {} for name in truth.positions}
    visitors = sum(1 for p in people.values() if p.get("visitor"))
    rooms = len([r for r in truth.rooms if "corridor" not in r]) - ("reception" in truth.rooms)
    days = len(truth.day_starts) if truth.day_starts else truth.config.get("days", 0)
    return (f"{days} day(s), {len(people) - visitors} people + {visitors} visitor(s), {rooms} rooms, "
            f"{len(truth.frames)} camera frames, {len(truth.patrols)} patrols/waits")


@dataclass
class Memory:
    """One ingested memory variant: ``ask(question, planner)`` -> (answer dict, tool calls made)."""
    ask: object
    names_of: dict
    keyframes: int
    identity: dict
    stage_s: dict = field(default_factory=dict)      # library path: seconds per ingest stage
    reused: bool = False                             # answered from an earlier run's memory


def _name(query, namer, truth, naming: str, work_dir: Path):
    """Operator: staff and visitors (a visitor's host knows them) from their 3 best crops (9 where those disagree).
    Enrolment: staff only (visitors have no enrolled photo), one photo each: the held-out photo
    where people wear labelled photos (``faces_dir``), else the stock portrait mirrored and
    relit (no second photo of a stock portrait exists; the billboard shows the original)."""
    from ..sim.naming import enrol_identities, enrolment_photo, label_identities
    if naming == "operator":
        return label_identities(query, namer, truth)
    photos = {}
    for name, person in truth.people.items():
        if person.get("visitor"):
            continue
        held_out = truth.faces.get(name, {}).get("held_out")
        photos[name] = held_out or enrolment_photo(person["portrait"], work_dir / f"enrol_{name}.png")
    return enrol_identities(query, namer, photos)


@contextlib.contextmanager
def _memory(path: str, episode: Path, truth, data: Path, variant: str, progress: bool, llm_base_url: str,
            llm_model: str, naming: str, reuse: bool = False):
    from .detection_metrics import detection_recall
    from .identity_metrics import identity_metrics
    people = MEMORY_VARIANTS[variant]["people"]
    if path == "nodes":
        from ..sim.demo import StackRun
        if data.exists():
            shutil.rmtree(data)
        overrides = NODE_VARIANT_SETTINGS[variant] + ((f"query_agent.llm_base_url={llm_base_url}",
                                                        f"query_agent.llm_model={llm_model}") if llm_base_url else ())
        with StackRun(episode, truth, data, overrides, progress, label=f"eval {variant}") as run:
            identity = {"after_naming": identity_metrics(lambda tool, args: run.query(tool, **args), truth)} \
                if people else {}
            yield Memory(lambda q, planner: (json.loads(run.ask(q.question, q.asked_at, planner).json or "{}"), []),
                         run.names_of, run.stats.observations, identity)
        return
    from ..agent.query_agent import AgentParams, QueryAgent
    from ..agent.tools import StoreMemoryClient
    from .text_only import TextOnlyPlanner
    marker = data / MEMORY_MARKER
    wanted = {"episode": episode.name, "variant": variant, "naming": naming,
              "operator": OPERATOR}
    reused = reuse and marker.exists() and all(json.loads(marker.read_text()).get(k) == v for k, v in wanted.items())
    if reuse and not reused:
        log.warning("not reusing %s: %s; ingesting again", data, "no memory of an earlier run there" if not
                    marker.exists() else f"it was built for "
                    f"{ {k: json.loads(marker.read_text()).get(k) for k in wanted} }, this run is {wanted}")
    if reused:      # the memory this run would build, built and named before: answer only
        from ..params import StoreParams
        from ..store import open_store
        log.info("reusing the memory in %s (%s)", data, marker.name)
        kept = json.loads(marker.read_text())
        store = open_store(StoreParams(data_dir=str(data)))
    else:
        if marker.exists():
            marker.unlink()
        store, report = _ingest(episode / "bag", data, MEMORY_VARIANTS[variant], progress, truth)
    try:
        def query(tool, args):
            return store.call_tool(tool, args)
        if reused:
            names_of = {p["person"]: p["name"].lower() for p in store.people() if p.get("name")}
        else:
            clustering = identity_metrics(query, truth) if people else {}     # what clustering alone did
            if MEMORY_VARIANTS[variant].get("gt_people"):   # the ablation's identities are the true names
                naming_report = NamingReport("ground truth (labelled ablation)")
                for p in store.people():
                    store.name_identity(p["person"], p["person"].capitalize())
                    naming_report.named[p["person"]] = p["person"]
            else:
                naming_report = _name(query, lambda ident, display: store.name_identity(ident, display), truth,
                                      naming, data)
            names_of = naming_report.named
            times = store.observation_times()
            kept = {**wanted, "keyframes": report.keyframes, "stage_s": report.stage_s,
                    "identity": {"clustering": clustering,
                                 "after_naming": identity_metrics(query, truth, times),
                                 "naming": naming_report.to_dict(),
                                 "detection": detection_recall(truth, times, ((s.t, s.box) for s in
                                                                              store.sighting_evidence()))}
                    if people else {}}
            marker.write_text(json.dumps(kept, indent=1))
        agent = QueryAgent(StoreMemoryClient(store), AgentParams(planner="rules", llm_base_url=llm_base_url, llm_model=llm_model),
                           extra_planners={"text_top_k": TextOnlyPlanner()})
        agent.extra_planners.update(llm_ablations(agent.client))

        def ask(q, planner):
            answer = agent.ask(q.question, as_of=q.asked_at, planner=planner).to_dict()
            return answer, answer["trace"]
        yield Memory(ask, names_of, kept["keyframes"], kept["identity"], kept["stage_s"], reused)
    finally:
        store.close()


def _answer_all(result: RunResult, questions, planner: str, memory: Memory, judge) -> RunResult:
    from ..llm.chat_client import LLMError
    for q in questions:
        ans, calls = memory.ask(q, planner)
        s = scoring.score(q, ans, memory.names_of)
        if q.type == "text" and judge is not None:
            try:
                mark = llm_match(judge, q.question, ", ".join(q.answer["objects"]), ans.get("text", ""))
                result.llm_match.append(mark)
                s.correct = s.strict = mark >= JUDGE_CORRECT_MARK
                s.compared = f"LLM-Match {mark}/5"
            except (JudgeError, LLMError) as exc:
                log.warning("LLM-Match judge failed (%s): keyword match kept", exc)
        result.scores.setdefault(scoring.category(q), []).append(s)
        result.tokens.append(ans.get("tokens_in", 0) + ans.get("tokens_out", 0))
        result.latency_s.append(ans.get("latency_s", 0.0))
        result.tool_calls.append(ans.get("tool_calls", 0))
        result.answers.append({"question": q.question, "type": q.type, "phrasing_set": q.phrasing_set,
                               "truth": q.answer, "answer": ans.get("text") or ans.get("error", ""),
                               "fields": {k: ans[k] for k in ANSWER_FIELDS if ans.get(k) not in (None, "", [])},
                               "status": ans.get("status", ""), "correct": s.correct, "strict": s.strict,
                               "error": s.error, "compared": s.compared, "calls": calls})
    return result
