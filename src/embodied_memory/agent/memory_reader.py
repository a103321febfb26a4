"""Reading the memory for the rules planner: every call goes through the question's ToolBox
(counted, reported, cancellable, evidence kept), histories are read in pages."""
from __future__ import annotations

import datetime as dt
from typing import Callable, Optional

from ..calendar_windows import day_window, local_date
from .history_pages import read_pages
from .tool_views import TOOLS
from .tools import ToolBox, ToolCallRecord

QUERY_CHARS = TOOLS["semantic_observations"].arguments["query"].limit.max_length   # the longest text query
HISTORY_PAGES = 50   # at most this many pages (50,000 rows) per window
MAX_DAYS = 31        # day-by-day questions look at most this many days back


class MemoryReader:
    def __init__(self, tools: ToolBox):
        self.tools = tools

    def call(self, tool: str, args: dict):
        """A direct memory call recorded like a tool call (and, like one, reported and cancellable)."""
        tools = self.tools
        tools.check_cancelled()
        tools.report(f"tool:{tool}")
        result = tools.memory.call(tool, args)
        tools.calls.append(ToolCallRecord(tool, args, result=None))
        return result

    def history(self, tool: str, args: dict, order: str = "oldest",
                keep: Callable[[dict], bool] = lambda r: True, enough: Optional[int] = None) -> list[dict]:
        """The rows of a history tool (person / waypoint observations) in [t_start, t_end] that
        ``keep`` accepts, oldest first (``history_pages``), at most HISTORY_PAGES calls."""
        rest = {k: v for k, v in args.items() if k not in ("t_start", "t_end")}
        return read_pages(self.call, tool, rest, args["t_start"], args["t_end"], HISTORY_PAGES, order, keep, enough)[0]

    def person_sightings(self, person: str, start: float, end: float, place: str = "",
                         last_only: bool = False, first_only: bool = False) -> list[dict]:
        """The person's sightings in [start, end] (at ``place``), oldest first; only the most
        recent one (``last_only``) or the earliest one (``first_only``) when that is all it takes."""
        rows = self.history("person_observations", {"person": person, "t_start": start, "t_end": end},
                            order="newest" if last_only else "oldest",
                            keep=lambda r: not place or r.get("waypoint") == place,
                            enough=1 if last_only or first_only else None)
        return rows[-1:] if last_only else rows[:1] if first_only else rows

    def place_history(self, place: str, start: float, end: float) -> list[dict]:
        """What was observed at ``place`` in [start, end], oldest first."""
        return self.history("waypoint_observations", {"waypoint_id": place, "t_start": start, "t_end": end})

    def looked_at(self, place: str, start: float, end: float) -> Optional[dict]:
        """The robot's latest observation at ``place`` in [start, end] (None: it did not look)."""
        rows = self.call("waypoint_observations", {"waypoint_id": place, "t_start": start, "t_end": end, "limit": 1,
                                                   "order": "newest"})
        return rows[0] if rows else None

    def own_views(self, place: str, start: float, end: float, limit: int) -> list[dict]:
        """The robot's own latest ``limit`` observations at ``place`` in [start, end], newest first
        (not the views from elsewhere of someone standing there)."""
        rows = self.call("waypoint_observations", {"waypoint_id": place, "t_start": start, "t_end": end,
                                                   "limit": limit, "order": "newest"})
        return [r for r in rows if "robot_waypoint" not in r]

    def recorded(self, start: float, end: float) -> bool:
        """Whether the robot recorded anything in [start, end] (it was on)."""
        return bool(self.call("observations_between", {"t_start": start, "t_end": end, "limit": 1}))

    def persons_between(self, start: float, end: float) -> list[dict]:
        """Everyone seen in [start, end], by first sighting: person, first_t / last_t (UNIX),
        first_id / last_id (observation ids), sightings."""
        return self.call("persons_between", {"t_start": start, "t_end": end})

    def days(self, start: float, end: float) -> list[dt.date]:
        """The local calendar days from ``start`` to ``end`` (at most MAX_DAYS, the latest kept)."""
        first, last = local_date(start, self.tools.tz), local_date(end, self.tools.tz)
        first = max(first, last - dt.timedelta(days=MAX_DAYS - 1))
        return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]

    def active_days(self, start: float, end: float) -> dict[dt.date, str]:
        """The days in [start, end] on which the robot recorded anything (it cannot have seen
        anyone on a day it was off), each with the id of its first observation."""
        out = {}
        for day in self.days(start, end):
            day_start, day_end = day_window(day, self.tools.tz)
            first = self.call("observations_between", {"t_start": max(start, day_start), "t_end": min(end, day_end),
                                                       "limit": 1})
            if first:
                out[day] = first[0]["id"]
        return out
