"""Time-phrase parsers side by side: ours (embodied_memory.agent.time_expressions), dateparser
(search_dates, raw) and ctparse (raw), on time phrases embedded in memory questions.

Each question is asked at a fixed local time (Europe/Zurich; three of the asking times sit on
or next to a daylight-saving change), and has the window it should name, built here directly
from calendar_windows (never from our parser).  Verdicts:
  ours         "ok" when its (start, end) is that window exactly, or None for a question with
               no time phrase;
  dateparser   raw search_dates on the whole question (English, RELATIVE_BASE = the asking
               time, past preferred), the best of its matches; ctparse the same with its one
               resolution (ts = the asking time).  Neither gives a window, so:
               "ok"   it pins the anchor: the day of a day; day and hh:mm of a clock time; day
                      and part of a part (ctparse's POD); the first instant of a span;
               "in"   a point inside the expected window that is not its anchor (e.g. 09:00
                      for "this morning");
               "WRONG" anything else, any result for a question with no time phrase.
Prints a table, the totals and per-call costs.  Asserts nothing.

    .venv/bin/python bench/time_parsers.py [--repeats 20]
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import statistics
import time
from dataclasses import dataclass
from typing import Optional
from zoneinfo import ZoneInfo

t0 = time.perf_counter()
from embodied_memory.agent import time_expressions  # noqa: E402
IMPORT_OURS_S = time.perf_counter() - t0
from embodied_memory.calendar_windows import (clock_time, clock_window, day_window, days_window,  # noqa: E402
                                              part_of_day_window, week_window)

ZURICH = ZoneInfo("Europe/Zurich")
D = dt.date


def at(*args) -> float:
    return dt.datetime(*args, tzinfo=ZURICH).timestamp()


# asking times (local Europe/Zurich)
MON_AFTER_SPRING = at(2026, 3, 30, 10, 0)   # Monday; yesterday (Sunday 03-29) had 23 hours
SPRING_DAY = at(2026, 3, 29, 4, 0)          # Sunday of the change, an hour after 02:00 -> 03:00
MON_AFTER_AUTUMN = at(2026, 10, 26, 10, 0)  # Monday; yesterday (Sunday 10-25) had 25 hours
FRI = at(2026, 10, 30, 16, 0)               # Friday after the autumn change
FRI_EARLY = at(2026, 10, 30, 9, 0)          # the same Friday, 09:00
FRI_LATE = at(2026, 10, 30, 17, 0)          # the same Friday, 17:00
SAT_NIGHT = at(2026, 10, 31, 0, 30)         # just after midnight on Saturday


@dataclass
class Expected:
    """The window a question names.  kind: "day" | "clock" | "part" | "span" | "none";
    day / clock / part: the anchor the raw parsers are judged on (a span's anchor is its start)."""
    kind: str
    window: Optional[tuple[float, float]] = None
    day: Optional[dt.date] = None
    clock: Optional[tuple[int, int]] = None
    part: Optional[str] = None


def day(d: dt.date, now: float) -> Expected:
    s, e = day_window(d, ZURICH)
    return Expected("day", (s, min(e, now)), day=d)


def clock(d: dt.date, h: int, m: int) -> Expected:
    return Expected("clock", clock_window(d, h, m, ZURICH), day=d, clock=(h, m))


def part(d: dt.date, name: str, now: float) -> Expected:
    s, e = part_of_day_window(d, name, ZURICH)
    return Expected("part", (s, min(e, now)), day=d, part=name)


def span(start: float, end: float) -> Expected:
    return Expected("span", (start, end))


NONE = Expected("none")
A, S, U, F = MON_AFTER_SPRING, SPRING_DAY, MON_AFTER_AUTUMN, FRI
E, L, N = FRI_EARLY, FRI_LATE, SAT_NIGHT
CASES: list[tuple[str, float, Expected]] = [
    ("what happened today", A, day(D(2026, 3, 30), A)),
    ("who was in the kitchen yesterday", A, day(D(2026, 3, 29), A)),                 # 23 h
    ("who was in the kitchen yesterday", U, day(D(2026, 10, 25), U)),                # 25 h
    ("did you see bob on monday", A, day(D(2026, 3, 30), A)),                        # asked on a Monday
    ("did you see bob on tuesday", A, day(D(2026, 3, 24), A)),
    ("was alice in the office monday morning", F, part(D(2026, 10, 26), "morning", F)),
    ("where was carol at 3pm yesterday", A, clock(D(2026, 3, 29), 15, 0)),           # 13:00 UTC
    ("was anyone by the door around 12:30", F, clock(D(2026, 10, 30), 12, 30)),
    ("who did you see this morning", F, part(D(2026, 10, 30), "morning", F)),
    ("who did you see this afternoon", F, part(D(2026, 10, 30), "afternoon", F)),
    ("who came in the last 2 hours", F, span(F - 7200, F)),
    ("who came in the last 3 hours", S, span(S - 3 * 3600, S)),                      # over the change
    ("what did you see two days ago", A, day(D(2026, 3, 28), A)),
    ("who did you see this week", F, span(day_window(D(2026, 10, 26), ZURICH)[0], F)),
    ("who did you see last week", F, span(*week_window(D(2026, 10, 30), ZURICH, 1))),  # 169 h
    ("was bob here last friday", F, day(D(2026, 10, 23), F)),
    ("was bob here on friday", F, day(D(2026, 10, 30), F)),                          # asked on a Friday
    ("what happened the day before yesterday", A, day(D(2026, 3, 28), A)),
    ("who has come in since 10am", F, span(clock_time(D(2026, 10, 30), 10, 0, ZURICH), F)),
    ("who came by over the weekend", U, span(*days_window(D(2026, 10, 24), D(2026, 10, 25), ZURICH))),  # 49 h
    ("did you see dave earlier today", F, day(D(2026, 10, 30), F)),
    ("who was in the kitchen at noon", F, clock(D(2026, 10, 30), 12, 0)),
    ("who was in the kitchen at midday yesterday", U, clock(D(2026, 10, 25), 12, 0)),
    ("who was in the kitchen at lunchtime", F, part(D(2026, 10, 30), "lunchtime", F)),
    ("where was erin yesterday evening", U, part(D(2026, 10, 25), "evening", U)),
    ("what happened last night", A, part(D(2026, 3, 29), "night", A)),
    ("what happened at 2:30", S, clock(D(2026, 3, 29), 2, 30)),                       # a skipped hour
    ("anything on sunday at 15:00", A, clock(D(2026, 3, 29), 15, 0)),
    ("did you see bob on tue", F, day(D(2026, 10, 27), F)),
    ("who was at the desk 5 minutes ago", F, span(F - 330, F - 270)),
    ("who came in since monday", F, span(day_window(D(2026, 10, 26), ZURICH)[0], F)),
    ("what was on the 3rd floor at 3 pm", F, clock(D(2026, 10, 30), 15, 0)),
    ("where was june on monday", F, day(D(2026, 10, 26), F)),
    ("who was in the lab at 8 in the evening", F, clock(D(2026, 10, 29), 20, 0)),
    ("what happened on 29 march", A, day(D(2026, 3, 29), A)),
    ("how many minutes did you see carol in the lab today", F, day(D(2026, 10, 30), F)),
    # clock ranges: the range itself; without am/pm the readings that make a short span
    ("who was in the lab between 2pm and 4pm", L, span(at(2026, 10, 30, 14), at(2026, 10, 30, 16))),
    ("who was in the lab between 2pm and 4pm", E, span(at(2026, 10, 29, 14), at(2026, 10, 29, 16))),  # later: yesterday
    ("who came by from 9 to 11", L, span(at(2026, 10, 30, 9), at(2026, 10, 30, 11))),
    ("who was at the desk from 10:00 until noon", F, span(at(2026, 10, 30, 10), at(2026, 10, 30, 12))),
    ("who was in the kitchen between 9 and 10 this morning", F, span(at(2026, 10, 30, 9), at(2026, 10, 30, 10))),
    ("who was there yesterday between 14:00 and 15:30", A, span(at(2026, 3, 29, 14), at(2026, 3, 29, 15, 30))),
    # more clock forms; an hour without am/pm is its latest past reading
    ("what happened at 12.30", F, clock(D(2026, 10, 30), 12, 30)),
    ("who was in the kitchen at half past two", F, clock(D(2026, 10, 30), 14, 30)),
    ("who was in the kitchen at quarter to three", F, clock(D(2026, 10, 30), 14, 45)),
    ("who was at the door at 3 o'clock", F, clock(D(2026, 10, 30), 15, 0)),
    ("who was at the door at 3", F, clock(D(2026, 10, 30), 15, 0)),
    ("what happened at 2:30", L, clock(D(2026, 10, 30), 14, 30)),
    ("who was at the door at 8", E, clock(D(2026, 10, 30), 8, 0)),
    ("who was at the door at 10", E, clock(D(2026, 10, 29), 22, 0)),
    # tonight after midnight, the past week, "last" alone
    ("what happened tonight", N, part(D(2026, 10, 30), "night", N)),
    ("who came in past week", F, span(at(2026, 10, 23, 16), F)),
    ("who arrived last today", F, day(D(2026, 10, 30), F)),
    ("what happened on the 29th", F, day(D(2026, 10, 29), F)),
    # no possible window: no window
    ("what happened on february 30th", F, NONE),
    ("what happened on the 31st", F, NONE),                                          # September has 30 days
    ("what happened 10000000000000 days ago", F, NONE),
    ("who arrived last", F, NONE),
    # no time phrase: no window
    ("where is bob now", F, NONE),
    ("when did you first see bob", F, NONE),
    ("who came in second", F, NONE),
    ("did you see may in the kitchen", F, NONE),
    ("how long was bob in the lab", F, NONE),
    ("for how long did bob stay", F, NONE),
    ("bob stayed a few minutes, where did he go", F, NONE),
    ("good morning, where is alice", F, NONE),
    ("what did bob eat for lunch", F, NONE),
]


# -- judging raw outputs -----------------------------------------------------------------------
def local_instant(d: dt.date, h: int, m: int) -> float:
    return clock_time(d, h, m, ZURICH)


def judge_point(exp: Expected, d: Optional[dt.date], hm: Optional[tuple[int, int]], pod: Optional[str] = None) -> str:
    """Verdict on one raw reading: a local date, maybe a clock time, maybe a part of day."""
    if exp.kind == "none":
        return "WRONG"
    if d is None:
        return "WRONG"
    point = local_instant(d, *hm) if hm else None
    inside = point is not None and exp.window[0] <= point <= exp.window[1]
    if exp.kind == "day":
        return "ok" if d == exp.day else "WRONG"
    if exp.kind == "clock":
        return "ok" if d == exp.day and hm == exp.clock else "WRONG"
    if exp.kind == "part":
        if d == exp.day and pod == exp.part:
            return "ok"
        if d == exp.day and (inside or hm is None):
            return "in" if inside else "WRONG"
        return "WRONG"
    if point is None:  # a date alone: its midnight ("since monday")
        point = local_instant(d, 0, 0)
        inside = exp.window[0] <= point <= exp.window[1]
    if abs(point - exp.window[0]) < 60:
        return "ok"
    return "in" if inside else "WRONG"


RANK = {"ok": 2, "in": 1, "WRONG": 0}


def dateparser_raw(q: str, now: float, exp: Expected) -> tuple[str, str]:
    from dateparser.search import search_dates
    base = dt.datetime.fromtimestamp(now, ZURICH).replace(tzinfo=None)
    found = search_dates(q, languages=["en"], settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past",
                                                        "RETURN_AS_TIMEZONE_AWARE": False}) or []
    return _best(exp, [(f"{s!r}->{w:%m-%d %H:%M}", w.date(), (w.hour, w.minute), None) for s, w in found])


def ctparse_raw(q: str, now: float, exp: Expected) -> tuple[str, str]:
    from ctparse import ctparse
    from ctparse.types import Interval, Time
    base = dt.datetime.fromtimestamp(now, ZURICH).replace(tzinfo=None)
    r = ctparse(q, ts=base, timeout=0)
    if r is None:
        return _best(exp, [])
    res = r.resolution

    def reading(t: Time, label: str):
        d = D(t.year, t.month, t.day) if t.year and t.month and t.day else None
        hm = (t.hour, t.minute or 0) if t.hour is not None else None
        return (label, d, hm, t.POD)

    if isinstance(res, Interval):
        t = res.t_from or res.t_to
        return _best(exp, [reading(t, f"interval {res}")] if t else [(f"interval {res}", None, None, None)])
    if isinstance(res, Time):
        return _best(exp, [reading(res, str(res))])
    return _best(exp, [(f"{type(res).__name__} {res}", None, None, None)])


def _best(exp: Expected, readings) -> tuple[str, str]:
    """(label, verdict) of the best of the raw readings (label, date, (h, m), part of day)."""
    if not readings:
        return "-", "ok" if exp.kind == "none" else "WRONG"
    verdicts = [(judge_point(exp, d, hm, pod), label) for label, d, hm, pod in readings]
    verdict, label = max(verdicts, key=lambda v: RANK[v[0]])
    return label, verdict


def fmt_window(w: Optional[tuple[float, float]]) -> str:
    if w is None:
        return "none"
    s, e = (dt.datetime.fromtimestamp(x, ZURICH) for x in w)
    return f"{s:%m-%d %H:%M}..{e:%m-%d %H:%M} ({(w[1] - w[0]) / 3600:g} h)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20, help="timing repeats per question (after one warm run)")
    args = ap.parse_args()
    logging.getLogger("ctparse").setLevel(logging.ERROR)  # "Failed to produce result" per miss
    t = time.perf_counter()
    time_expressions.warm_up()
    warm_s = time.perf_counter() - t
    t = time.perf_counter()
    import ctparse  # noqa: F401
    ctparse_import_s = time.perf_counter() - t

    totals = {"ours": {}, "dateparser": {}, "ctparse": {}}
    rows = []
    for q, now, exp in CASES:
        got = time_expressions.parse_time_expression(q, now, ZURICH)
        window = (got.start, got.end) if got else None
        ok = (window is None and exp.kind == "none") or (
            window is not None and exp.window is not None and all(abs(a - b) < 1e-6 for a, b in zip(window, exp.window)))
        ours = "ok" if ok else "WRONG"
        dp_label, dp = dateparser_raw(q, now, exp)
        ct_label, ct = ctparse_raw(q, now, exp)
        for name, v in (("ours", ours), ("dateparser", dp), ("ctparse", ct)):
            totals[name][v] = totals[name].get(v, 0) + 1
        asked = dt.datetime.fromtimestamp(now, ZURICH)
        rows.append((q, f"{asked:%a %m-%d %H:%M}", fmt_window(exp.window),
                     f"{ours}" + ("" if ok else f" {fmt_window(window)}"), f"{dp:5} {dp_label}", f"{ct:5} {ct_label}"))

    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    head = ("question", "asked", "expected", "ours")
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)) + " | dateparser raw | ctparse raw")
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + f" | {r[4][:48]:48} | {r[5][:60]}")
    n = len(CASES)
    print(f"\n{n} questions ({sum(e.kind != 'none' for _, _, e in CASES)} with a time phrase)")
    for name, counts in totals.items():
        print(f"  {name:10}  ok {counts.get('ok', 0):2}/{n}   in-window point {counts.get('in', 0):2}   "
              f"wrong {counts.get('WRONG', 0):2}")

    # per-call cost (steady state, after the warm run above)
    from ctparse import ctparse as ct_parse
    from dateparser.search import search_dates
    costs = {"ours": [], "dateparser": [], "ctparse": []}
    for q, now, _ in CASES:
        base = dt.datetime.fromtimestamp(now, ZURICH).replace(tzinfo=None)
        for name, call in (("ours", lambda: time_expressions.parse_time_expression(q, now, ZURICH)),
                           ("dateparser", lambda: search_dates(q, languages=["en"], settings={
                               "RELATIVE_BASE": base, "PREFER_DATES_FROM": "past"})),
                           ("ctparse", lambda: ct_parse(q, ts=base, timeout=0))):
            for _ in range(args.repeats):
                t = time.perf_counter()
                call()
                costs[name].append(time.perf_counter() - t)
    print(f"\nimport: time_expressions {IMPORT_OURS_S * 1e3:.0f} ms (dateparser not yet), "
          f"warm_up (dateparser import + first search) {warm_s * 1e3:.0f} ms, ctparse {ctparse_import_s * 1e3:.0f} ms")
    for name, samples in costs.items():
        ms = sorted(s * 1e3 for s in samples)
        print(f"  per question {name:10}  mean {statistics.mean(ms):6.2f} ms  p50 {ms[len(ms) // 2]:6.2f}  "
              f"p95 {ms[int(len(ms) * 0.95)]:6.2f}  max {ms[-1]:6.2f}")


if __name__ == "__main__":
    main()
