"""``embodied-memory eval --fleet``: the building patrolled by 3 robots sharing one memory.

The fleet's world (``sim/fleet_episode.py``: spot1 the north wing, spot2 the south wing, spot3
the whole building in the afternoon) with one bag per robot; a real fleet server
(``fleet/server.py``: PostgreSQL, TCP, a password per login) started in ``OUT/server``; each
robot's bag ingested through the same core the nodes run (selection, perception, the store), by
that robot's login with its ``robot_id`` and its ids qualified as its memory node qualifies them
(``fleet/ids.py``).  Two stages, the same questions:

  1 robot   spot1 alone: its records only (what one robot's memory answers)
  3 robots  every robot's records; ``fleet reconcile`` merges identities robots enrolled for
            one face, then the operator names identities from stored crops as in ``eval``

Each stage is its own memory (a database of the server), so nothing of the first stage (its
operator's names) reaches the second.

The questions come from the fleet's truth (what any robot observed; ``sim/questions_v2.py``,
evaluation phrasings), asked through spot1's own login (its query agent reads the whole fleet)
and scored by ``sim/scoring.py`` as the single-robot benchmark is.  Identity quality is
measured across robots before naming (what perception and reconcile did) and after it.
Perception's idle attach pass is not run (a fleet robot's memory node does not run it either).
Writes ``fleet.md`` and ``fleet.json`` into OUT.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

from .runner import SELECTION, Memory, RunResult, _answer_all, _commit, _sim_bag_topics

log = logging.getLogger(__name__)

DATABASE = "fleet"
OPERATOR = "operator"


def _robot_truth(truth, robots: set[str]):
    """The fleet's truth restricted to what ``robots`` sensed (naming and identity measures)."""
    return replace(truth, frames=[f for f in truth.frames if f.get("robot_id") in robots])


def _ingest_robot(bag: Path, params, progress: bool) -> dict:
    """One robot's bag into the fleet's memory through its own login; its ingest report."""
    from ..fleet.ids import FleetIds
    from ..ingest.offline import ingest_bag
    from ..perception.pipeline import Perception, PerceptionParams
    from ..store import open_store
    store = open_store(params)
    perception = Perception(PerceptionParams(data_dir=params.data_dir))
    try:
        start = time.perf_counter()
        report = ingest_bag(str(bag), store, perception, progress=progress, selection=SELECTION,
                            topics=_sim_bag_topics(), ids=FleetIds(params.robot_id))
        return {"keyframes": report.keyframes, "stored": report.stored, "ingest_s": round(time.perf_counter() - start, 1)}
    finally:
        perception.close()
        store.close()


def _reconcile_pairs(store, identity: dict) -> list[dict]:
    """Report only (after the run; nothing here reaches the memory): the cross-robot pairs
    reconcile compares (face distance under 0.8), each with its identities' majority person by
    the simulator, to see where ``merge_eps`` and ``margin`` fall."""
    from ..fleet.identities import FleetMatchParams, face_distances
    majority = {}
    for person, ids in identity.get("per_person", {}).items():
        for ident, n in ids.items():
            if n > majority.get(ident, ("", 0))[1]:
                majority[ident] = (person, n)
    return [{"a": a, "b": b, "distance": round(d, 3), "a_is": majority.get(a, ("?",))[0],
             "b_is": majority.get(b, ("?",))[0]}
            for a, b, d in face_distances(store.sighting_evidence(reid=False), FleetMatchParams()).pairs(below=0.8)]


def run_fleet_eval(out_dir: Path, cfg=None, per_type: int = 4, phrasings: tuple[str, ...] = ("evaluation",),
                   progress: bool = True) -> dict:
    """The two stages (1 robot, every robot) on one fleet server; returns what ``fleet.json`` holds."""
    from ..fleet.identities import reconcile
    from ..fleet.roles import add_operator, add_robot, create_fleet
    from ..fleet.server import FleetServer
    from ..params import StoreParams
    from ..sim.episode import GroundTruth, cached_episode
    from ..sim.fleet_episode import FleetConfig
    from ..sim.naming import label_identities
    from ..sim.questions_v2 import generate_questions
    from ..store import open_store
    from .identity_metrics import identity_metrics
    from ..agent.query_agent import AgentParams, QueryAgent
    from ..agent.tools import StoreMemoryClient

    cfg = cfg or FleetConfig(days=1)
    out_dir.mkdir(parents=True, exist_ok=True)
    episode = cached_episode(cfg, progress)
    truth = GroundTruth.load(episode / "ground_truth.json")
    questions = [q for p in phrasings for q in generate_questions(truth, seed=cfg.seed, per_type=per_type,
                                                                    phrasing_set=p)]
    robots = [r.robot_id for r in cfg.robots]
    password = secrets.token_urlsafe(18)            # one run's server: every login gets it (bench only)
    env = "EMBODIED_MEMORY_DB_PASSWORD"
    previous = os.environ.get(env)
    os.environ[env] = password
    if (out_dir / "server").exists():
        shutil.rmtree(out_dir / "server")           # a fresh memory each run
    server = FleetServer(out_dir / "server", superuser_password=password).start()
    stores = []
    try:
        admin = server.url()
        stages, ingested = [], {}
        for stage in (robots[:1], robots):     # each stage its own memory: nothing of the first reaches the second
            label = f"{len(stage)} robot{'s' if len(stage) > 1 else ''}"
            database = f"{DATABASE}_{len(stage)}"
            create_fleet(admin, password, database, StoreParams())
            if not stages:                     # the logins (server-wide), once the fleet's roles exist
                for robot in robots:
                    add_robot(admin, password, robot, password)
                add_operator(admin, password, OPERATOR, password)

            def login(user: str, data_dir: Path, robot_id: str = "") -> StoreParams:
                return StoreParams(backend="postgres", postgres_url=server.url(user, database),
                                   data_dir=str(data_dir), robot_id=robot_id, postgres_password_env=env)
            for robot in stage:            # (spot1 again for the fleet's memory: the same keyframes)
                ingested[robot] = _ingest_robot(episode / robot / "bag", login(robot, out_dir / database / robot, robot),
                                                progress)
            operator = open_store(login(OPERATOR, out_dir / database / "operator"))
            asker = open_store(login(robots[0], out_dir / database / f"{robots[0]}_agent", robots[0]))
            stores += [operator, asker]
            seen = _robot_truth(truth, set(stage))
            start = time.perf_counter()

            def query(tool, args):
                return operator.call_tool(tool, args)
            pairs = _reconcile_pairs(operator, identity_metrics(query, seen))
            merges = reconcile(operator)
            before_naming = identity_metrics(query, seen)
            naming = label_identities(query, lambda ident, display: operator.name_identity(ident, display), seen)
            after_naming = identity_metrics(query, seen, operator.observation_times())
            agent = QueryAgent(StoreMemoryClient(asker), AgentParams(planner="rules", robot_id=robots[0]))

            def ask(q, planner):
                answer = agent.ask(q.question, as_of=q.asked_at, planner=planner).to_dict()
                return answer, answer["trace"]
            memory = Memory(ask, naming.named, sum(ingested[r]["keyframes"] for r in stage), {})
            results = [_answer_all(RunResult(label, "rules", p), [q for q in questions if q.phrasing_set == p],
                                   "rules", memory, None) for p in phrasings]
            stages.append({"stage": label, "robots": list(stage), "reconcile_merges": len(merges),
                           "reconcile_pairs": pairs,
                           "identity_before_naming": before_naming, "identity_after_naming": after_naming,
                           "naming": naming.to_dict(), "results": [r.summary() for r in results],
                           "answers": [a for r in results for a in r.answers],
                           "observations_per_robot": asker.stats().get("observations_per_robot", {}),
                           "reconcile_name_answer_s": round(time.perf_counter() - start, 1)})
    finally:
        for store in stores:
            store.close()
        server.stop()
        if previous is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = previous
    report = {"config": {**asdict(cfg), "per_type": per_type, "phrasings": list(phrasings)}, "commit": _commit(),
              "questions": len(questions), "ingested": ingested, "stages": stages}
    (out_dir / "fleet.json").write_text(json.dumps(report, indent=1, default=str))
    (out_dir / "fleet.md").write_text(fleet_markdown(report))
    return report


def _overall(identity: dict) -> dict:
    return identity.get("overall", identity)


def fleet_markdown(report: dict) -> str:
    """The fleet table (one row per stage and phrasing set) and per-type accuracy."""
    lines = ["# Fleet benchmark: one robot vs the fleet, one shared memory", "",
             f"{len(report['config']['robots'])} robots, seed {report['config']['seed']}, "
             f"{report['config']['days']} day(s), {report['questions']} questions (commit {report['commit']})", "",
             "| memory | phrasing | accuracy | strict | keyframes | identities | ids per person | pairwise recall "
             "| purity | reconcile merges |", "|---|---|---|---|---|---|---|---|---|---|"]
    for stage in report["stages"]:
        ident = _overall(stage["identity_before_naming"])
        keyframes = sum(report["ingested"][r]["keyframes"] for r in stage["robots"])
        for r in stage["results"]:
            lines.append(f"| {stage['stage']} ({', '.join(stage['robots'])}) | {r['phrasing']} | {r['accuracy']:.3f} | "
                         f"{r['strict_accuracy']:.3f} | {keyframes} | {ident.get('identities')} | "
                         f"{ident.get('ids_per_person')} | {ident.get('pairwise_recall')} | {ident.get('purity')} | "
                         f"{stage['reconcile_merges']} |")
    lines += ["", "Per type (accuracy, first phrasing set):", "",
              "| type | " + " | ".join(s["stage"] for s in report["stages"]) + " |",
              "|---|" + "---|" * len(report["stages"])]
    per = [s["results"][0]["per_category"] for s in report["stages"]]
    for category in sorted({c for p in per for c in p}):
        cells = [f"{p[category]['accuracy']:.2f} ({p[category]['n']})" if category in p else "-" for p in per]
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    lines += ["", "Identities are measured before the operator names them (what perception and `fleet reconcile` "
              "did across robots): ids per person over everyone seen (a fragment of one sighting counts as much "
              "as a whole day), pairwise recall over pairs of one person's sightings (weighed by sightings), "
              "purity over attributed sightings.", ""]
    return "\n".join(lines)


def fleet_config(seed: int, days: int, people: int, visitors: int):
    from ..sim.fleet_episode import FleetConfig
    return replace(FleetConfig(), seed=seed, days=days, people=people or 8, visitors=visitors)
