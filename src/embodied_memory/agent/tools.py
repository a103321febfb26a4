"""The agent's tools: JSON-schema functions over the memory (and the navigation bridge).

HUMEMBR's five (semantic observations, waypoint observations, person observations, persons
per day, daily summary), ReMEmbR's three (text, position, time), LVMem's image retrieval,
the current state, and navigate-to-waypoint when the question may move the robot
(``QuestionHooks.navigate``: the AskAndAct action, never the Ask service).  Every tool sees
the memory as of the question time only (``now``): nothing later leaks into an answer.
Results are compact (ids, times, positions, short descriptions) to keep tokens low.

Times are local to the robot's zone (``tz``) both ways: arguments without an offset are read
in it (``parse_time``; ``date`` is a whole local day, 23 or 25 h on a DST change, and a bare
date as ``end`` is the end of that day), and result times are rendered in it from the UNIX
times, whatever zone the store renders in.  History tools return at most ``HISTORY_ROWS`` rows;
with ``summary`` they page through the whole window instead (``SUMMARY_PAGES`` store calls
at most) and return totals: a person's days, places (sightings, days, visits = runs at one
place with gaps <= ``VISIT_GAP_S``, minutes) and companions; a place's persons.

``QuestionHooks`` also carry a progress callback (called before every tool call: action
feedback) and a cancel check (true: no further tool or model call; ``Cancelled`` is raised).
Time spent driving does not count against the question's deadline: it is planning time that
is bounded there, navigation has its own timeout.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol
from zoneinfo import ZoneInfo

from ..calendar_windows import day_window, local_date
from .answer import parse_time
from .history_pages import read_pages
from .tool_views import (HISTORY_ROWS, MAX_DATES, NEEDS, ORDERS, REMEMBR_TOOLS, SPECS, TIME_HELP,  # noqa: F401
                         TOOLS, VIEWS, StoreView, is_time)
from .visits import VISIT_GAP_S

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


class RecordingClient:
    """A memory client recording each tool call as ``tool({arguments})`` (failure lists, the
    inspector's trace)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def call(self, tool: str, arguments: dict) -> Any:
        self.calls.append(f"{tool}({json.dumps(arguments, separators=(',', ':'))[:80]})")
        return self.inner.call(tool, arguments)


class MemoryCapabilities:
    """The views a memory cannot serve (``NEEDS``), from its ``capabilities`` tool: asked when
    first needed and again after ``ttl_s`` (a memory restarted with CLIP); an unknown answer (an
    older memory, a failed call) hides nothing and is asked again next time."""

    def __init__(self, memory: MemoryClient, ttl_s: float = 60.0):
        self.memory, self.ttl_s = memory, ttl_s
        self._hidden: Optional[frozenset[str]] = None
        self._at = 0.0

    def hidden(self) -> frozenset[str]:
        if self._hidden is not None and time.monotonic() - self._at < self.ttl_s:
            return self._hidden
        try:
            capabilities = self.memory.call("capabilities", {})          # not part of a question's trace
        except Exception as exc:  # noqa: BLE001 - the tools stay offered; a call explains itself
            log.debug("memory capabilities unknown (%s): every tool offered", exc)
            return frozenset()
        if not isinstance(capabilities, dict):
            return frozenset()
        self._hidden = frozenset(view for view, need in NEEDS.items() if not capabilities.get(need))
        self._at = time.monotonic()
        return self._hidden


class ToolError(Exception):
    """Returned to the model as the tool's result (it can correct its call)."""


class MemoryUnavailable(RuntimeError):
    """The memory could not answer a call at all (its service or server away): the question's
    answer is this error, said in one line."""


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


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _string(desc: str) -> dict:
    return {"type": "string", "description": desc}


SUMMARY_PAGES = 10         # store calls per summary at most (then it says "truncated")
VISITS_PER_DAY = 6         # a summary's visits per place and day (the first ones; "+N" more)
RESULT_CHARS = 6000        # a tool result as the model reads it (longer is cut)
SUMMARY_CHARS = RESULT_CHARS - 500
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
    capabilities: Optional[MemoryCapabilities] = None   # what the memory can serve (cached across questions)
    robot: str = ""                        # on a fleet's memory: the robot asked ("where are you": its records)
    _hidden: Optional[frozenset[str]] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.memory = RecordingClient(self.memory)       # every memory call of this question, in order

    @property
    def trace(self) -> list[str]:
        """The memory calls made for this question, as ``tool({arguments})``."""
        return list(self.memory.calls)

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

    @property
    def hidden(self) -> frozenset[str]:
        """Views this memory cannot serve (``NEEDS``: e.g. regions by words without CLIP), from
        ``capabilities`` (the query agent's cache) or else asked of the memory once."""
        if self._hidden is None:
            self._hidden = (self.capabilities or MemoryCapabilities(self.memory.inner)).hidden()
        return self._hidden

    def specs(self) -> list[dict]:
        """OpenAI ``tools`` list."""
        specs = {name: spec for name, spec in SPECS.items() if name not in self.hidden}
        if self.navigate is not None:
            specs[NAVIGATE] = NAVIGATE_SPEC
        return [{"type": "function", "function": {"name": name, **spec}} for name, spec in specs.items()]

    @property
    def names(self) -> list[str]:
        return [s["function"]["name"] for s in self.specs()]

    def _time(self, args: dict, key: str) -> Optional[float]:
        """A time argument in the robot's zone; a bare date as ``end`` is the end of that day."""
        value = args.get(key)
        if value in (None, ""):
            return None
        if key == "end" and isinstance(value, str) and _DATE.fullmatch(value.strip()):
            return self._day(value.strip())[1]
        t = parse_time(value, self.now, self.tz)
        if t is None:
            raise ToolError(f"{key}: {value!r} is not a time ({TIME_HELP})")
        return t

    def _day(self, date: Any) -> tuple[float, float]:
        """[midnight, the instant before the next midnight] of a local day (23 or 25 h on a DST change)."""
        m = _DATE.match(str(date).strip())   # "2026-03-29T00:00:00" as a date: that day
        try:
            start, end = day_window(dt.date.fromisoformat(m.group(0) if m else str(date)), self.tz)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ToolError(f"date: {date!r} is not a YYYY-MM-DD date") from exc
        return start, math.nextafter(end, -math.inf)

    @staticmethod
    def _order(args: dict) -> str:
        order = args.get("order") or "newest"
        if order not in ORDERS:
            raise ToolError(f"order: {order!r} is not one of {', '.join(ORDERS)}")
        return order

    def _window(self, args: dict) -> tuple[float, float]:
        """The window of a history call: ``date`` (a whole local day) or ``start`` / ``end``."""
        if args.get("date") not in (None, ""):
            start, end = self._day(args["date"])
        else:
            start, end = self._time(args, "start") or 0.0, self._time(args, "end") or self.now
        return start, min(end, self.now)  # never beyond the question time

    def _iso(self, t: float) -> str:
        return parse_iso(t, self.tz)

    def _local(self, iso: Any) -> Any:
        """A store time (ISO with offset, in the store's zone) in the robot's zone."""
        try:
            return dt.datetime.fromisoformat(iso).astimezone(self.tz).isoformat(timespec="seconds")
        except (TypeError, ValueError):
            return iso

    def _compact(self, records: list[dict]) -> list[dict]:
        out = []
        for r in records:
            item = {k: v for k, v in r.items() if k not in ("t", "episode", "yaw")}
            if isinstance(r.get("t"), (int, float)):
                item["time"] = self._iso(r["t"])   # the robot's zone, whatever the store's
            if len(item.get("description", "")) > DESCRIPTION_CHARS:
                item["description"] = item["description"][:DESCRIPTION_CHARS] + "..."
            if not item.get("persons"):
                item.pop("persons", None)
            if not item.get("waypoint"):
                item.pop("waypoint", None)
            item.pop("image_path", None)
            out.append(item)
            self._cite(r)
        return out

    def _cite(self, record: dict) -> None:
        if "id" in record and record["id"] not in self.evidence:
            self.evidence.append(record["id"])

    def _history(self, view: StoreView, a: dict) -> Any:
        """person / waypoint observations in a window: rows, or with ``summary`` the whole
        window summarised."""
        start, end = self._window(a)
        tool = view.tool
        arg = view.exposed()[0]                      # the subject: person or waypoint_id
        subject = str(a.get(view.model_name(arg), ""))
        if not subject:
            raise ToolError(f"{view.model_name(arg)} is required")
        if str(a.get("summary", "")).strip().lower() not in ("true", "1", "yes"):   # true, "true", 1
            return self._compact(self.memory.call(tool, {arg: subject, "t_start": start, "t_end": end,
                                                         "limit": HISTORY_ROWS, "order": self._order(a)}))
        rows, truncated = history_rows(self.memory.call, tool, {arg: subject}, start, end)
        for r in rows[:1] + rows[-1:]:
            self._cite(r)
        out = (self._person_summary(subject, rows) if tool == "person_observations"
               else self._place_summary(subject, rows))
        return {**out, "window": [self._iso(start), self._iso(end)], **({"truncated": True} if truncated else {})}

    def _person_summary(self, person: str, rows: list[dict]) -> dict:
        """Days seen; per place sightings, days, visits (a run of sightings there, gaps <= 30 min)
        and their minutes; who was in the same observations (first co-sighting each)."""
        me = self._identity(person, rows)
        places: dict[str, dict] = {}
        run: Optional[list] = None           # [place, day, first row, last row]
        runs: list[list] = []
        for r in rows:
            place, day = r.get("waypoint") or "unknown", local_date(r["t"], self.tz).isoformat()
            if run and run[0] == place and run[1] == day and r["t"] - run[3]["t"] <= VISIT_GAP_S:
                run[3] = r
            else:
                run = [place, day, r, r]
                runs.append(run)
            p = places.setdefault(place, {"waypoint": place, "sightings": 0, "days": set(), "minutes": 0.0,
                                          "visits": {}})
            p["sightings"] += 1
            p["days"].add(day)
        for place, day, first, last in runs:
            p = places[place]
            p["minutes"] += (last["t"] - first["t"]) / 60.0
            p["visits"].setdefault(day, []).append(f"{self._iso(first['t'])[11:16]}-{self._iso(last['t'])[11:16]}")
        for p in places.values():   # the first visits of each day (lunch: the first in a lunch room)
            p["visits"] = {d: " ".join(v[:VISITS_PER_DAY]) + (f" +{len(v) - VISITS_PER_DAY}" if len(v) > VISITS_PER_DAY
                                                              else "") for d, v in p["visits"].items()}
        companions: dict[str, dict] = {}
        for r in rows:
            for other in r.get("persons") or []:
                if other == me:
                    continue
                c = companions.setdefault(other, {"person": other, "sightings": 0, "first_seen": self._iso(r["t"]),
                                                  "waypoint": r.get("waypoint") or "unknown"})
                c["sightings"] += 1
                if c["sightings"] == 1:
                    self._cite(r)
        out = {"person": me or person, "sightings": len(rows),
               **({"first_seen": self._iso(rows[0]["t"]), "last_seen": self._iso(rows[-1]["t"])} if rows else {}),
               "days": sorted({local_date(r["t"], self.tz).isoformat() for r in rows}),
               "places": [{**p, "days": len(p["days"]), "minutes": round(p["minutes"], 1)}
                          for p in sorted(places.values(), key=lambda p: -p["sightings"])],
               "seen_with": list(companions.values())}
        for p in reversed(out["places"]):   # too long for one result: the least seen places lose their visits
            if len(result_text(out, SUMMARY_CHARS + 1)) <= SUMMARY_CHARS:
                break
            p.pop("visits")
        return out

    def _identity(self, person: str, rows: list[dict]) -> str:
        """The identity id of the person whose sightings ``rows`` are ('' if it cannot tell)."""
        if any(person in (r.get("persons") or []) for r in rows) or not rows:
            return person
        try:
            for p in self.memory.call("people", {"before": self.now}):
                if str(p.get("name", "")).lower() == person.strip().lower():
                    return p["person"]
        except Exception as exc:  # noqa: BLE001 - then the ids every sighting shows
            log.debug("people: %s", exc)
        common = set.intersection(*(set(r.get("persons") or []) for r in rows))
        return next(iter(common)) if len(common) == 1 else ""

    def _place_summary(self, waypoint: str, rows: list[dict]) -> dict:
        """Everyone seen at a place in the window, by first sighting (the robot was there in [first, last])."""
        persons: dict[str, dict] = {}
        for r in rows:
            for p in r.get("persons") or []:
                e = persons.setdefault(p, {"person": p, "sightings": 0, "first_seen": self._iso(r["t"])})
                e["sightings"] += 1
                e["last_seen"] = self._iso(r["t"])
        at_once = max((len(r.get("persons") or []) + r.get("unidentified", 0) for r in rows), default=0)
        return {"waypoint": waypoint, "observations": len(rows),
                **({"first": self._iso(rows[0]["t"]), "last": self._iso(rows[-1]["t"])} if rows else {}),
                "persons": list(persons.values()),
                **({"most_in_one_view": at_once} if at_once > len(persons) else {})}   # faces not identified too

    def _persons_on(self, date: str) -> list[dict]:
        """Everyone seen on a day of the robot's zone up to now (``persons_between`` of its window):
        person, name, sightings, first_seen / last_seen in the robot's zone, ``first_time`` for
        those never seen before that day."""
        midnight, day_end = self._day(date)
        rows = list(self.memory.call("persons_between", {"t_start": midnight, "t_end": min(day_end, self.now)}))
        earlier: set = set()
        if rows:
            earlier = {p["person"] for p in self.memory.call("people", {"before": math.nextafter(midnight, -1.0)})}
        out = []
        for r in rows:
            item = {"person": r["person"], **({"name": r["name"]} if r.get("name") else {}),
                    "sightings": r["sightings"], "first_seen": self._iso(r["first_t"]),
                    "last_seen": self._iso(r["last_t"])}
            if r["person"] not in earlier:
                item["first_time"] = True
            out.append(item)
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

    def _store_arguments(self, view: StoreView, a: dict) -> dict:
        """The memory tool's arguments from the model's: times read in the robot's zone and
        never later than the question, counts within the view's caps, the fixed ones added."""
        out: dict[str, Any] = dict(view.fixed)
        exposed = view.exposed()
        for name, arg in TOOLS[view.tool].arguments.items():
            if name == "now":
                out[name] = self.now
                continue
            given = view.model_name(name)
            value = a.get(given) if name in exposed else None
            if name == "before":
                out[name] = min(self._time(a, given) or self.now, self.now) if name in exposed else self.now
            elif name not in exposed or name in out:
                continue
            elif value in (None, "") or (not arg.required and arg.json_type in ("integer", "number")
                                          and not isinstance(value, str) and not value):   # 0: not given
                if name in view.defaults:
                    out[name] = view.defaults[name]
                elif arg.required:
                    raise ToolError(f"{given} is required")
            elif is_time(arg):
                out[name] = min(self._time(a, given), self.now)
            elif arg.json_type in ("integer", "number"):
                try:
                    number = float(value)
                except (TypeError, ValueError) as exc:
                    raise ToolError(f"{given} must be a number") from exc
                if arg.json_type == "integer":
                    number = max(1, min(int(number), int(view.caps.get(name, arg.limit.maximum))))
                out[name] = number
            else:
                out[name] = value if arg.json_type != "string" else str(value)
        return out

    def _dispatch(self, name: str, a: dict) -> Any:
        m = self.memory
        view = VIEWS.get(name)
        if name in NEEDS and name in self.hidden:
            raise ToolError(f"unknown tool {name!r}; tools: {', '.join(self.names)}")
        if view is not None and view.window:
            return self._history(view, a)
        if view is not None:
            records = m.call(view.tool, self._store_arguments(view, a))
            if name == "retrieve_from_time":       # the 4 closest that are not later than the question
                records = [r for r in records if r["t"] <= self.now][:4]
            if name == "image_retrieval":
                self.images.extend(r["image_path"] for r in records if r.get("image_path"))
            return self._compact(records) if view.compact else records
        if name == "persons_per_day":
            dates = a.get("date")
            if isinstance(dates, list):
                if not 1 <= len(dates) <= MAX_DATES:
                    raise ToolError(f"date: give 1 to {MAX_DATES} dates, not {len(dates)}")
                return {str(d): self._persons_on(str(d)) for d in dates}
            return self._persons_on(str(dates or ""))
        if name == "current_state":
            latest = m.call("latest_observation", {"before": self.now, **({"robot": self.robot} if self.robot else {})})
            return {"now": parse_iso(self.now, self.tz),
                    "robot_position": latest["position"] if latest else None,
                    "robot_waypoint": (latest or {}).get("waypoint", ""),
                    "waypoints": [w["waypoint"] for w in m.call("waypoints", {"before": self.now})],
                    "people": [{**p, **({"last_seen": self._local(p["last_seen"])} if "last_seen" in p else {})}
                               for p in m.call("people", {"before": self.now})]}
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


def history_rows(call: Callable[[str, dict], Any], tool: str, args: dict, start: float, end: float,
                 pages: Optional[int] = None) -> tuple[list[dict], bool]:
    """Every row of a history tool in [start, end], oldest first; True if ``pages`` (default
    SUMMARY_PAGES) store calls were not enough."""
    return read_pages(call, tool, args, start, end, SUMMARY_PAGES if pages is None else pages)


def parse_iso(t: float, tz: ZoneInfo) -> str:
    return dt.datetime.fromtimestamp(t, tz=tz).isoformat(timespec="seconds")


def result_text(result: Any, max_chars: int = RESULT_CHARS) -> str:
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= max_chars else text[:max_chars] + '..."(truncated)"'
