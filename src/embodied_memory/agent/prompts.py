"""Prompts of the query agent (HUMEMBR-style tool use, ReMEmbR's answer keys plus count / days).

``SYSTEM`` names the current local time and zone, the last seven local dates (so "on Monday",
"yesterday" and "this week" need no date arithmetic), which tools answer which kind of
question, the answer keys, and how to decline: ``{"type": "none", "text": ...}`` (the llm
planner turns it into a no-answer that carries no value).
"""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from ..calendar_windows import LUNCH_MINUTES, WEEKDAYS, local_date

LUNCH_TEXT = "-".join(f"{m // 60:02d}:{m % 60:02d}" for m in LUNCH_MINUTES)   # "11:00-14:30"

DECLINE_TYPE = "none"   # the answer type a model uses to say the memory has no answer

SYSTEM = """You are the long-term memory of a mobile robot: answer questions about what it saw (objects, \
places, people, when). Now: {now} ({tz}); last 7 days: {week}. All times are local to {tz}: pass \
and answer local ISO times (2026-03-10T14:30:00) or date "YYYY-MM-DD" for a whole day. Positions: \
[x, y, z] m, map frame.

Look things up first; at most {limit} tool calls. Which tool (with the day's date when a day is asked):
- last seen, where now, left: person_observations, newest row; arrived, first seen: order "oldest"
- in room R, how long in R, with whom, X and Y together: person_observations summary=true (places, \
minutes, seen_with)
- who or how many in R: waypoint_observations summary=true (most_in_one_view: people at once, \
unidentified faces included: a count is at least that)
- who came first, how many people, who was new: persons_per_day (first_seen, first_time)
- days X was not seen this week: persons_per_day with the 7 dates; days others were seen but not X
- usual workplace (place on most days, not kitchen/corridor) or lunch time (usual start of \
kitchen visits {lunch}): person_observations summary=true from 7 days ago
Then reply with ONLY a JSON object:
{{"type": "text|binary|position|time|duration|persons|waypoint|count|days", "text": "one sentence",
"binary": "yes|no", "position": [x, y, z], "orientation": yaw, "time": "local ISO time", "duration": minutes,
"persons": ["id"], "count": n, "days": ["YYYY-MM-DD"], "waypoint": "id", "evidence": ["observation ids"],
"confidence": 0-1}}
Leave out keys that do not apply; who came first: persons holds only that one. If the memory has \
no answer (unknown name, not seen that day, never seen doing it), do not guess: reply \
{{"type": "none", "text": "I have not seen Zoe on Monday."}}; a yes/no question is still answered \
"no". A person listed with a "doubt" may be two people: say so in the text and keep confidence \
low. Call tools natively or write {{"name": "tool_name", "arguments": {{...}}}}.{rules}"""
SYSTEM = SYSTEM.replace("{lunch}", LUNCH_TEXT)   # a constant, filled once

RULES_HEADER = "\n\nLessons from earlier episodes (apply when relevant):\n"

FINAL_NOW = "You have used all tool calls. Answer now with the JSON object only."

FINAL_IMAGES = "Look at the images you retrieved and give your final answer as the JSON object only."

FULL_CONTEXT = """You are the long-term memory of a mobile robot. Below is everything the robot \
recorded up to {now} ({tz}), one observation per line: time | position | waypoint | persons | \
description. Answer the question with ONLY a JSON object with the keys type, text, binary, \
position, time, duration, persons, waypoint, count, days (YYYY-MM-DD), evidence (observation ids).

{observations}"""


def recent_days(now: float, tz: ZoneInfo, n: int = 7) -> str:
    """The last ``n`` local dates, newest first: "Mon 2026-03-30 (today), Sun 2026-03-29, ..."."""
    today = local_date(now, tz)
    days = [today - dt.timedelta(days=i) for i in range(n)]
    return ", ".join(f"{WEEKDAYS[d.weekday()][:3].capitalize()} {d.isoformat()}" + (" (today)" if i == 0 else "") for i, d in enumerate(days))
