"""Typed parameters from YAML, validated at start-up.

Every node (and every core component with settings) describes its parameters as a frozen
dataclass with defaults.  ``parse_params`` checks a mapping against it: unknown keys and
wrong types are errors that name the key and the file, never silently ignored.
Parameters are flat (ROS 2 parameters are), of type bool, int, float, str or a list of one
of those.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import math
import textwrap
import tokenize
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


def replace_params(params: T, changes: Mapping[str, Any], source: str) -> T:
    """``params`` with ``changes`` applied, the whole dataclass validated again (a value that is
    fine alone may contradict another one: ``planner: llm`` without ``llm_base_url``)."""
    return parse_params(type(params), {**params_to_dict(params), **changes}, source)


def dynamic_fields(cls: type) -> frozenset[str]:
    """The parameters of ``cls`` that take effect when changed at run time (its ``DYNAMIC``
    class variable); every other one needs a restart."""
    dynamic = frozenset(getattr(cls, "DYNAMIC", frozenset()))
    unknown = dynamic - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__name__}.DYNAMIC names no field: {', '.join(sorted(unknown))}")
    return dynamic


_UNITS = {"_s": "seconds", "_m": "metres", "_hz": "Hz", "_deg": "degrees", "_hours": "hours"}


def field_descriptions(cls: type) -> dict[str, str]:
    """One line per field of the dataclass ``cls``: the trailing ``# comment`` of its definition
    (continued on the comment-only lines below it), else words made from its name and unit
    suffix; with the default value."""
    comments = _field_comments(cls)
    out = {}
    for f in dataclasses.fields(cls):
        text = comments.get(f.name)
        if not text:
            stem, unit = f.name, ""
            for suffix, name in _UNITS.items():
                if f.name.endswith(suffix):
                    stem, unit = f.name[: -len(suffix)], f" ({name})"
            text = stem.replace("_", " ") + unit
        default = f.default if f.default is not dataclasses.MISSING else None
        out[f.name] = text if default is None else f"{text} [default: {default!r}]"
    return out


@functools.lru_cache(maxsize=None)
def _field_comments(cls: type) -> dict[str, str]:
    """Field name -> its comment, the dataclass's bases first (a subclass's comment wins)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            out.update(_class_comments(klass))
    return out


def _class_comments(klass: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(klass))
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):  # no source (zipped, frozen)
        return {}
    comments: dict[int, tuple[int, str]] = {}    # line -> (column, text)
    code: set[int] = set()                       # lines with code on them
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code.update(range(tok.start[0], tok.end[0] + 1))
    out = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for stmt in body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        parts = [comments[line][1] for line in range(stmt.lineno, stmt.end_lineno + 1) if line in comments]
        line = stmt.end_lineno + 1   # comment-only lines indented past the field continue its comment
        while parts and line in comments and line not in code and comments[line][0] > stmt.col_offset:
            parts.append(comments[line][1])
            line += 1
        text = " ".join(p for p in parts if p)
        if text:
            out[stmt.target.id] = text
    return out
