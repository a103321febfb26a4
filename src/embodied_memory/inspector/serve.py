"""``embodied-memory inspect``: serve the inspector on a memory directory, a stack's memory, or
the running stack (``--ros``)."""
from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import fields

from ..config import ConfigError

log = logging.getLogger(__name__)
TOKEN_ENV = "EMBODIED_MEMORY_INSPECT_TOKEN"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8080


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_for(host: str) -> str:
    """The token every request must carry: required (from the environment) beyond loopback,
    used on loopback too when set."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not is_loopback(host) and len(token) < 16:
        raise ConfigError(f"--host {host} serves the memory beyond this machine: set {TOKEN_ENV} to a secret of at "
                          f"least 16 characters (every request must then carry it)")
    return token


def add_inspect_arguments(p) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data-dir", help="a memory directory (the memory node's data_dir; stop the stack before "
                                           "naming, merging or forgetting: the inspector opens its store)")
    source.add_argument("--stack", help="a stack (name or YAML path): its memory node's data_dir and store parameters, "
                                        "its query agent's planner and endpoint (stop the stack first)")
    source.add_argument("--ros", action="store_true",
                        help="the running stack, on this machine: pages read its memory directory (read-only), "
                             "searches, questions and writes go to its services")
    p.add_argument("--ask-service", default="", help="--ros: the query agent's Ask service (default /agent/ask)")
    p.add_argument("--namespace", default="", metavar="NS", help="--ros: the stack's namespace (launch --namespace NS)")
    p.add_argument("--ask-timeout", type=float, default=None,
                   help="--ros: seconds to wait for an answer (default: the query agent's longest, with its "
                        "default parameters)")
    p.add_argument("--merges-topic", default="", help="--ros: the memory node's merges_topic, if not the default")
    p.add_argument("--acks-topic", default="", help="--ros: the memory node's acks_topic, if not the default")
    p.add_argument("--audit-log", default="", help="where writes are logged (default: inspector_audit.jsonl in "
                                                   "the memory directory)")
    p.add_argument("--timezone", default=None,
                   help="the memory's time zone (default: the stack's memory node's; --data-dir: UTC)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (beyond loopback needs {TOKEN_ENV})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--read-only", action="store_true", help="no naming, merging or forgetting")
    p.add_argument("--planner", default=None, choices=["auto", "rules", "llm", "full_context"],
                   help="the ask page's default planner (default: the stack's query agent's; --data-dir: auto)")
    p.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint for the llm planner")
    p.add_argument("--llm-model", default=None)
    p.add_argument("--foxglove", action="store_true",
                   help="also serve the memory as live Foxglove layers (foxglove-sdk WebSocket on 127.0.0.1)")
    p.add_argument("--foxglove-port", type=int, default=8765, help="the Foxglove WebSocket port")


def _params_of(cls, values: dict, where: str):
    """``cls`` (a params dataclass) from the keys of ``values`` it has (a node's YAML parameters),
    type-checked and validated as every node's parameters are."""
    from ..config import parse_params
    names = {f.name for f in fields(cls)}
    return parse_params(cls, {k: v for k, v in values.items() if k in names}, where)


def _overrides(args) -> dict:
    """What the command line says over the stack's (or the default) parameters."""
    return {k: v for k, v in (("timezone", args.timezone), ("planner", args.planner),
                              ("llm_base_url", args.llm_base_url), ("llm_model", args.llm_model)) if v is not None}


def store_backend(args):
    """--data-dir or --stack: (data_dir, timezone, planner, the store backend)."""
    from ..agent.query_agent import AgentParams
    from ..params import StoreParams
    from .backends import StoreBackend
    memory, agent, where = {"data_dir": args.data_dir}, {}, "--data-dir"
    if args.stack:
        from ..stack import load_stack, resolve_stack_path
        spec = load_stack(resolve_stack_path(args.stack))
        by_executable = {n.executable: n.parameters for n in spec.nodes}
        if "memory_node" not in by_executable:
            raise ConfigError(f"{spec.source}: no memory_node in this stack")
        memory, agent, where = by_executable["memory_node"], by_executable.get("query_agent_node", {}), spec.source
    cli = _overrides(args)
    store = _params_of(StoreParams, {**memory, **cli, "data_dir": os.path.expanduser(memory.get("data_dir") or
                                                                                       StoreParams.data_dir)}, where)
    agent_params = _params_of(AgentParams, {"timezone": store.timezone, **agent, **cli}, where)
    return store.data_dir, store.timezone, agent_params.planner, StoreBackend(store, agent_params)


def ros_backend(args):
    """--ros: (data_dir, timezone, planner, the backend on the running stack's services)."""
    from .ros_backend import RosBackend, StackNames
    if args.llm_base_url or args.llm_model:
        raise ConfigError("--ros: questions go to the stack's query agent, which has its own endpoint "
                          "(set llm_base_url in the stack, not here)")
    if args.ask_timeout is not None and not args.ask_timeout > 0:
        raise ConfigError(f"--ask-timeout {args.ask_timeout}: must be > 0")
    try:
        backend = RosBackend(StackNames.defaults(args.namespace, ask=args.ask_service, merges=args.merges_topic,
                                                 acks=args.acks_topic), ask_timeout_s=args.ask_timeout)
    except ValueError as exc:
        raise ConfigError(f"--ros: {exc}") from exc
    try:
        memory = backend.stack_memory()
    except Exception as exc:
        backend.close()
        raise ConfigError(f"--ros: {exc}") from exc
    if not os.path.isdir(memory.data_dir):
        backend.close()
        raise ConfigError(f"--ros: the memory node keeps its memory in {memory.data_dir}, which is not on this machine "
                          f"(run the inspector on the robot's computer and open it from here with --host and "
                          f"{TOKEN_ENV})")
    return memory.data_dir, args.timezone or memory.timezone, args.planner or "", backend


def port_free(host: str, port: int) -> None:
    """Refuse before anything starts when the address is taken (another inspector, say)."""
    import socket
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"--host {host} --port {port}: {exc.strerror} (another inspector? pick --port)") from exc


def cmd_inspect(args) -> int:
    import uvicorn

    from ..agent.query_agent import check_timezone
    from .app import InspectorConfig, create_app
    from .reader import MemoryNotFound
    for flag in ("ask_service", "ask_timeout", "merges_topic", "acks_topic"):
        if getattr(args, flag) not in (None, "") and not args.ros:
            raise ConfigError(f"--{flag.replace('_', '-')}: only with --ros")
    port_free(args.host, args.port)
    if args.timezone is not None:
        try:
            check_timezone(args.timezone)
        except ValueError as exc:
            raise ConfigError(f"--timezone: {exc}") from exc
    token = token_for(args.host)
    data_dir, timezone, planner, backend = ros_backend(args) if args.ros else store_backend(args)
    config = InspectorConfig(data_dir=data_dir, timezone=timezone, read_only=args.read_only, token=token,
                             host=args.host, planner=planner, audit_log=os.path.expanduser(args.audit_log))
    try:
        app = create_app(config, backend)
    except MemoryNotFound as exc:
        backend.close()
        raise ConfigError(str(exc)) from exc
    except OSError as exc:               # the audit log cannot be written (another user's directory)
        backend.close()
        raise ConfigError(f"cannot write the audit log ({exc}): pass --audit-log PATH, or --read-only") from exc
    log.info("inspector on http://%s:%d/ (%s%s; %s)", args.host, args.port, config.data_dir,
             ", read-only" if config.read_only else "", backend.describes)
    layers = None
    if args.foxglove:      # loopback only: the Foxglove protocol carries no token
        from .foxglove_layers import FoxgloveLayers
        layers = FoxgloveLayers(app.state.reader, port=args.foxglove_port).start()
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        if layers is not None:
            layers.stop()
        backend.close()
    return 0
