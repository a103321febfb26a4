"""``embodied-memory inspect``: serve the inspector on one memory directory."""
from __future__ import annotations

import ipaddress
import logging
import os

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
    p.add_argument("--data-dir", required=True, help="the memory node's data_dir (stop the stack first when "
                                                     "naming, merging or forgetting: the inspector writes to it)")
    p.add_argument("--timezone", default="UTC", help="the memory's time zone (the memory node's timezone)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (beyond loopback needs {TOKEN_ENV})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--read-only", action="store_true", help="no naming, merging or forgetting")
    p.add_argument("--planner", default="rules", choices=["auto", "rules", "llm", "full_context"],
                   help="the ask page's default planner")
    p.add_argument("--llm-base-url", default="", help="OpenAI-compatible endpoint for the llm planner")
    p.add_argument("--llm-model", default="")
    p.add_argument("--foxglove", action="store_true",
                   help="also serve the memory as live Foxglove layers (foxglove-sdk WebSocket on 127.0.0.1)")
    p.add_argument("--foxglove-port", type=int, default=8765, help="the Foxglove WebSocket port")


def cmd_inspect(args) -> int:
    import uvicorn

    from ..agent.query_agent import check_timezone
    from .app import InspectorConfig, create_app
    from .reader import MemoryNotFound
    try:
        check_timezone(args.timezone)
    except ValueError as exc:
        raise ConfigError(f"--timezone: {exc}") from exc
    config = InspectorConfig(data_dir=os.path.expanduser(args.data_dir), timezone=args.timezone,
                             read_only=args.read_only, token=token_for(args.host), host=args.host,
                             planner=args.planner,
                             llm_base_url=args.llm_base_url, llm_model=args.llm_model)
    try:
        app = create_app(config)
    except MemoryNotFound as exc:
        raise ConfigError(str(exc)) from exc
    log.info("inspector on http://%s:%d/ (%s%s)", args.host, args.port, config.data_dir,
             ", read-only" if config.read_only else "")
    layers = None
    if args.foxglove:      # loopback only: the Foxglove protocol carries no token
        from .foxglove_layers import FoxgloveLayers
        layers = FoxgloveLayers(app.state.reader, port=args.foxglove_port).start()
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        if layers is not None:
            layers.stop()
    return 0
