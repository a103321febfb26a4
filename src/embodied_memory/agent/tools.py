"""The agent's tools: JSON-schema functions over the memory (and the navigation bridge).

HUMEMBR's five (semantic observations, waypoint observations, person observations, persons
per day, daily summary), ReMEmbR's three (text, position, time), LVMem's image retrieval,
the current state, and navigate-to-waypoint when the question may move the robot
(``QuestionHooks.navigate``: the AskAndAct action, never the Ask service).  Every tool sees
the memory as of the question time only (``now``): nothing later leaks into an answer.
Results are compact (ids, times, positions, short descriptions) to keep tokens low.

``QuestionHooks`` also carry a progress callback (called before every tool call: action
feedback) and a cancel check (true: no further tool or model call; ``Cancelled`` is raised).
Time spent driving does not count against the question's deadline: it is planning time that
is bounded there, navigation has its own timeout.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol
from zoneinfo import ZoneInfo

from .answer import parse_time

log = logging.getLogger(__name__)

DESCRIPTION_CHARS = 240


class MemoryClient(Protocol):
    """Calls a retrieval function of the memory store by name (in-process or over ROS)."""

    def call(self, tool: str, arguments: dict) -> Any: ...


class StoreMemoryClient:
    """In-process: the store object itself (library use, tests, benchmarks)."""

    def __init__(self, store):
        self.store = store

    def call(self, tool: str, arguments: dict) -> Any:
        return self.store.call_tool(tool, arguments)


class ToolError(Exception):
    """Returned to the model as the tool's result (it can correct its call)."""


class OutOfTime(RuntimeError):
    """The question's time budget (``ToolBox.deadline``) ran out before a planner answered."""


class Cancelled(RuntimeError):
    """The question was cancelled (``QuestionHooks.cancelled``): no further tool or model call."""


NavigateFn = Callable[[str, str], dict]  # (waypoint, person) -> {"success", "message", ...}
ProgressFn = Callable[[str, str, int], None]  # (stage, message, tool calls so far)
NAVIGATE = "navigate_to_waypoint"


@dataclass(frozen=True)
class QuestionHooks:
    """What one question may do beyond reading the memory, and how it reports."""

    navigate: Optional[NavigateFn] = None          # the navigate tool; None: not offered
    no_navigate: str = ""                          # why not (told to the model and noted in the answer)
    progress: Optional[ProgressFn] = None          # before every tool call: (f"tool:{name}", ...)
    cancelled: Optional[Callable[[], bool]] = None  # true: stop (raise Cancelled) before the next call


def _string(desc: str) -> dict:
    return {"type": "string", "description": desc}


TIME_HELP = "ISO 8601 time (e.g. 2026-03-10T14:30:00) or HH:MM today"
HISTORY_ROWS = 30          # rows of person / waypoint history per call
ORDERS = ("newest", "oldest")
ORDER_SPEC = {"type": "string", "enum": list(ORDERS),
              "description": "'newest' (default): the most recent rows in the window, newest first; "
                             "'oldest': the earliest rows in the window, oldest first (e.g. 'when did X "
                             "arrive', 'first seen')"}

SPECS: dict[str, dict] = {
    "semantic_observations": {
        "description": "Observations most relevant to a text query, ranked by similarity and recency "
                       "(newer first among equals). Optionally only those showing a person, or only before a time.",
        "parameters": {"type": "object", "properties": {
            "query": _string("what to look for, e.g. 'red mug on a table'"),
            "person": _string("person id or name, optional"),
            "before": _string(f"only observations before this time, optional; {TIME_HELP}"),
            "n": {"type": "integer", "description": "how many (default 10, max 30)"}},
            "required": ["query"]}},
    "waypoint_observations": {
        "description": f"What was observed at a waypoint (place) in a time window: at most {HISTORY_ROWS} "
                       "observations, by default the most recent ones, newest first.",
        "parameters": {"type": "object", "properties": {
            "waypoint": _string("waypoint id, e.g. 'kitchen'"),
            "start": _string(f"window start, optional; {TIME_HELP}"),
            "end": _string(f"window end, optional; {TIME_HELP}"),
            "order": ORDER_SPEC}, "required": ["waypoint"]}},
    "person_observations": {
        "description": f"Sightings of one person in a time window: at most {HISTORY_ROWS} sightings, by default "
                       "the most recent ones, newest first ('when did you last see X').",
        "parameters": {"type": "object", "properties": {
            "person": _string("person id or name"),
            "start": _string(f"window start, optional; {TIME_HELP}"),
            "end": _string(f"window end, optional; {TIME_HELP}"),
            "order": ORDER_SPEC}, "required": ["person"]}},
    "persons_per_day": {
        "description": "Everyone seen on a day, with first and last sighting.",
        "parameters": {"type": "object", "properties": {"date": _string("YYYY-MM-DD")}, "required": ["date"]}},
    "daily_summary": {
        "description": "Summary of one person's day: where and when they were seen.",
        "parameters": {"type": "object", "properties": {
            "date": _string("YYYY-MM-DD"), "person": _string("person id or name")}, "required": ["date", "person"]}},
    "retrieve_from_text": {
        "description": "ReMEmbR: the 5 observations whose descriptions best match a text (no recency).",
        "parameters": {"type": "object", "properties": {"query": _string("text")}, "required": ["query"]}},
    "retrieve_from_position": {
        "description": "ReMEmbR: observations made nearest to a map position.",
        "parameters": {"type": "object", "properties": {
            "x": {"type": "number"}, "y": {"type": "number"},
            "radius": {"type": "number", "description": "metres, optional"}}, "required": ["x", "y"]}},
    "retrieve_from_time": {
        "description": "ReMEmbR: the 4 observations closest to a time.",
        "parameters": {"type": "object", "properties": {"time": _string(TIME_HELP)}, "required": ["time"]}},
    "image_retrieval": {
        "description": "LVMem: the images that best match a query; they are shown to you before you answer.",
        "parameters": {"type": "object", "properties": {
            "query": _string("what the image should show"),
            "m": {"type": "integer", "description": "how many images (default 3, max 4)"}}, "required": ["query"]}},
    "current_state": {
        "description": "The current time, the robot's last known position, the known waypoints and people.",
        "parameters": {"type": "object", "properties": {}}},
}
REMEMBR_TOOLS = ("retrieve_from_text", "retrieve_from_position", "retrieve_from_time")   # ReMEmbR's three
NAVIGATE_SPEC = {
    "description": "Drive the robot to a waypoint; optionally check on arrival whether a person is there.",
    "parameters": {"type": "object", "properties": {
        "waypoint": _string("waypoint id"), "person": _string("person to look for on arrival, optional")},
        "required": ["waypoint"]}}


@dataclass
class ToolCallRecord:
    name: str
    arguments: dict
    result: Any = None
    error: str = ""
    seconds: float = 0.0


@dataclass
class ToolBox:
    """Runs tool calls for one question asked at ``now``; records what was called."""

    memory: MemoryClient
    now: float
    tz: ZoneInfo
    hooks: QuestionHooks = field(default_factory=QuestionHooks)
    calls: list[ToolCallRecord] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    deadline: Optional[float] = None       # time.monotonic() by which the question must be answered
    tokens_in: int = 0                     # model tokens spent on the question (planners add theirs)
    tokens_out: int = 0

    @property
    def navigate(self) -> Optional[NavigateFn]:
        return self.hooks.navigate

    def check_cancelled(self) -> None:
        """Raise ``Cancelled`` if the question was cancelled (planners call it before every call)."""
        if self.hooks.cancelled is not None and self.hooks.cancelled():
            raise Cancelled(f"cancelled after {len(self.calls)} tool calls")

    def report(self, stage: str, message: str = "") -> None:
        """Tell the progress hook (action feedback); a failing hook never stops the question."""
        if self.hooks.progress is None:
            return
        try:
            self.hooks.progress(stage, message, len(self.calls))
        except Exception as exc:  # noqa: BLE001 - feedback is best effort
            log.debug("progress hook failed: %s", exc)

    def remaining(self) -> float:
        """Seconds left until the deadline (inf without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def specs(self) -> list[dict]:
        """OpenAI ``tools`` list."""
        specs = dict(SPECS)
        if self.navigate is not None:
            specs[NAVIGATE] = NAVIGATE_SPEC
        return [{"type": "function", "function": {"name": name, **spec}} for name, spec in specs.items()]

    @property
    def names(self) -> list[str]:
        return [s["function"]["name"] for s in self.specs()]

    def _time(self, args: dict, key: str) -> Optional[float]:
        if args.get(key) in (None, ""):
            return None
        t = parse_time(args[key], self.now, self.tz)
        if t is None:
            raise ToolError(f"{key}: {args[key]!r} is not a time ({TIME_HELP})")
        return t

    @staticmethod
    def _order(args: dict) -> str:
        order = args.get("order") or "newest"
        if order not in ORDERS:
            raise ToolError(f"order: {order!r} is not one of {', '.join(ORDERS)}")
        return order

    def _window(self, args: dict) -> tuple[float, float]:
        start = self._time(args, "start") or 0.0
        end = min(self._time(args, "end") or self.now, self.now)  # never beyond the question time
        return start, end

    def _compact(self, records: list[dict]) -> list[dict]:
        out = []
        for r in records:
            item = {k: v for k, v in r.items() if k not in ("t", "episode", "yaw")}
            if len(item.get("description", "")) > DESCRIPTION_CHARS:
                item["description"] = item["description"][:DESCRIPTION_CHARS] + "..."
            if not item.get("persons"):
                item.pop("persons", None)
            if not item.get("waypoint"):
                item.pop("waypoint", None)
            item.pop("image_path", None)
            out.append(item)
            if "id" in r and r["id"] not in self.evidence:
                self.evidence.append(r["id"])
        return out

    def run(self, name: str, arguments: Any) -> Any:
        """Execute one call; errors come back as {"error": ...} for the model to read.
        Raises ``Cancelled`` (before calling) when the question was cancelled."""
        self.check_cancelled()
        record = ToolCallRecord(name, arguments if isinstance(arguments, dict) else {})
        self.report(f"tool:{str(name)[:64]}", result_text(record.arguments, 200))
        start = time.perf_counter()
        try:
            if not isinstance(arguments, dict):
                raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
            record.result = self._dispatch(name, arguments)
        except ToolError as exc:
            record.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - store errors (unknown person...) go to the model
            record.error = f"{type(exc).__name__}: {exc}"
        record.seconds = time.perf_counter() - start
        self.calls.append(record)
        return {"error": record.error} if record.error else record.result

    def _dispatch(self, name: str, a: dict) -> Any:
        m = self.memory
        if name == "semantic_observations":
            before = min(self._time(a, "before") or self.now, self.now)
            n = max(1, min(int(a.get("n", 10) or 10), 30))
            return self._compact(m.call("semantic_observations", {
                "query": str(a.get("query", "")), "person": a.get("person") or None, "before": before,
                "n": n, "now": self.now}))
        if name == "waypoint_observations":
            start, end = self._window(a)
            return self._compact(m.call("waypoint_observations", {
                "waypoint_id": str(a.get("waypoint", "")), "t_start": start, "t_end": end, "limit": HISTORY_ROWS,
                "order": self._order(a)}))
        if name == "person_observations":
            start, end = self._window(a)
            return self._compact(m.call("person_observations", {
                "person": str(a.get("person", "")), "t_start": start, "t_end": end, "limit": HISTORY_ROWS,
                "order": self._order(a)}))
        if name == "persons_per_day":
            return list(m.call("persons_per_day", {"date": str(a.get("date", "")), "before": self.now}))
        if name == "daily_summary":
            return m.call("daily_summary", {"date": str(a.get("date", "")), "person": str(a.get("person", "")),
                                            "before": self.now})
        if name == "retrieve_from_text":
            return self._compact(m.call("text_observations", {"query": str(a.get("query", "")), "k": 5,
                                                              "before": self.now}))
        if name == "retrieve_from_position":
            try:
                x, y = float(a["x"]), float(a["y"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ToolError("x and y must be numbers") from exc
            radius = a.get("radius")
            return self._compact(m.call("observations_near", {
                "x": x, "y": y, "radius": float(radius) if radius else None, "k": 4, "before": self.now}))
        if name == "retrieve_from_time":
            t = self._time(a, "time")
            if t is None:
                raise ToolError("time is required")
            records = [r for r in m.call("observations_at", {"t": min(t, self.now), "k": 8}) if r["t"] <= self.now]
            return self._compact(records[:4])
        if name == "image_retrieval":
            m_images = max(1, min(int(a.get("m", 3) or 3), 4))
            records = m.call("image_retrieval", {"query": str(a.get("query", "")), "m": m_images, "before": self.now})
            self.images.extend(r["image_path"] for r in records if r.get("image_path"))
            return self._compact(records)
        if name == "current_state":
            latest = m.call("latest_observation", {"before": self.now})
            return {"now": parse_iso(self.now, self.tz),
                    "robot_position": latest["position"] if latest else None,
                    "robot_waypoint": (latest or {}).get("waypoint", ""),
                    "waypoints": [w["waypoint"] for w in m.call("waypoints", {"before": self.now})],
                    "people": m.call("people", {"before": self.now})}
        if name == NAVIGATE:
            if self.navigate is None:
                raise ToolError(self.hooks.no_navigate or f"unknown tool {name!r}; tools: {', '.join(self.names)}")
            started = time.monotonic()
            try:
                return self.navigate(str(a.get("waypoint", "")), str(a.get("person", "") or ""))
            finally:   # driving is not planning: the question's budget excludes it
                if self.deadline is not None:
                    self.deadline += time.monotonic() - started
        raise ToolError(f"unknown tool {name!r}; tools: {', '.join(self.names)}")


def parse_iso(t: float, tz: ZoneInfo) -> str:
    return dt.datetime.fromtimestamp(t, tz=tz).isoformat(timespec="seconds")


def result_text(result: Any, max_chars: int = 6000) -> str:
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= max_chars else text[:max_chars] + '..."(truncated)"'
