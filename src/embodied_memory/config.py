"""Typed parameters from YAML, validated at start-up.

Every node (and every core component with settings) describes its parameters as a frozen
dataclass with defaults.  ``parse_params`` checks a mapping against it: unknown keys and
wrong types are errors that name the key and the file, never silently ignored.
Parameters are flat (ROS 2 parameters are), of type bool, int, float, str or a list of one
of those.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the file and the key."""


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    try:
        with path.open("r", encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc


def _check_value(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        (item_type, *_rest) = typing.get_args(annotation) or (Any,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        return [_check_value(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {type(value).__name__} {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
        if not math.isfinite(float(value)):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
        return value
    return value


def parse_params(cls: type[T], values: Mapping[str, Any] | None, source: str) -> T:
    """Build the params dataclass ``cls`` from ``values``; ``source`` names where they came from
    (e.g. ``config/default.yaml: nodes.memory.parameters``)."""
    values = dict(values or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(fields))}")
    checked = {k: _check_value(v, hints[k], f"{source}.{k}") for k, v in values.items()}
    try:
        params = cls(**checked)
    except TypeError as exc:  # a field without default was not given
        raise ConfigError(f"{source}: {exc}") from exc
    validate = getattr(params, "validate", None)
    if validate is not None:
        try:
            validate()
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from exc
    return params


def params_to_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)
