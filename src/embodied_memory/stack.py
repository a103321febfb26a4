"""A stack description: which nodes run, with which parameters.

One YAML file under ``config/`` drives both ``embodied-memory launch`` (this machine: no
``ros2 launch``) and ``launch/*.launch.py`` (full ROS 2 installs), so the two cannot drift::

    stack: default
    environment: {}                # extra environment for every node (optional)
    nodes:
      memory:                      # node name
        executable: memory_node    # a console script of this package (see setup.py)
        namespace: ""              # optional
        required: true             # the stack stops (non-zero) when it dies
        respawn: false             # restart it instead (respawn_delay_s, max_respawns)
        parameters: {data_dir: ...}
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError, load_yaml, parse_params, params_to_dict
from .params import NODE_PARAMS

PACKAGE = "embodied_memory"
_STACK_KEYS = {"stack", "environment", "nodes"}
_NODE_KEYS = {"executable", "namespace", "required", "respawn", "respawn_delay_s",
              "max_respawns", "parameters"}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    executable: str
    parameters: dict[str, Any]
    namespace: str = ""
    required: bool = True
    respawn: bool = False
    respawn_delay_s: float = 1.0
    max_respawns: int = 5

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
        return args + ["--params-file", params_file]


@dataclass(frozen=True)
class StackSpec:
    name: str
    source: str
    nodes: list[NodeSpec]
    environment: dict[str, str] = field(default_factory=dict)


def _expect(value: Any, kind: type | tuple, where: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise ConfigError(f"{where}: expected {names}, got {type(value).__name__} {value!r}")
    return value


def parse_stack(data: Any, source: str) -> StackSpec:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a stack file is a mapping with 'stack' and 'nodes'")
    unknown = sorted(set(data) - _STACK_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_STACK_KEYS))}")
    name = _expect(data.get("stack", Path(source).stem), str, f"{source}: stack")
    env = _expect(data.get("environment") or {}, dict, f"{source}: environment")
    env = {str(k): str(v) for k, v in env.items()}
    nodes_data = _expect(data.get("nodes"), dict, f"{source}: nodes")
    if not nodes_data:
        raise ConfigError(f"{source}: nodes: at least one node is needed")
    nodes = []
    for node_name, spec in nodes_data.items():
        where = f"{source}: nodes.{node_name}"
        _expect(spec, dict, where)
        unknown = sorted(set(spec) - _NODE_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_NODE_KEYS))}")
        executable = _expect(spec.get("executable"), str, f"{where}.executable")
        if executable not in NODE_PARAMS:
            raise ConfigError(f"{where}.executable: unknown '{executable}'; known: {', '.join(sorted(NODE_PARAMS))}")
        params = parse_params(NODE_PARAMS[executable], _expect(spec.get("parameters") or {}, dict,
                                                               f"{where}.parameters"),
                              f"{where}.parameters")
        nodes.append(NodeSpec(
            name=node_name, executable=executable,
            # only what the file sets: the node fills in defaults (and validates again)
            parameters={k: v for k, v in params_to_dict(params).items() if k in (spec.get("parameters") or {})},
            namespace=_expect(spec.get("namespace", ""), str, f"{where}.namespace"),
            required=_expect(spec.get("required", True), bool, f"{where}.required"),
            respawn=_expect(spec.get("respawn", False), bool, f"{where}.respawn"),
            respawn_delay_s=float(_expect(spec.get("respawn_delay_s", 1.0), (int, float), f"{where}.respawn_delay_s")),
            max_respawns=_expect(spec.get("max_respawns", 5), int, f"{where}.max_respawns"),
        ))
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
    return config_dir() / f"{name_or_path}.yaml"
