"""A stack description: which nodes run, with which parameters.

One YAML file under ``config/`` drives both ``embodied-memory launch`` (this machine: no
``ros2 launch``) and ``launch/*.launch.py`` (full ROS 2 installs), so the two cannot drift::

    stack: default
    environment: {}                # extra environment for every node (optional)
    use_sim_time: false            # every node's ROS clock follows /clock (optional; a node's
                                   # own parameters.use_sim_time wins)
    nodes:
      memory:                      # node name
        executable: memory_node    # a console script of this package (see setup.py)
        namespace: ""              # optional
        required: true             # the stack stops (non-zero) when it fails for good
        respawn: true              # restart it when it crashes (the default)
        respawn_delay_s: 1.0       # first restart delay, doubled after each crash ...
        respawn_max_delay_s: 30.0  # ... up to this
        max_respawns: 5            # more crashes than this within crash_window_s = a crash loop:
        crash_window_s: 60.0       # the node is given up (a required one stops the stack, code 1)
        autostart: true            # managed (lifecycle) nodes only: the launcher configures and
                                   # activates it after every start (false: left unconfigured, for
                                   # a lifecycle manager or `ros2 lifecycle set`)
        transition_timeout_s: 300  # ... each step (its lifecycle services appear, configure,
                                   # activate) within this; configure loads perception's models
        remappings: {/memory/query: /spot/memory/query}   # optional: -r from:=to
        parameters: {data_dir: ...}

A crash is any exit but a clean one (code 0: a node with a natural end, e.g. an importer) or
a configuration error (code 2: a restart cannot fix it).  A node that ran longer than
``crash_window_s`` starts again from the first delay.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError, load_yaml, parse_params, params_to_dict
from .params import NODE_PARAMS

PACKAGE = "embodied_memory"
RUN_ID_ENV = "EMBODIED_MEMORY_RUN_ID"   # set by the launcher for its nodes: one id per run of a stack
_STACK_KEYS = {"stack", "environment", "nodes", "use_sim_time"}
# parameters rclpy itself owns on every node: passed through, not checked against the node's params
ROS_PARAMETERS = {"use_sim_time": bool}
_NODE_KEYS = {"executable", "namespace", "required", "respawn", "respawn_delay_s",
              "respawn_max_delay_s", "max_respawns", "crash_window_s", "parameters", "autostart",
              "transition_timeout_s", "remappings"}
# managed nodes (nodes/lifecycle.py): they start unconfigured; the launcher (or launch_ros) drives them
LIFECYCLE_EXECUTABLES = frozenset({"memory_node", "perception_node"})
# activated only once these (in the same stack) are active: perception publishes to the memory
# (not needed for the data: what the memory has not acknowledged is kept and sent again)
ACTIVATE_AFTER = {"perception_node": ("memory_node",)}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    executable: str
    parameters: dict[str, Any]
    namespace: str = ""
    required: bool = True
    respawn: bool = True
    respawn_delay_s: float = 1.0
    respawn_max_delay_s: float = 30.0
    max_respawns: int = 5
    crash_window_s: float = 60.0
    autostart: bool = True                 # managed nodes: driven to active after every start
    transition_timeout_s: float = 300.0    # each lifecycle step
    remappings: tuple[tuple[str, str], ...] = ()   # (from, to) names: `--ros-args -r from:=to`

    @property
    def lifecycle(self) -> bool:
        """A managed node (it starts unconfigured)."""
        return self.executable in LIFECYCLE_EXECUTABLES

    def respawn_delay(self, consecutive_crashes: int) -> float:
        """The delay before restart number ``consecutive_crashes`` (1 = the first): the first
        delay doubled each time, at most ``respawn_max_delay_s``."""
        n = max(1, consecutive_crashes)
        return min(self.respawn_max_delay_s, self.respawn_delay_s * 2.0 ** min(n - 1, 60))

    @property
    def fully_qualified_name(self) -> str:
        ns = self.namespace.strip("/")
        return f"/{ns}/{self.name}" if ns else f"/{self.name}"

    def ros_params_yaml(self) -> str:
        """The node's parameters as a ROS 2 ``--params-file``."""
        return yaml.safe_dump({self.fully_qualified_name: {"ros__parameters": self.parameters}},
                              sort_keys=True)

    def ros_arguments(self, params_file: str) -> list[str]:
        args = ["--ros-args", "-r", f"__node:={self.name}"]
        if self.namespace:
            args += ["-r", f"__ns:=/{self.namespace.strip('/')}"]
        for old, new in self.remappings:
            args += ["-r", f"{old}:={new}"]
        return args + ["--params-file", params_file]


@dataclass(frozen=True)
class StackSpec:
    name: str
    source: str
    nodes: list[NodeSpec]
    environment: dict[str, str] = field(default_factory=dict)

    def in_namespace(self, namespace: str) -> "StackSpec":
        """Every node under ``namespace`` (prefixed to a node's own); relative topic, service and
        action names then resolve in it, so several robots' stacks run side by side."""
        ns = namespace.strip("/")
        if not ns:
            return self
        nodes = [dataclasses.replace(n, namespace=f"{ns}/{n.namespace.strip('/')}".rstrip("/")) for n in self.nodes]
        return dataclasses.replace(self, nodes=nodes)

    def activate_after(self, node: NodeSpec) -> list[str]:
        """The fully qualified names of the managed nodes of this stack that must be active
        before ``node`` is activated (ACTIVATE_AFTER)."""
        first = ACTIVATE_AFTER.get(node.executable, ())
        return [n.fully_qualified_name for n in self.nodes
                if n is not node and n.executable in first and n.lifecycle and n.autostart]


def _expect(value: Any, kind: type | tuple, where: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise ConfigError(f"{where}: expected {names}, got {type(value).__name__} {value!r}")
    return value


def _non_negative(spec: dict, key: str, default: float, where: str, positive: bool = False) -> float:
    value = float(_expect(spec.get(key, default), (int, float), f"{where}.{key}"))
    if not (value > 0.0 if positive else value >= 0.0) or value == float("inf"):
        raise ConfigError(f"{where}.{key}: expected a finite number {'>' if positive else '>='} 0, got {value}")
    return value


def _remappings(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{/memory/query: /spot/memory/query}``: names of topics, services or actions."""
    _expect(data, dict, where)
    out = []
    for old, new in data.items():
        for name in (old, new):
            if not isinstance(name, str) or not name or any(c in name for c in " :="):
                raise ConfigError(f"{where}: {old!r}: {new!r}: names are non-empty strings without ' ', ':' or '='")
        out.append((old, new))
    return tuple(out)


def parse_stack(data: Any, source: str) -> StackSpec:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a stack file is a mapping with 'stack' and 'nodes'")
    unknown = sorted(set(data) - _STACK_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_STACK_KEYS))}")
    name = _expect(data.get("stack", Path(source).stem), str, f"{source}: stack")
    env = _expect(data.get("environment") or {}, dict, f"{source}: environment")
    env = {str(k): str(v) for k, v in env.items()}
    sim_time = data.get("use_sim_time")
    if sim_time is not None:
        _expect(sim_time, bool, f"{source}: use_sim_time")
    nodes_data = _expect(data.get("nodes"), dict, f"{source}: nodes")
    if not nodes_data:
        raise ConfigError(f"{source}: nodes: at least one node is needed")
    nodes = []
    zones: dict[str, str] = {}           # node -> its "timezone" (calendar days must agree across nodes)
    for node_name, spec in nodes_data.items():
        where = f"{source}: nodes.{node_name}"
        _expect(spec, dict, where)
        unknown = sorted(set(spec) - _NODE_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_NODE_KEYS))}")
        executable = _expect(spec.get("executable"), str, f"{where}.executable")
        if executable not in NODE_PARAMS:
            raise ConfigError(f"{where}.executable: unknown '{executable}'; known: {', '.join(sorted(NODE_PARAMS))}")
        given = dict(_expect(spec.get("parameters") or {}, dict, f"{where}.parameters"))
        ros_params = {k: _expect(given.pop(k), kind, f"{where}.parameters.{k}")
                      for k, kind in ROS_PARAMETERS.items() if k in given}
        if sim_time is not None:
            ros_params.setdefault("use_sim_time", sim_time)
        params = parse_params(NODE_PARAMS[executable], given, f"{where}.parameters")
        if hasattr(params, "timezone"):
            zones[node_name] = params.timezone
        delay = _non_negative(spec, "respawn_delay_s", 1.0, where)
        nodes.append(NodeSpec(
            name=node_name, executable=executable,
            # only what the file sets: the node fills in defaults (and validates again)
            parameters={**{k: v for k, v in params_to_dict(params).items() if k in given}, **ros_params},
            namespace=_expect(spec.get("namespace", ""), str, f"{where}.namespace"),
            required=_expect(spec.get("required", True), bool, f"{where}.required"),
            respawn=_expect(spec.get("respawn", True), bool, f"{where}.respawn"),
            respawn_delay_s=delay,
            respawn_max_delay_s=_non_negative(spec, "respawn_max_delay_s", max(30.0, delay), where),
            max_respawns=_expect(spec.get("max_respawns", 5), int, f"{where}.max_respawns"),
            crash_window_s=_non_negative(spec, "crash_window_s", 60.0, where, positive=True),
            autostart=_expect(spec.get("autostart", True), bool, f"{where}.autostart"),
            transition_timeout_s=_non_negative(spec, "transition_timeout_s", 300.0, where, positive=True),
            remappings=_remappings(spec.get("remappings") or {}, f"{where}.remappings"),
        ))
        node = nodes[-1]
        lifecycle_keys = sorted({"autostart", "transition_timeout_s"} & set(spec))
        if lifecycle_keys and not node.lifecycle:
            raise ConfigError(f"{where}: {', '.join(lifecycle_keys)}: '{executable}' is not a managed (lifecycle) "
                              f"node; these are: {', '.join(sorted(LIFECYCLE_EXECUTABLES))}")
        if node.max_respawns < 0:
            raise ConfigError(f"{where}.max_respawns: expected >= 0, got {node.max_respawns}")
        if node.respawn_max_delay_s < node.respawn_delay_s:
            raise ConfigError(f"{where}.respawn_max_delay_s ({node.respawn_max_delay_s}) is below "
                              f"respawn_delay_s ({node.respawn_delay_s})")
    if len(set(zones.values())) > 1:   # "yesterday" of the agent must be the store's "yesterday"
        raise ConfigError(f"{source}: the nodes' timezone parameters differ ("
                          + ", ".join(f"{n}: {z}" for n, z in zones.items()) + "); set one zone for all")
    return StackSpec(name=name, source=source, nodes=nodes, environment=env)


def load_stack(path: str | Path, overrides: dict[str, dict[str, Any]] | None = None) -> StackSpec:
    """Load and validate a stack file; ``overrides`` maps node name -> parameter values."""
    data = load_yaml(path)
    for node_name, values in (overrides or {}).items():
        nodes = (data or {}).get("nodes") or {}
        if node_name not in nodes:
            raise ConfigError(f"{path}: override for unknown node '{node_name}'")
        nodes[node_name].setdefault("parameters", {})
        nodes[node_name]["parameters"] = {**(nodes[node_name]["parameters"] or {}), **values}
    return parse_stack(data, str(path))


def config_dir() -> Path:
    """The package's config/ directory: the source checkout's, else share/ of a ROS install."""
    checkout = Path(__file__).resolve().parents[2] / "config"
    if checkout.is_dir():
        return checkout
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE)) / "config"
    except Exception as exc:  # noqa: BLE001 - report where we looked
        raise ConfigError(f"cannot find the {PACKAGE} config/ directory (not in {checkout.parent}, "
                          "not in the ament index)") from exc


def resolve_stack_path(name_or_path: str) -> Path:
    """``default`` -> config/default.yaml; a path is taken as it is."""
    path = Path(os.path.expanduser(name_or_path))
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    named = config_dir() / f"{name_or_path}.yaml"
    if not named.exists():
        known = sorted(p.stem for p in config_dir().glob("*.yaml"))
        raise ConfigError(f"no stack {name_or_path!r} (stacks: {', '.join(known)}; or a path to a YAML file)")
    return named
