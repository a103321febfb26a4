"""The typed answer (a superset of ReMEmbR's answer JSON) and its validation.

Model output is parsed with ``json`` only (never evaluated); a field of the wrong type is
dropped with a note in ``error`` rather than crashing the agent.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional
from zoneinfo import ZoneInfo

ANSWER_TYPES = ("text", "binary", "position", "time", "duration", "persons", "waypoint")
STATUS_OK, STATUS_NO_ANSWER, STATUS_ERROR = "ok", "no_answer", "error"


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
    evidence: list[str] = field(default_factory=list)
    confidence: float = 0.0
    error: str = ""
    planner: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    latency_s: float = 0.0

    def set_time(self, t: float, now: float, tz: ZoneInfo) -> None:
        self.time = float(t)
        self.time_iso = dt.datetime.fromtimestamp(t, tz=tz).isoformat(timespec="seconds")
        self.minutes_ago = round((now - t) / 60.0, 1)

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
        if self.error:
            lines.append(f"error: {self.error}")
        lines.append(f"({self.planner}; {self.tool_calls} tool calls; tokens {self.tokens_in}+{self.tokens_out}; "
                     f"{self.latency_s:.2f} s; evidence {', '.join(self.evidence[:5]) or '-'})")
        return "\n".join(lines)


def no_answer(reason: str, planner: str = "") -> Answer:
    return Answer(status=STATUS_NO_ANSWER, text="I could not answer that.", error=reason, planner=planner)


_JSON_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json_objects(text: str) -> list[Any]:
    """Every top-level JSON value (object or list) found in free text, fenced or not."""
    if not text:
        return []
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
                    i = end
                    continue
                except json.JSONDecodeError:
                    pass
            i += 1
    return found


def parse_time(value: Any, now: float, tz: ZoneInfo) -> Optional[float]:
    """ISO 8601 (offset optional: the store's zone), 'HH:MM[:SS]' (today, or yesterday if that
    would be in the future), or UNIX seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) and value > 1e8 else None
    text = str(value).strip()
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", text)
    if m:
        today = dt.datetime.fromtimestamp(now, tz=tz).date()
        t = dt.datetime.combine(today, dt.time(int(m.group(1)) % 24, int(m.group(2)), int(m.group(3) or 0)),
                                tzinfo=tz).timestamp()
        return t - 86400 if t > now + 60 else t
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=tz)
    return parsed.timestamp()


def _floats(value: Any, n: int) -> Optional[list[float]]:
    if isinstance(value, (list, tuple)) and 2 <= len(value) <= n and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return [float(v) for v in value] + [0.0] * (n - len(value))
    return None


def answer_from_model(obj: Any, now: float, tz: ZoneInfo, planner: str) -> Answer:
    """Validate a model's answer object (ReMEmbR keys + ours)."""
    if not isinstance(obj, dict):
        return Answer(text=str(obj), planner=planner, error="answer was not a JSON object")
    problems = []
    ans = Answer(planner=planner)
    kind = str(obj.get("type", "text")).lower()
    ans.type = kind if kind in ANSWER_TYPES else "text"
    ans.text = str(obj.get("text", "") or "")[:2000]
    binary = str(obj.get("binary", "") or "").strip().lower()
    ans.binary = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}.get(binary, "")
    if "position" in obj and obj["position"] not in (None, ""):
        ans.position = _floats(obj["position"], 3)
        if ans.position is None:
            problems.append(f"position {obj['position']!r} is not [x, y, z]")
    if isinstance(obj.get("orientation"), (int, float)) and math.isfinite(obj["orientation"]):
        ans.orientation = float(obj["orientation"])
    elif isinstance(obj.get("orientation"), list) and obj["orientation"] and isinstance(obj["orientation"][0], (int, float)):
        ans.orientation = float(obj["orientation"][0])
    if obj.get("time") not in (None, ""):
        t = parse_time(obj["time"], now, tz)
        if t is None:
            problems.append(f"time {obj['time']!r} is not ISO 8601 or HH:MM")
        else:
            ans.set_time(t, now, tz)
    duration = obj.get("duration", obj.get("duration_minutes"))
    if duration not in (None, ""):
        if isinstance(duration, (int, float)) and not isinstance(duration, bool) and math.isfinite(duration) and duration >= 0:
            ans.duration_minutes = float(duration)
        else:
            problems.append(f"duration {duration!r} is not a number of minutes")
    persons = obj.get("persons", [])
    if isinstance(persons, str):
        persons = [p.strip() for p in persons.split(",") if p.strip()]
    ans.persons = [str(p) for p in persons if isinstance(p, (str, int))] if isinstance(persons, list) else []
    ans.waypoint = str(obj.get("waypoint", "") or "")
    evidence = obj.get("evidence", [])
    ans.evidence = [str(e) for e in evidence] if isinstance(evidence, list) else []
    conf = obj.get("confidence")
    if isinstance(conf, (int, float)) and not isinstance(conf, bool) and 0 <= conf <= 1:
        ans.confidence = float(conf)
    ans.error = "; ".join(problems)
    if not (ans.text or ans.binary or ans.position or ans.time_iso or ans.duration_minutes is not None or ans.persons):
        ans.status = STATUS_NO_ANSWER
    return ans
