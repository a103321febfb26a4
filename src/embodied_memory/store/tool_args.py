"""The query tools' argument schemas, checked before anything reaches SQLite or the indexes.

One table, built once from the tool methods' signatures: each argument's JSON type
(``str`` -> string, ``int`` -> integer, ``float`` -> number, ``bool`` -> boolean,
``Sequence[float]`` -> array of numbers), whether it is required (no default) and whether
it may be null (``Optional``) come from the signature; ranges and lengths come from
:data:`ARGUMENT_LIMITS`, keyed by argument name, so e.g. every ``limit`` of every tool has
the same bounds.  An argument without a limit (other than a boolean) is an error when the
table is built, so a new tool cannot skip validation.

``validate_arguments(table, tool, arguments, dims)`` returns the arguments to call the
method with, or raises :class:`InvalidArgumentError` naming the tool and the argument.
"""
from __future__ import annotations

import inspect
import math
import numbers
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional, Sequence

from .errors import InvalidArgumentError

MAX_DEPTH = 8            # nesting of lists/objects anywhere in the arguments
COUNT_MAX = 1000
TIME_MAX = 1e11          # UNIX seconds (year 5138); a bigger number is a unit mistake or an attack
COORD_MAX = 1e6          # metres
ID_CHARS = 128
QUERY_CHARS = 2000


@dataclass(frozen=True)
class Limit:
    """Range and length limits of one argument (by name, shared by every tool)."""

    minimum: Optional[float] = None
    maximum: Optional[float] = None
    exclusive_minimum: bool = False
    max_length: Optional[int] = None        # strings: characters; arrays: items
    enum: Optional[tuple[str, ...]] = None
    length_of: Optional[str] = None         # arrays: must have dims[length_of] items


_COUNT = Limit(minimum=1, maximum=COUNT_MAX)
TIME_LIMIT = Limit(minimum=0, maximum=TIME_MAX)   # UNIX seconds (an agent sees local times)
_COORD = Limit(minimum=-COORD_MAX, maximum=COORD_MAX)
_ID = Limit(max_length=ID_CHARS)

ARGUMENT_LIMITS: dict[str, Limit] = {
    "n": _COUNT, "k": _COUNT, "m": _COUNT, "limit": _COUNT,
    "before": TIME_LIMIT, "now": TIME_LIMIT, "t": TIME_LIMIT, "t_start": TIME_LIMIT, "t_end": TIME_LIMIT,
    "x": _COORD, "y": _COORD,
    "radius": Limit(minimum=0, exclusive_minimum=True, maximum=COORD_MAX),
    "query": Limit(max_length=QUERY_CHARS),
    "person": _ID, "observation_id": _ID, "waypoint_id": _ID, "episode_id": _ID,
    "episode": _ID, "exclude_episode": _ID, "robot": Limit(max_length=64),
    "date": Limit(max_length=32),
    "order": Limit(enum=("newest", "oldest")),
    "embedding": Limit(length_of="image_dim"),
}


@dataclass(frozen=True)
class ArgSpec:
    name: str
    json_type: str               # string | integer | number | boolean | array
    required: bool
    nullable: bool
    default: Any
    limit: Limit
    description: str = ""        # tool_registry: what the argument means

    def described(self, description: str) -> "ArgSpec":
        return replace(self, description=description)

    def json_schema(self) -> dict:
        schema: dict[str, Any] = {"type": [self.json_type, "null"] if self.nullable else self.json_type}
        lim = self.limit
        if self.json_type == "array":
            schema["items"] = {"type": "number"}
        if lim.minimum is not None:
            schema["exclusiveMinimum" if lim.exclusive_minimum else "minimum"] = lim.minimum
        if lim.maximum is not None:
            schema["maximum"] = lim.maximum
        if lim.max_length is not None:
            schema["maxLength"] = lim.max_length
        if lim.enum is not None:
            schema["enum"] = list(lim.enum)
        if not self.required:
            schema["default"] = self.default
        return schema


ToolTable = dict[str, dict[str, ArgSpec]]

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type(tool: str, name: str, annotation) -> tuple[str, bool]:
    """(JSON type, nullable) of a parameter annotation."""
    nullable = False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Union or type(annotation).__name__ == "UnionType":
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) != 1:
            raise TypeError(f"{tool}.{name}: a union of {rest} has no JSON type")
        annotation = rest[0]
    if annotation in _JSON_TYPES:
        return _JSON_TYPES[annotation], nullable
    origin = typing.get_origin(annotation)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str:
        return "array", nullable
    raise TypeError(f"{tool}.{name}: annotation {annotation!r} has no JSON type")


def build_tool_table(methods: Mapping[str, Callable],
                     own_limits: Mapping[str, Mapping[str, Limit]] = {}) -> ToolTable:  # noqa: B006 - read only
    """tool name -> argument name -> spec, from each method's signature and ARGUMENT_LIMITS
    (``own_limits``: a tool's limits for arguments of its own)."""
    table: ToolTable = {}
    for tool, method in methods.items():
        hints = typing.get_type_hints(method)
        specs: dict[str, ArgSpec] = {}
        for param in inspect.signature(method).parameters.values():
            if param.name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.name not in hints:
                raise TypeError(f"{tool}.{param.name}: no type annotation (its JSON type comes from it)")
            json_type, nullable = _json_type(tool, param.name, hints[param.name])
            required = param.default is inspect.Parameter.empty
            nullable = nullable or (not required and param.default is None)
            limit = own_limits.get(tool, {}).get(param.name) or ARGUMENT_LIMITS.get(param.name)
            if limit is None:
                if json_type != "boolean":
                    raise TypeError(f"{tool}.{param.name}: no limits (ARGUMENT_LIMITS, or the tool's own: "
                                    f"@query_tool(..., limits={{{param.name!r}: Limit(...)}}))")
                limit = Limit()
            specs[param.name] = ArgSpec(param.name, json_type, required, nullable,
                                        None if required else param.default, limit)
        table[tool] = specs
    return table


def _type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, numbers.Integral):
        return "integer"
    if isinstance(value, numbers.Real):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, (bytes, bytearray)):
        return "bytes"
    return type(value).__name__


_ARTICLE = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
            "array": "an array of numbers"}


def _too_deep(value, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, tuple, Mapping)):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _check_number(where: str, value, spec: ArgSpec):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{where} must be {_ARTICLE[spec.json_type]}, got {_type_name(value)}")
    try:
        value = float(value) if not isinstance(value, numbers.Integral) else int(value)
        if isinstance(value, int):
            float(value)   # OverflowError for integers beyond any float
    except OverflowError:
        raise InvalidArgumentError(f"{where} is too large") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgumentError(f"{where} must be finite, got {value}")
    if spec.json_type == "integer":
        if isinstance(value, float):
            if not value.is_integer():
                raise InvalidArgumentError(f"{where} must be an integer, got {value}")
            value = int(value)
    else:
        value = float(value)
    lim = spec.limit
    if lim.minimum is not None and (value <= lim.minimum if lim.exclusive_minimum else value < lim.minimum):
        raise InvalidArgumentError(f"{where} must be {'>' if lim.exclusive_minimum else '>='} "
                                   f"{lim.minimum:g}, got {value:g}")
    if lim.maximum is not None and value > lim.maximum:
        raise InvalidArgumentError(f"{where} must be <= {lim.maximum:g}, got {value:g}")
    return value


def _check_string(where: str, value, spec: ArgSpec) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{where} must be a string, got {_type_name(value)}")
    lim = spec.limit
    if lim.max_length is not None and len(value) > lim.max_length:
        raise InvalidArgumentError(f"{where} has {len(value)} characters, at most {lim.max_length} allowed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{where} is not valid UTF-8 text (character {exc.start})") from None
    if "\x00" in value:
        raise InvalidArgumentError(f"{where} contains a NUL character")
    if lim.enum is not None and value not in lim.enum:
        raise InvalidArgumentError(f"{where} must be one of {', '.join(lim.enum)}, got {value[:40]!r}")
    return value


def _check_array(where: str, value, spec: ArgSpec, dims: Mapping[str, int]) -> list[float]:
    if not isinstance(value, (list, tuple)):
        raise InvalidArgumentError(f"{where} must be an array of numbers, got {_type_name(value)}")
    if spec.limit.max_length is not None and len(value) > spec.limit.max_length:
        raise InvalidArgumentError(f"{where} has {len(value)} values, at most {spec.limit.max_length} allowed")
    want = dims.get(spec.limit.length_of) if spec.limit.length_of else None
    if want is not None and len(value) != want:
        raise InvalidArgumentError(f"{where} has {len(value)} values, expected {want} "
                                   f"({spec.limit.length_of})")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, numbers.Real):
            raise InvalidArgumentError(f"{where}[{i}] must be a number, got {_type_name(item)}")
        try:
            item = float(item)
        except OverflowError:
            raise InvalidArgumentError(f"{where}[{i}] is too large") from None
        if not math.isfinite(item):
            raise InvalidArgumentError(f"{where}[{i}] must be finite, got {item}")
        out.append(item)
    return out


def validate_arguments(table: ToolTable, tool: Any, arguments: Any,
                       dims: Mapping[str, int] = {}) -> dict:  # noqa: B006 - read only
    """The checked keyword arguments for ``tool``; raises InvalidArgumentError."""
    if not isinstance(tool, str) or tool not in table:
        shown = tool[:60] if isinstance(tool, str) else _type_name(tool)
        raise InvalidArgumentError(f"unknown tool {shown!r}; tools: {', '.join(table)}")
    if not isinstance(arguments, Mapping):
        raise InvalidArgumentError(f"{tool}: arguments must be a JSON object, got {_type_name(arguments)}")
    if _too_deep(arguments, MAX_DEPTH):
        raise InvalidArgumentError(f"{tool}: arguments are nested more than {MAX_DEPTH} levels deep")
    specs = table[tool]
    for key in arguments:
        if not isinstance(key, str) or key not in specs:
            shown = key[:60] if isinstance(key, str) else _type_name(key)
            raise InvalidArgumentError(f"{tool}: unknown argument {shown!r}; arguments: {', '.join(specs) or 'none'}")
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        where = f"{tool}: {name}"
        if name not in arguments:
            if spec.required:
                raise InvalidArgumentError(f"{where} is required")
            continue
        value = arguments[name]
        if value is None:
            if not spec.nullable:
                raise InvalidArgumentError(f"{where} must be {_ARTICLE[spec.json_type]}, got null")
            out[name] = None
        elif spec.json_type == "string":
            out[name] = _check_string(where, value, spec)
        elif spec.json_type in ("integer", "number"):
            out[name] = _check_number(where, value, spec)
        elif spec.json_type == "boolean":
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"{where} must be a boolean, got {_type_name(value)}")
            out[name] = value
        else:
            out[name] = _check_array(where, value, spec, dims)
    return out
