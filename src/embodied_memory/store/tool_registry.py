"""The memory's query tools, each declared once where it is implemented.

``@query_tool(description, result=...)`` on a store method makes it a tool: its name is the
method's, its typed arguments (JSON types, required, nullable, defaults) come from the
signature, their ranges from ``tool_args.ARGUMENT_LIMITS`` and their meaning from
:data:`ARGUMENT_DOCS` (both keyed by argument name, so every ``before`` of every tool means
the same; a tool may say more about one of its own). Adding a tool is the decorated method.

What derives from the registry (:func:`registry_of`): the store's ``QUERY_TOOLS``,
``call_tool`` validation and ``tool_schema`` (the memory service takes any of them), the agent's
tool specs (``agent/tools.py``: views of these tools as a question sees them), the ROS
client's check before it sends (``nodes/memory_client.py``) and the rules planner's limits.
A tool, an argument or a result without a description is an error when the registry is built.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .tool_args import TIME_LIMIT, ArgSpec, Limit, ToolTable, build_tool_table

ARGUMENT_DOCS: dict[str, str] = {    # times: UNIX seconds to the store, local time to the agent
    "query": "what to look for, in words, e.g. 'red mug on a table'",
    "person": "person: identity id or the name an operator gave it",
    "before": "only what was recorded at or before this time",
    "now": "the question's time: what 'hours ago' counts from (null: before, else the wall clock)",
    "n": "how many", "k": "how many", "m": "how many images", "limit": "at most this many rows",
    "t": "a time", "t_start": "window start", "t_end": "window end",
    "x": "map x (metres, the memory's fixed frame)", "y": "map y (metres, the memory's fixed frame)",
    "radius": "metres around (x, y); without it the k nearest",
    "embedding": "a global image embedding (image_dim numbers)",
    "episode": "only this episode", "exclude_episode": "not this episode", "episode_id": "an episode id",
    "waypoint_id": "a waypoint (place) id, e.g. 'kitchen'", "observation_id": "an observation id",
    "date": "a calendar day YYYY-MM-DD in the memory's time zone",
    "order": "'newest' (default): the latest rows of the window, newest first; 'oldest': the earliest, oldest "
             "first (arrived, first seen)",
    "include_embeddings": "also the face and re-ID vectors",
    "robot": "a fleet's memory: only what this robot saw (its robot_id); null or '': every robot",
}

OBSERVATION = ("id, time (ISO, the memory's zone), t (UNIX), episode, waypoint, position [x, y, z] (null: "
               "stored without a pose), yaw, description, persons (identity ids), image_path when kept, robot (a fleet's "
               "memory: the robot that saw it)")
SIGHTING = (f"{OBSERVATION}; confidence, activity, person_position [x, y, z] where the person stood (when "
            "depth placed them), waypoint = where the person was, robot_waypoint = the robot's when different")


@dataclass(frozen=True)
class QueryTool:
    name: str
    description: str
    result: str                      # the result's shape, in words
    arguments: dict[str, ArgSpec]

    def json_schema(self) -> dict:
        """The JSON Schema of the arguments, each with its description."""
        return {"type": "object",
                "properties": {n: {**s.json_schema(), "description": s.description + (" (UNIX seconds)" if is_time(s)
                                                                                     else "")}
                               for n, s in self.arguments.items()},
                "required": [n for n, s in self.arguments.items() if s.required], "additionalProperties": False}


def query_tool(description: str, *, result: str, limits: Optional[dict[str, Limit]] = None,
               **argument_docs: str) -> Callable:
    """Declare a store method a query tool (``argument_docs``: what its own arguments mean
    beyond :data:`ARGUMENT_DOCS`; ``limits``: ranges of arguments of its own beyond
    ``tool_args.ARGUMENT_LIMITS``)."""
    if not description or not result:
        raise TypeError("a query tool needs a description and its result's shape")

    def mark(method: Callable) -> Callable:
        method.__query_tool__ = (description, result, argument_docs, dict(limits or {}))
        return method
    return mark


def _declared(cls: type) -> dict[str, Callable]:
    """name -> method for every ``@query_tool`` of ``cls`` and its bases, in definition order."""
    out: dict[str, Callable] = {}
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            if hasattr(member, "__query_tool__"):
                out[name] = member
    return out


def registry_of(cls: type) -> dict[str, QueryTool]:
    methods = _declared(cls)
    table: ToolTable = build_tool_table(methods, {name: m.__query_tool__[3] for name, m in methods.items()})
    registry: dict[str, QueryTool] = {}
    for name, method in methods.items():
        description, result, own_docs, _limits = method.__query_tool__
        arguments = {}
        for arg, spec in table[name].items():
            doc = own_docs.get(arg) or ARGUMENT_DOCS.get(arg)
            if not doc:
                raise TypeError(f"{name}.{arg}: no description (ARGUMENT_DOCS or the tool's own)")
            arguments[arg] = spec.described(doc)
        unknown = set(own_docs) - set(arguments)
        if unknown:
            raise TypeError(f"{name}: descriptions of arguments it does not have: {sorted(unknown)}")
        registry[name] = QueryTool(name, description, result, arguments)
    return registry


def tool_table_of(registry: dict[str, QueryTool]) -> ToolTable:
    return {name: tool.arguments for name, tool in registry.items()}


def is_time(spec: ArgSpec) -> bool:
    """A UNIX-time argument (an agent reads and writes it as local time)."""
    return spec.limit is TIME_LIMIT


def maximum(registry: dict[str, QueryTool], tool: str, argument: str) -> Optional[float]:
    return registry[tool].arguments[argument].limit.maximum
