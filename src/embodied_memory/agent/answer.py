"""The typed answer (a superset of ReMEmbR's answer JSON) and its validation.

Model output is parsed with ``json`` only (never evaluated); a field of the wrong type or an
impossible value (a time outside what a ROS ``builtin_interfaces/Time`` holds, NaN, a position
a thousand kilometres away, a duration of centuries) is dropped with a note in ``error`` rather
than crashing the agent.  ``Answer.sanitize`` is the last step of every answer: afterwards
every field fits its message field (``nodes.conversions.answer_to_msg`` cannot raise).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional
from zoneinfo import ZoneInfo

from ..calendar_windows import clock_time, local_date

ANSWER_TYPES = ("text", "binary", "position", "time", "duration", "persons", "waypoint", "count", "days")
STATUS_OK, STATUS_NO_ANSWER, STATUS_ERROR = "ok", "no_answer", "error"
STATUSES = (STATUS_OK, STATUS_NO_ANSWER, STATUS_ERROR)

# the bounds of a possible answer
MAX_TIME = 2**31 - 1                 # builtin_interfaces/Time.sec is int32 (2038-01-19)
MAX_COORD_M = 1e6                    # a map position further than 1000 km from its origin is impossible
MAX_DURATION_MINUTES = 100 * 366 * 24 * 60.0   # a century
MAX_COUNT = 2**32 - 1                # tokens and tool calls are uint32
MAX_TEXT_CHARS, MAX_ERROR_CHARS, MAX_ID_CHARS, MAX_IDS = 2000, 4000, 200, 100
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _finite(v: Any, bound: float) -> bool:
    """A real number (not a bool) with |v| <= bound; ints of any size, NaN and inf are handled."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return abs(v) <= bound if isinstance(v, int) else (math.isfinite(v) and abs(v) <= bound)


def valid_time(t: Any) -> bool:
    """A UNIX time an answer can carry (finite, 1970 .. 2038)."""
    return _finite(t, MAX_TIME) and t >= 0


def clean_text(value: Any, max_chars: int) -> str:
    """A string a ROS message can carry: valid UTF-8 (lone surrogates replaced), no NUL, cut."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    text = text[:max_chars].replace("\x00", "")
    return text.encode("utf-8", "replace").decode("utf-8")


@dataclass
class Answer:
    status: str = STATUS_OK
    type: str = "text"
    text: str = ""
    binary: str = ""                       # "yes" | "no" | ""
    position: Optional[list[float]] = None  # [x, y, z] in the map frame
    orientation: Optional[float] = None     # yaw, radians
    time: Optional[float] = None            # UNIX seconds
    time_iso: str = ""
    minutes_ago: Optional[float] = None
    duration_minutes: Optional[float] = None
    persons: list[str] = field(default_factory=list)
    waypoint: str = ""
    count: Optional[int] = None             # "how many people": a number of distinct people
    days: list[str] = field(default_factory=list)   # "on which days": local calendar dates, YYYY-MM-DD
    evidence: list[str] = field(default_factory=list)
    confidence: float = 0.0
    error: str = ""
    planner: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    latency_s: float = 0.0
    trace: list[str] = field(default_factory=list)   # the memory calls made, tool({arguments}), in order

    def set_time(self, t: float, now: float, tz: ZoneInfo) -> bool:
        """Set time, time_iso and minutes_ago; an impossible time is left out (noted in error)."""
        try:
            if not valid_time(t):
                raise ValueError
            iso = dt.datetime.fromtimestamp(t, tz=tz).isoformat(timespec="seconds")
            minutes_ago = round((now - t) / 60.0, 1)
        except (ValueError, OverflowError, OSError, TypeError):
            self.note(f"time {t!r} is outside 1970..2038; left out")
            return False
        self.time, self.time_iso, self.minutes_ago = float(t), iso, minutes_ago
        return True

    def note(self, problem: str) -> None:
        self.error = "; ".join(x for x in (self.error, problem) if x)

    def sanitize(self) -> "Answer":
        """Make every field fit its message field; what cannot be kept is left out, noted in error."""
        problems = []
        self.status = self.status if self.status in STATUSES else STATUS_ERROR
        self.type = self.type if self.type in ANSWER_TYPES else "text"
        self.text = clean_text(self.text, MAX_TEXT_CHARS)
        self.binary = self.binary if self.binary in ("yes", "no") else ""
        self.waypoint = clean_text(self.waypoint, MAX_ID_CHARS)
        self.planner = clean_text(self.planner, MAX_ID_CHARS)
        self.persons = [clean_text(p, MAX_ID_CHARS) for p in (self.persons if isinstance(self.persons, list) else [])
                        if isinstance(p, (str, int)) and not isinstance(p, bool)][:MAX_IDS]
        self.evidence = [clean_text(e, MAX_ID_CHARS) for e in
                         (self.evidence if isinstance(self.evidence, list) else [])][:MAX_IDS]
        self.trace = [clean_text(c, MAX_ID_CHARS) for c in (self.trace if isinstance(self.trace, list) else [])
                      if isinstance(c, str)][:MAX_IDS]
        if self.position is not None:
            pos = list(self.position) if isinstance(self.position, (list, tuple)) else []
            if len(pos) == 3 and all(_finite(v, MAX_COORD_M) for v in pos):
                self.position = [float(v) for v in pos]
            else:
                problems.append(f"position {_short(self.position)} is not a possible [x, y, z]; left out")
                self.position = None
        if self.orientation is not None:
            if _finite(self.orientation, 1e12):
                self.orientation = math.remainder(float(self.orientation), 2 * math.pi)
            else:
                problems.append(f"orientation {_short(self.orientation)} is not a finite angle; left out")
                self.orientation = None
        if self.time is not None and not valid_time(self.time):
            problems.append(f"time {_short(self.time)} is outside 1970..2038; left out")
            self.time = None
        if self.time is None:
            self.time_iso, self.minutes_ago = "", None
        else:
            self.time = float(self.time)
            self.time_iso = clean_text(self.time_iso, 64)
            if not _finite(self.minutes_ago, 1e12):
                self.minutes_ago = None
        if self.duration_minutes is not None:
            if _finite(self.duration_minutes, MAX_DURATION_MINUTES) and self.duration_minutes >= 0:
                self.duration_minutes = float(self.duration_minutes)
            else:
                problems.append(f"duration {_short(self.duration_minutes)} min is impossible; left out")
                self.duration_minutes = None
        if self.count is not None and not (isinstance(self.count, int) and not isinstance(self.count, bool)
                                           and 0 <= self.count <= MAX_COUNT):
            problems.append(f"count {_short(self.count)} is not a possible number; left out")
            self.count = None
        days = self.days if isinstance(self.days, list) else []
        self.days = [d for d in days if isinstance(d, str) and _ISO_DATE.fullmatch(d)][:MAX_IDS]
        if len(self.days) < len(days):
            problems.append("days: entries that are not YYYY-MM-DD dates left out")
        self.confidence = float(min(max(self.confidence, 0.0), 1.0)) if _finite(self.confidence, 1e12) else 0.0
        for name in ("tokens_in", "tokens_out", "tool_calls"):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
                (isinstance(value, int) or math.isfinite(value))
            setattr(self, name, int(min(max(value, 0), MAX_COUNT)) if ok else 0)
        self.latency_s = float(self.latency_s) if _finite(self.latency_s, 1e9) and self.latency_s >= 0 else 0.0
        self.error = clean_text(self.error, MAX_ERROR_CHARS)
        for problem in problems:
            self.note(problem)
        self.error = clean_text(self.error, MAX_ERROR_CHARS)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def summary(self) -> str:
        """One human-readable line per field that is set."""
        lines = [f"[{self.status}] {self.text}" if self.text else f"[{self.status}]"]
        if self.binary:
            lines.append(f"answer: {self.binary}")
        if self.position is not None:
            lines.append("position: [" + ", ".join(f"{v:.2f}" for v in self.position) + "]"
                         + (f" (waypoint {self.waypoint})" if self.waypoint else ""))
        elif self.waypoint:
            lines.append(f"waypoint: {self.waypoint}")
        if self.time_iso:
            lines.append(f"time: {self.time_iso} ({self.minutes_ago:.0f} min ago)")
        if self.duration_minutes is not None:
            lines.append(f"duration: {self.duration_minutes:.1f} min")
        if self.persons:
            lines.append("persons: " + ", ".join(self.persons))
        if self.count is not None:
            lines.append(f"count: {self.count}")
        if self.days:
            lines.append("days: " + ", ".join(self.days))
        if self.error:
            lines.append(f"error: {self.error}")
        lines.append(f"({self.planner}; {self.tool_calls} tool calls; tokens {self.tokens_in}+{self.tokens_out}; "
                     f"{self.latency_s:.2f} s; evidence {', '.join(self.evidence[:5]) or '-'})")
        return "\n".join(lines)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def no_answer(reason: str, planner: str = "") -> Answer:
    return Answer(status=STATUS_NO_ANSWER, text="I could not answer that.", error=reason, planner=planner)


_JSON_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


MAX_JSON_SCAN_CHARS = 32_000   # model text searched for JSON (longer text is cut: bounded work)
MAX_JSON_VALUES = 50


def extract_json_objects(text: str) -> list[Any]:
    """Every top-level JSON value (object or list) found in free text, fenced or not."""
    if not text or not isinstance(text, str):
        return []
    text = text[:MAX_JSON_SCAN_CHARS]
    candidates = [m.group(1) for m in _JSON_FENCE.finditer(text)] or [text]
    decoder = json.JSONDecoder()
    found = []
    for chunk in candidates:
        i = 0
        while i < len(chunk):
            if chunk[i] in "{[":
                try:
                    value, end = decoder.raw_decode(chunk, i)
                    found.append(value)
                    if len(found) >= MAX_JSON_VALUES:
                        return found
                    i = end
                    continue
                except (ValueError, RecursionError):  # JSONDecodeError, 5000-digit ints, deep nesting
                    pass
            i += 1
    return found


def parse_time(value: Any, now: float, tz: ZoneInfo) -> Optional[float]:
    """ISO 8601 (offset optional: the store's zone), 'HH:MM[:SS]' (today, or yesterday if that
    would be in the future), or UNIX seconds.
    Returns None for anything that is not a possible time (see ``valid_time``)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if valid_time(value) and value > 1e8 else None
    if not isinstance(value, str) or len(value) > 100:
        return None
    text = value.strip()
    try:
        m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", text)
        if m:
            today = local_date(now, tz)
            hour, minute, second = int(m.group(1)) % 24, int(m.group(2)), int(m.group(3) or 0)
            if minute > 59 or second > 59:
                return None
            t = clock_time(today, hour, minute, tz, second)
            if t > now + 60:   # a clock time later than now meant yesterday (a calendar day back)
                t = clock_time(today - dt.timedelta(days=1), hour, minute, tz, second)
        else:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=tz)
            t = parsed.timestamp()
    except (ValueError, OverflowError, OSError, TypeError):
        return None
    return t if valid_time(t) else None


def _floats(value: Any, n: int) -> Optional[list[float]]:
    if isinstance(value, (list, tuple)) and 2 <= len(value) <= n and all(_finite(v, MAX_COORD_M) for v in value):
        return [float(v) for v in value] + [0.0] * (n - len(value))
    return None


def answer_from_model(obj: Any, now: float, tz: ZoneInfo, planner: str) -> Answer:
    """Validate a model's answer object (ReMEmbR keys + ours)."""
    if not isinstance(obj, dict):
        return Answer(text=clean_text(str(obj), MAX_TEXT_CHARS), planner=planner,
                      error="answer was not a JSON object").sanitize()
    problems = []
    ans = Answer(planner=planner)
    kind = str(obj.get("type", "text")).lower()
    ans.type = kind if kind in ANSWER_TYPES else "text"
    ans.text = clean_text(obj.get("text", "") or "", MAX_TEXT_CHARS)
    binary = str(obj.get("binary", "") or "").strip().lower()
    ans.binary = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}.get(binary, "")
    if "position" in obj and obj["position"] not in (None, ""):
        ans.position = _floats(obj["position"], 3)
        if ans.position is None:
            problems.append(f"position {_short(obj['position'])} is not a possible [x, y, z]")
    yaw = obj.get("orientation")
    if isinstance(yaw, list) and yaw:
        yaw = yaw[0]
    if _finite(yaw, 1e12):
        ans.orientation = math.remainder(float(yaw), 2 * math.pi)
    elif yaw not in (None, "", []):
        problems.append(f"orientation {_short(obj['orientation'])} is not a finite yaw")
    if obj.get("time") not in (None, ""):
        t = parse_time(obj["time"], now, tz)
        if t is None:
            problems.append(f"time {_short(obj['time'])} is not a possible ISO 8601 time or HH:MM")
        else:
            ans.set_time(t, now, tz)
    duration = obj.get("duration", obj.get("duration_minutes"))
    if duration not in (None, ""):
        if _finite(duration, MAX_DURATION_MINUTES) and duration >= 0:
            ans.duration_minutes = float(duration)
        else:
            problems.append(f"duration {_short(duration)} is not a possible number of minutes")
    persons = obj.get("persons", [])
    if isinstance(persons, str):
        persons = [p.strip() for p in persons.split(",") if p.strip()]
    ans.persons = [str(p) for p in persons[:MAX_IDS] if isinstance(p, (str, int)) and not isinstance(p, bool)
                   ] if isinstance(persons, list) else []
    waypoint = obj.get("waypoint", "") or ""
    ans.waypoint = waypoint if isinstance(waypoint, str) else ""
    count = obj.get("count")
    if isinstance(count, float) and count.is_integer():
        count = int(count)
    if count not in (None, ""):
        if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= MAX_COUNT:
            ans.count = count
        else:
            problems.append(f"count {_short(count)} is not a possible number of people")
    days = obj.get("days", [])
    ans.days = [d.strip()[:10] for d in (days if isinstance(days, list) else []) if isinstance(d, str)]
    evidence = obj.get("evidence", [])
    ans.evidence = [str(e) for e in evidence[:MAX_IDS] if isinstance(e, (str, int)) and not isinstance(e, bool)
                    ] if isinstance(evidence, list) else []
    conf = obj.get("confidence")
    if isinstance(conf, (int, float)) and not isinstance(conf, bool) and 0 <= conf <= 1:
        ans.confidence = float(conf)
    ans.error = "; ".join(problems + ([ans.error] if ans.error else []))
    ans.sanitize()
    if not (ans.text or ans.binary or ans.position or ans.time_iso or ans.duration_minutes is not None or ans.persons
            or ans.count is not None or ans.days):
        ans.status = STATUS_NO_ANSWER
    return ans
