"""``embodied-memory eval``: its arguments and commands (the simulated benchmark, or a public
question set replayed against a recording)."""
from __future__ import annotations

from pathlib import Path

from ..config import ConfigError


def add_eval_arguments(p) -> None:
    """The ``eval`` subcommand's arguments on parser ``p``."""
    p.add_argument("--out", default="eval_results", help="output directory")
    p.add_argument("--world", default="building", choices=["building", "small"],
                   help="building: 10 rooms and a reception on two corridors, people with routines, meetings, lunch groups, "
                        "visitors; small: the first five-room office")
    p.add_argument("--seed", type=int, default=0, help="world seed (people, faces, schedules; default 0)")
    p.add_argument("--seeds", default="",
                   help="comma-separated world seeds (e.g. 0,1,2; replaces --seed): one run per seed in OUT/seed<N>, then "
                        "per-type accuracy pooled over them, each phrasing set's gap to dev when --phrasings has "
                        "dev (OUT/pooled.md)")
    p.add_argument("--days", type=int, default=1, help="simulated days (default 1; habits and absences need several)")
    p.add_argument("--people", type=int, default=0, help="people (default 8 in the building, 3 in the small office)")
    p.add_argument("--visitors", type=int, default=1, help="one-off visitors (building)")
    p.add_argument("--per-type", type=int, default=4,
                   help="questions per type (default 4; fewer where the episode offers fewer)")
    p.add_argument("--phrasings", default="evaluation",
                   help="comma-separated phrasing sets (default evaluation): evaluation (never used by the "
                        "planners or their tests), dev (the set the planner's tests may use), probe, probe2, "
                        "probe3 and probe4 (written blind to evaluation; the planner was developed against them since, so "
                        "their scores are development scores); all ask the same facts, side by side they "
                        "measure robustness to wording")
    p.add_argument("--naming", default="operator", choices=["operator", "enrolment"],
                   help="operator: a person names identities from their 3 best stored crops (up to 9 where those "
                        "show different people); enrolment: one "
                        "labelled photo per person matched by the face backend")
    p.add_argument("--planners", default="rules,text_top_k,full_context",
                   help="comma-separated: rules, text_top_k (ReMEmbR-style), full_context, llm; with --llm-base-url "
                        "also llm_limit5, llm_limit15 (function-call limits), llm_remembr_tools (ReMEmbR's three "
                        "tools); with --questions the first one answers")
    p.add_argument("--variants", default="psfr,uniform,psfr_no_people",
                   help="memory variants to ingest: psfr, uniform, psfr_no_people, psfr_no_reid, "
                        "psfr_gt_objects, psfr_gt_people (labelled ablations: the simulator's objects / people)")
    p.add_argument("--objects", action="store_true",
                   help="also ask about small objects (offline only psfr_gt_objects can name them)")
    p.add_argument("--path", default="library", choices=["library", "nodes"],
                   help="library: the core in this process; nodes: the default stack as processes, the bag "
                        "replayed into it, questions through the Ask service (variants psfr, uniform, "
                        "psfr_no_people, psfr_no_reid; planners rules, full_context, llm)")
    p.add_argument("--faces-dir", default="", help="people wear these labelled photos (NAME/*.jpg, e.g. "
                                                   "../shared/data/faces/face_recognition_knn/train) instead of portraits")
    p.add_argument("--reuse-memory", action="store_true",
                   help="answer again from the memories an earlier run left in --out (same episode and naming) "
                        "instead of ingesting again: compare planners or scoring without re-ingesting")
    p.add_argument("--horizon", action="store_true",
                   help="long horizon: one psfr memory, questions after each day 1..--days (accuracy, tokens)")
    p.add_argument("--fleet", action="store_true",
                   help="the building patrolled by 3 robots at once (one bag each) writing one memory on a fleet "
                        "server started in OUT/server: accuracy with one robot's records vs the fleet's, identity "
                        "quality across robots (OUT/fleet.md); rules planner, psfr memory")
    p.add_argument("--questions", default="", help="a public question file (NaVQA CSV/JSON, OpenEQA JSON, "
                                                   "PersonEQA CSV) to replay against --bag")
    p.add_argument("--bag", default="", help="the recording the --questions are about (rosbag2 directory or file)")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO",
                   help="--bag: the bag's topic FROM read as the stack's topic TO (or a topic parameter name, "
                        "e.g. image_topic); repeatable")
    p.add_argument("--format", default="auto",
                   choices=["auto", "navqa_csv", "navqa_json", "openeqa_json", "personeqa_csv"],
                   help="--questions file format (auto: detected)")
    p.add_argument("--time-offset", default="auto",
                   help="--questions: seconds added to every time in the file; auto: 0 when the file's times "
                        "overlap the bag, else its earliest time moves to the bag's start")
    p.add_argument("--context-time", default="",
                   help="--questions: ask every question at this time (end, +SECONDS after the bag's start, or "
                        "UNIX seconds); default: each question at its own time (or the end of the bag)")
    p.add_argument("--timezone", default="", help="--questions: the file's wall clock and the agent's 'today' "
                                                  "(default: America/Los_Angeles for NaVQA, UTC for PersonEQA)")
    p.add_argument("--episode", default="", help="--questions: one NaVQA Seq ID / OpenEQA episode_history")
    p.add_argument("--navqa-csv", default="", help="--questions with a NaVQA per-sequence JSON: its CSV")
    p.add_argument("--limit", type=int, default=0, help="--questions: at most this many (0 = all)")
    p.add_argument("--llm-base-url", default="", help="OpenAI-compatible endpoint (enables llm, full_context answers)")
    p.add_argument("--llm-model", default="")


def cmd_eval(args) -> int:
    from ..sim.questions_v2 import PHRASING_SETS
    unknown = [p for p in args.phrasings.split(",") if p not in PHRASING_SETS]
    if unknown and not (args.questions or args.bag):
        raise ConfigError(f"--phrasings: unknown {', '.join(unknown)} ({', '.join(PHRASING_SETS)})")
    if args.fleet:
        return _eval_fleet(args)
    if args.seeds:
        return _eval_seeds(args)
    if args.questions or args.bag:
        return _eval_public(args)
    from .runner import MEMORY_VARIANTS, run_eval
    from ..sim.building_episode import BuildingConfig
    from ..sim.episode import EpisodeConfig
    unknown = [v for v in args.variants.split(",") if v not in MEMORY_VARIANTS]
    if unknown:
        raise ConfigError(f"--variants: unknown {', '.join(unknown)} ({', '.join(MEMORY_VARIANTS)})")
    if args.world == "small":
        config = EpisodeConfig(seed=args.seed, days=args.days, people=args.people or 3, faces_dir=args.faces_dir)
    else:
        config = BuildingConfig(seed=args.seed, days=args.days, people=args.people or 8, visitors=args.visitors,
                                faces_dir=args.faces_dir)
    if args.horizon:
        from .horizon import run_horizon
        run_horizon(Path(args.out), config, planners=tuple(args.planners.split(",")), per_type=args.per_type,
                    llm_base_url=args.llm_base_url, llm_model=args.llm_model)
        print((Path(args.out) / "horizon.md").read_text())
        return 0
    results = run_eval(Path(args.out), config, planners=tuple(args.planners.split(",")),
                       variants=tuple(args.variants.split(",")), llm_base_url=args.llm_base_url,
                       llm_model=args.llm_model, per_type=args.per_type, objects=args.objects,
                       path=args.path, phrasings=tuple(args.phrasings.split(",")), naming=args.naming,
                       reuse_memory=args.reuse_memory)
    print((Path(args.out) / "report.md").read_text())
    print(f"wrote {Path(args.out) / 'report.md'}, results.json and plots")
    return 0 if results else 1


def _eval_seeds(args) -> int:
    """One run per ``--seeds`` seed, then the pooled per-type table (``pooled.py``)."""
    import copy

    from .pooled import write_pooled
    try:
        seeds = list(dict.fromkeys(int(s) for s in args.seeds.split(",")))
    except ValueError:
        raise ConfigError(f"--seeds: comma-separated integers, not {args.seeds!r}") from None
    if args.horizon or args.questions or args.bag:
        raise ConfigError("--seeds runs the simulated benchmark: not with --horizon, --questions or --bag")
    out = Path(args.out)
    for seed in seeds:
        one = copy.copy(args)
        one.seeds, one.seed, one.out = "", seed, str(out / f"seed{seed}")
        if cmd_eval(one) != 0:
            return 1
    print(write_pooled(out, seeds))
    print(f"wrote {out / 'pooled.md'}")
    return 0


def _eval_fleet(args) -> int:
    """``eval --fleet``: one robot vs three on a shared fleet memory (``fleet_eval.py``)."""
    if args.world != "building" or args.seeds or args.horizon or args.questions or args.bag or args.path != "library":
        raise ConfigError("--fleet runs one building world (--seed) on the library path: not with --world small, "
                          "--seeds, --horizon, --questions, --bag or --path nodes")
    from .fleet_eval import fleet_config, run_fleet_eval
    out = Path(args.out)
    run_fleet_eval(out, fleet_config(args.seed, args.days, args.people, args.visitors), per_type=args.per_type,
                   phrasings=tuple(args.phrasings.split(",")))
    print((out / "fleet.md").read_text())
    print(f"wrote {out / 'fleet.md'} and fleet.json")
    return 0


def _eval_public(args) -> int:
    """``eval --questions FILE --bag BAG``: a public question set replayed against a recording."""
    from .replay_eval import run_public_eval
    if not (args.questions and args.bag):
        raise ConfigError("--questions and --bag go together (a question file and the recording it is about)")
    remaps = {}
    for item in args.remap:
        source, sep, target = item.partition(":=")
        if not sep or not source or not target:
            raise ConfigError(f"--remap {item!r}: FROM:=TO expected (e.g. /camera/image:=/spot/camera/image)")
        remaps[source] = target
    from .public_questions import QuestionFormatError
    from ..ingest.bag_reader import BagError
    planner = args.planners.split(",")[0]
    try:
        run_public_eval(args.questions, args.bag, Path(args.out), remaps=remaps, planner=planner,
                        llm_base_url=args.llm_base_url, llm_model=args.llm_model, fmt=args.format,
                        limit=args.limit or None, time_offset=args.time_offset, context_time=args.context_time or None,
                        timezone=args.timezone or None, episode=args.episode, csv_path=args.navqa_csv or None)
    except (BagError, QuestionFormatError, ValueError) as exc:    # a wrong file, bag, remap or option
        raise ConfigError(str(exc)) from exc
    print((Path(args.out) / "report.md").read_text())
    print(f"wrote {Path(args.out) / 'report.md'}")
    return 0
