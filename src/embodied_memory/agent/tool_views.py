"""The agent's memory tools as views of the memory's query tools (store/tool_registry.py).

A :class:`StoreView` says how a question sees one memory tool: under which name, which of its
arguments the model chooses (the others fixed, or set by the ToolBox: ``now`` is the
question's time and ``before`` never later than it), tighter caps, renamed arguments, and
whether a history tool reads a window (``start`` / ``end`` / ``date`` / ``order`` /
``summary`` instead of ``t_start`` / ``t_end`` / ``limit``). The model's JSON schema is derived
from the memory tool's declaration: its description, each argument's type, range and
meaning; times become local ISO strings in the robot's zone. Only what no memory tool has
(a list of dates, the current state, navigation) is written here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from ..store.memory_store import MemoryStore
from ..store.tool_registry import ARGUMENT_DOCS, is_time

TOOLS = MemoryStore.TOOLS
TIME_HELP = "local ISO 8601 time (e.g. 2026-03-10T14:30:00) or HH:MM today"
DATE_HELP = "a whole local day, YYYY-MM-DD (instead of start and end)"
HISTORY_ROWS = 30          # rows of person / waypoint history per call
MAX_DATES = 8              # persons_per_day: dates per call
ORDERS = tuple(TOOLS["person_observations"].arguments["order"].limit.enum)
LOCAL_DATE = "a calendar day YYYY-MM-DD in the robot's time zone"
SET_BY_TOOLBOX = ("now", "before")       # the question's time; never later than it
WINDOW = ("t_start", "t_end", "limit", "order")


@dataclass(frozen=True)
class StoreView:
    tool: str                                            # the memory tool
    description: str = ""                                # default: the memory tool's
    expose: Optional[tuple[str, ...]] = None             # the arguments the model chooses (default: all others)
    fixed: Mapping[str, object] = field(default_factory=dict)
    defaults: Mapping[str, object] = field(default_factory=dict)   # the model's defaults, where not the store's
    caps: Mapping[str, int] = field(default_factory=dict)          # the model's maximum, where below the store's
    renamed: Mapping[str, str] = field(default_factory=dict)       # memory argument -> the model's name
    window: bool = False                                 # a history read through a window (ToolBox._history)
    compact: bool = True                                 # records shortened for the model
    note: str = ""                                       # appended to the description
    docs: Mapping[str, str] = field(default_factory=dict)          # argument -> what it means to the model

    def exposed(self) -> list[str]:
        """The memory tool's arguments the model chooses: those named in ``expose``, else every
        one not fixed, not a window's and not set by the ToolBox."""
        if self.expose is not None:
            return [n for n in TOOLS[self.tool].arguments if n in self.expose]
        return [n for n in TOOLS[self.tool].arguments if n not in self.fixed and n not in SET_BY_TOOLBOX
                and not (self.window and n in WINDOW)]

    def model_name(self, argument: str) -> str:
        return self.renamed.get(argument, argument)


def _property(view: StoreView, name: str) -> dict:
    arg = TOOLS[view.tool].arguments[name]
    text = view.docs.get(name, arg.description)
    if is_time(arg):
        prop = {"type": "string"}
        text = f"{text}; {TIME_HELP}"
    elif arg.json_type in ("integer", "number"):
        prop = {"type": arg.json_type}
        cap = view.caps.get(name, arg.limit.maximum)
        default = view.defaults.get(name, arg.default)
        if arg.json_type == "integer":
            text = f"{text} (" + ", ".join(([f"default {default}"] if default is not None else []) + [f"max {cap:g}"]) + ")"
    else:
        prop = {"type": arg.json_type}
        if arg.limit.enum:
            prop["enum"] = list(arg.limit.enum)
    if not arg.required:
        text += ", optional"
    return {**prop, "description": text}


def view_spec(view: StoreView) -> dict:
    """The OpenAI function spec (description, parameters) of a view."""
    tool = TOOLS[view.tool]
    props = {view.model_name(n): _property(view, n) for n in view.exposed()}
    if view.window:
        props.update({"start": {"type": "string", "description": f"window start, optional; {TIME_HELP}"},
                      "end": {"type": "string", "description": f"window end, optional; {TIME_HELP}"},
                      "date": {"type": "string", "description": DATE_HELP},
                      "order": {"type": "string", "enum": list(ORDERS), "description": ARGUMENT_DOCS["order"]}})
    description = view.description or tool.description
    if view.window:
        description += f" At most {HISTORY_ROWS} rows (see order)."
    if view.note:
        description += " " + view.note
    required = [view.model_name(n) for n in view.exposed() if tool.arguments[n].required]
    return {"description": description,
            "parameters": {"type": "object", "properties": props, "required": required}}


SUMMARY = {"type": "boolean", "description": "true: totals of the whole window instead of rows"}

VIEWS: dict[str, StoreView] = {
    "semantic_observations": StoreView("semantic_observations", expose=("query", "person", "before", "n"),
                                       defaults={"n": 10}, caps={"n": 30}),
    "waypoint_observations": StoreView("waypoint_observations", renamed={"waypoint_id": "waypoint"}, window=True,
                                       note="With summary, everyone seen there in the whole window."),
    "person_observations": StoreView("person_observations", window=True,
                                     note="With summary, totals of the whole window: days seen; per place "
                                          "sightings, days, visits, minutes; who was seen with them."),
    "daily_summary": StoreView("daily_summary", compact=False, docs={"date": LOCAL_DATE}),
    "retrieve_from_text": StoreView("text_observations", expose=("query",), fixed={"k": 5},
                                    description="ReMEmbR: the 5 observations whose descriptions best match a text "
                                                "(no recency)."),
    "retrieve_from_position": StoreView("observations_near", expose=("x", "y", "radius"), fixed={"k": 4}),
    "retrieve_from_time": StoreView("observations_at", renamed={"t": "time"}, fixed={"k": 8},
                                    description="ReMEmbR: the 4 observations closest to a time."),
    "image_retrieval": StoreView("image_retrieval", caps={"m": 4},
                                 note="The images are shown to you before you answer."),
    "regions": StoreView("regions", caps={"k": 10}),
}
NEEDS: dict[str, str] = {"regions": "regions_by_words"}   # view -> the memory capability it needs (offered
                                                          # only where the memory's ``capabilities`` says so)
for _view in VIEWS.values():
    if _view.window:
        assert all(w in TOOLS[_view.tool].arguments for w in WINDOW), _view.tool

SPECS: dict[str, dict] = {name: view_spec(view) for name, view in VIEWS.items()}
for _name in ("waypoint_observations", "person_observations"):
    SPECS[_name]["parameters"]["properties"]["summary"] = SUMMARY
SPECS["persons_per_day"] = {
    "description": TOOLS["persons_per_day"].description + " first_time: never seen before that day.",
    "parameters": {"type": "object", "properties": {"date": {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        "description": f"{LOCAL_DATE}, or a list of up to {MAX_DATES} dates"}}, "required": ["date"]}}
SPECS["current_state"] = {
    "description": "The current time, the robot's last known position, the known waypoints and people.",
    "parameters": {"type": "object", "properties": {}}}
REMEMBR_TOOLS = ("retrieve_from_text", "retrieve_from_position", "retrieve_from_time")   # ReMEmbR's three
