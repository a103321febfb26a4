"""Time phrases of questions as windows (agent.time_expressions): days, dates, clock times and
ranges, parts of day, spans, on the daylight-saving change days of Europe/Zurich (2026-03-29:
23 h, 2026-10-25: 25 h), phrases that are no time at all, and the time words left unread."""
import datetime as dt
import subprocess
import sys
import threading
from zoneinfo import ZoneInfo

import pytest

from embodied_memory.agent import day_phrases, time_expressions
from embodied_memory.agent.time_expressions import (GRANULARITIES, TimeExpression, parse_time_expression,
                                                    parse_time_window, unread_time_words)
from embodied_memory.calendar_windows import (day_of_month_date, day_window, days_window, latest_clock_time,
                                              month_day_date, part_of_day_window, week_window)

ZURICH = ZoneInfo("Europe/Zurich")
UTC = dt.timezone.utc
D = dt.date


def zurich(*args) -> float:
    return dt.datetime(*args, tzinfo=ZURICH).timestamp()


def utc(*args) -> float:
    return dt.datetime(*args, tzinfo=UTC).timestamp()


MON_AFTER_SPRING = zurich(2026, 3, 30, 10)    # Monday; Sunday 03-29 had 23 hours
SPRING_DAY = zurich(2026, 3, 29, 4)           # Sunday of the change, 04:00 CEST = 02:00 UTC
SUN_AUTUMN = zurich(2026, 10, 25, 10)         # the 25-hour Sunday
MON_AFTER_AUTUMN = zurich(2026, 10, 26, 10)
FRI = zurich(2026, 10, 30, 16)
FRI_0900, FRI_1700 = zurich(2026, 10, 30, 9), zurich(2026, 10, 30, 17)
SAT_0030 = zurich(2026, 10, 31, 0, 30)


def window(q, now):
    expr = parse_time_expression(q, now, ZURICH)
    assert expr is not None, q
    return expr.start, expr.end


def test_days_are_local_calendar_days_on_change_days():
    assert window("who was in the kitchen yesterday", MON_AFTER_SPRING) == day_window(D(2026, 3, 29), ZURICH)
    start, end = window("who was in the kitchen yesterday", MON_AFTER_AUTUMN)
    assert (start, end) == (utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)) and end - start == 25 * 3600
    assert window("what did you see two days ago", MON_AFTER_SPRING) == day_window(D(2026, 3, 28), ZURICH)
    assert window("what happened the day before yesterday", MON_AFTER_SPRING) == day_window(D(2026, 3, 28), ZURICH)
    assert window("what happened on 29 march", MON_AFTER_SPRING) == day_window(D(2026, 3, 29), ZURICH)
    # today and earlier today run from local midnight to now
    assert window("did you see dave earlier today", FRI) == (zurich(2026, 10, 30), FRI)
    expr = parse_time_expression("what happened today", SPRING_DAY, ZURICH)
    assert (expr.start, expr.end, expr.granularity) == (utc(2026, 3, 28, 23), SPRING_DAY, "day")


def test_weekdays_are_the_most_recent_on_or_before_today():
    # asked on a Monday, "on monday" is today (dateparser alone: a week ago)
    assert window("did you see bob on monday", MON_AFTER_SPRING) == (zurich(2026, 3, 30), MON_AFTER_SPRING)
    assert window("monday, was bob here", MON_AFTER_SPRING)[0] == zurich(2026, 3, 30)
    assert window("did you see bob on tuesday", MON_AFTER_SPRING) == day_window(D(2026, 3, 24), ZURICH)
    assert window("did you see bob on tue", FRI) == day_window(D(2026, 10, 27), ZURICH)
    assert window("was bob here on friday", FRI) == (zurich(2026, 10, 30), FRI)
    # "last friday" asked on a Friday is a week ago
    assert window("was bob here last friday", FRI) == day_window(D(2026, 10, 23), ZURICH)
    assert window("anything on sunday", MON_AFTER_SPRING) == day_window(D(2026, 3, 29), ZURICH)


def test_clock_times_are_local_with_a_quarter_hour_margin():
    start, end = window("where was carol at 3pm yesterday", MON_AFTER_SPRING)
    assert (start + end) / 2 == utc(2026, 3, 29, 13) and end - start == 1800   # CEST after the change
    start, end = window("anyone by the door yesterday at 3 p.m.", MON_AFTER_AUTUMN)
    assert (start + end) / 2 == utc(2026, 10, 25, 14)                          # CET after the change
    assert window("anything on sunday at 15:00", MON_AFTER_SPRING) == (utc(2026, 3, 29, 12, 45),
                                                                        utc(2026, 3, 29, 13, 15))
    assert window("was anyone by the door around 12:30", FRI) == (zurich(2026, 10, 30, 12, 15),
                                                                   zurich(2026, 10, 30, 12, 45))
    assert window("who was in the lab at 8 in the evening yesterday", FRI)[0] == zurich(2026, 10, 29, 19, 45)
    assert window("the day before yesterday at 3pm", MON_AFTER_SPRING)[0] == zurich(2026, 3, 28, 14, 45)
    # the skipped 02:30 of the spring change resolves with fold=0 (03:30 CEST)
    assert window("what happened at 2:30", SPRING_DAY) == (utc(2026, 3, 29, 1, 15), utc(2026, 3, 29, 1, 45))
    expr = parse_time_expression("was bob here at 3pm on monday", FRI, ZURICH)
    assert expr.granularity == "clock" and expr.start == zurich(2026, 10, 26, 14, 45)


def test_a_bare_clock_time_later_than_now_is_yesterdays():
    assert window("who was in the kitchen at noon", MON_AFTER_AUTUMN) == (zurich(2026, 10, 25, 11, 45),
                                                                          zurich(2026, 10, 25, 12, 15))
    assert window("who was in the kitchen at midday", MON_AFTER_AUTUMN) == window("at noon", MON_AFTER_AUTUMN)
    assert window("who was in the kitchen at noon", FRI)[0] == zurich(2026, 10, 30, 11, 45)   # today's
    assert window("anyone at 8 in the evening", FRI)[0] == zurich(2026, 10, 29, 19, 45)


def center(q, now):
    start, end = window(q, now)
    assert end - start == 1800, q
    return dt.datetime.fromtimestamp((start + end) / 2, ZURICH).strftime("%m-%d %H:%M")


def test_clock_ranges_are_the_window():
    expr = parse_time_expression("who was here between 2pm and 4pm", FRI_1700, ZURICH)
    assert (expr.start, expr.end, expr.granularity) == (zurich(2026, 10, 30, 14), zurich(2026, 10, 30, 16), "clock")
    assert expr.phrases == ["between 2pm and 4pm"]
    # a range later than now today is yesterday's; one that has begun ends now
    assert window("who was here between 2pm and 4pm", FRI_0900) == (zurich(2026, 10, 29, 14), zurich(2026, 10, 29, 16))
    assert window("who was here between 3pm and 5pm", FRI) == (zurich(2026, 10, 30, 15), FRI)
    # no am/pm: the readings that make a span of at most 12 h, the latest that has begun
    assert window("who came from 9 to 11", FRI_1700) == (zurich(2026, 10, 30, 9), zurich(2026, 10, 30, 11))
    assert window("who came from 9 to 11", zurich(2026, 10, 30, 8)) == (zurich(2026, 10, 29, 21),
                                                                       zurich(2026, 10, 29, 23))
    assert window("anyone from 10:00 until noon", FRI) == (zurich(2026, 10, 30, 10), zurich(2026, 10, 30, 12))
    assert window("who was in the kitchen between 9 and 10 this morning", FRI) == (zurich(2026, 10, 30, 9),
                                                                                  zurich(2026, 10, 30, 10))
    assert window("what happened between 10pm and 2am", FRI) == (zurich(2026, 10, 29, 22), zurich(2026, 10, 30, 2))
    # on a named day, in local clock time: 14:00 CEST the day after the spring change is 12:00 UTC
    expr = parse_time_expression("who was there yesterday between 14:00 and 15:30", MON_AFTER_SPRING, ZURICH)
    assert (expr.start, expr.end) == (utc(2026, 3, 29, 12), utc(2026, 3, 29, 13, 30))
    assert expr.phrases == ["yesterday", "between 14:00 and 15:30"]
    start, end = window("yesterday between 1am and 4am", MON_AFTER_AUTUMN)     # over the repeated hour
    assert (start, end) == (utc(2026, 10, 24, 23), utc(2026, 10, 25, 3)) and end - start == 4 * 3600


def test_more_clock_forms():
    assert center("what happened at 12.30", FRI) == "10-30 12:30"
    assert center("what happened at half past two", FRI) == "10-30 14:30"
    assert center("what happened at quarter to three", FRI) == "10-30 14:45"
    assert center("what happened at 3 o'clock", FRI) == "10-30 15:00"
    assert center("anyone at three o'clock yesterday", FRI) == "10-29 15:00"
    assert center("what did you see at 3", FRI) == "10-30 15:00"
    assert center("ten past 4 yesterday", FRI) == "10-29 16:10"
    assert center("at twenty to five", FRI_1700) == "10-30 16:40"
    assert center("at 9 this morning", FRI) == "10-30 09:00"
    assert center("at 3 in the afternoon yesterday", FRI) == "10-29 15:00"
    assert parse_time_expression("what happened at 3 o'clock", FRI, ZURICH).phrases == ["at 3 o'clock"]


def test_an_hour_without_am_pm_is_its_latest_past_reading():
    assert center("what happened at 2:30", FRI_1700) == "10-30 14:30"
    assert center("what happened at 8", FRI_0900) == "10-30 08:00"
    assert center("what happened at 10", FRI_0900) == "10-29 22:00"
    assert center("what happened at 12:30", FRI_0900) == "10-30 00:30"
    assert center("yesterday at 2:30", FRI) == "10-29 14:30"
    assert center("what happened at 08:30", FRI_1700) == "10-30 08:30"        # a leading zero: 24-hour
    assert center("what happened at 2:30am", FRI_1700) == "10-30 02:30"
    assert window("since 9", FRI) == (zurich(2026, 10, 30, 9), FRI)
    assert center("what happened last night at 2", FRI) == "10-30 02:00"       # the night's small hours


def test_tonight_after_midnight_is_the_night_that_began_yesterday():
    expr = parse_time_expression("what happened tonight", SAT_0030, ZURICH)
    assert (expr.start, expr.end, expr.granularity) == (zurich(2026, 10, 30, 18), SAT_0030, "part")
    assert window("what happened tonight", zurich(2026, 10, 30, 21)) == (zurich(2026, 10, 30, 18),
                                                                          zurich(2026, 10, 30, 21))
    assert window("what happened tonight", FRI) == (FRI, FRI)                  # not yet begun


def test_past_week_is_the_last_seven_days_and_last_week_the_calendar_week():
    for q in ["who came in past week", "who came the past week", "who came in the past week"]:
        expr = parse_time_expression(q, FRI, ZURICH)
        assert (expr.start, expr.end, expr.granularity) == (zurich(2026, 10, 23, 16), FRI, "recent"), q
    assert window("who came last week", FRI) == (zurich(2026, 10, 19), zurich(2026, 10, 26))


def test_last_is_part_of_a_phrase_only_before_a_unit_or_a_day():
    expr = parse_time_expression("who arrived last today", FRI, ZURICH)
    assert expr.phrases == ["today"] and (expr.start, expr.end) == (zurich(2026, 10, 30), FRI)
    assert parse_time_expression("was bob here last friday", FRI, ZURICH).phrases == ["last friday"]
    assert parse_time_expression("was bob here last fri", FRI, ZURICH).phrases == ["last fri"]
    assert parse_time_expression("who came in last 3 hours", FRI, ZURICH).phrases == ["in last 3 hours"]
    assert parse_time_expression("who came in last at 3pm", FRI, ZURICH).phrases == ["at 3pm"]


def test_dates_and_impossible_dates():
    assert window("what happened on the 29th", FRI) == day_window(D(2026, 10, 29), ZURICH)
    assert window("what happened on february 29", FRI) == day_window(D(2024, 2, 29), ZURICH)   # a leap year
    assert window("what happened on march 31st", MON_AFTER_SPRING) == day_window(D(2025, 3, 31), ZURICH)
    assert window("what happened on 2026-03-28", FRI) == day_window(D(2026, 3, 28), ZURICH)
    assert window("what happened on the 3rd of may at noon", FRI)[0] == zurich(2026, 5, 3, 11, 45)
    assert window("what happened on the 31st", zurich(2026, 11, 5)) == day_window(D(2026, 10, 31), ZURICH)
    for q in ["what happened on february 30th", "what happened on april 31", "what happened on february 30th at 3pm",
              "what happened on 2026-02-30", "what happened on the 31st"]:   # asked in October: September has 30
        assert parse_time_expression(q, FRI, ZURICH) is None, q


def test_impossible_counts_are_no_window():
    for q in ["10000000000000 days ago", "10000000 days ago", "100000 days ago", "10000000000000 hours ago",
              "10000000000000 weeks ago", "10000000000000 minutes ago"]:
        assert parse_time_expression(q, FRI, ZURICH) is None, q
        assert parse_time_window(q, FRI, ZURICH) == (None, None, [])


def test_unread_time_words():
    def unread(q, now=FRI):
        return unread_time_words(q, parse_time_expression(q, now, ZURICH))
    # all read
    for q in ["who was here between 2pm and 4pm", "who was here in the last 2 days", "what happened on the 29th",
              "anyone by the door yesterday at 3pm", "what happened at half past two", "who arrived last today"]:
        assert unread(q) == [], q
    # not read: listed, so a caller need not search a wider window
    assert unread("anyone at 25:99") == ["25:99"]
    assert unread("what happened on february 30th") == ["february 30th"]
    assert unread("anything on 3/28") == ["3/28"]
    assert unread("who was here at 3pm or 4pm") == ["4pm"]
    assert unread("what happened last month") == ["last month"]
    assert unread("what happened 3 months ago") == ["3 months ago"]
    assert unread("what happened 10000000000000 days ago") == ["10000000000000 days ago"]
    assert unread("was bob here yesterday between 14:00 and 15:70") == ["between 14:00 and 15:70"]
    assert unread_time_words("what happened at noon on monday", None) == ["noon", "monday"]
    # no false alarms on numbers that are no time
    for q in ["did you see 3 people in room 4", "bob stayed 2 days", "what is on the 3rd floor", "did you see may 3 times",
              "who was between 3 and 4 people", "good morning, where is alice", "what did bob eat for lunch"]:
        assert unread(q) == [], q


def test_calendar_helpers_for_dates_and_readings():
    today = D(2026, 10, 30)
    assert month_day_date(2, 29, today) == D(2024, 2, 29) and month_day_date(2, 30, today) is None
    assert month_day_date(12, 25, today) == D(2025, 12, 25) and month_day_date(13, 1, today) is None
    assert month_day_date(2, 29, today, year=2026) is None
    assert day_of_month_date(31, today) is None and day_of_month_date(30, today) == today
    assert day_of_month_date(31, D(2026, 11, 5)) == D(2026, 10, 31)
    days = [D(2026, 10, 29), D(2026, 10, 30)]
    assert latest_clock_time(days, [600, 1320], FRI_0900, ZURICH) == (D(2026, 10, 29), 1320)
    assert latest_clock_time([today], [600, 1320], FRI_0900, ZURICH) == (today, 600)   # all later: the earliest


def test_parts_of_day():
    assert window("who did you see this morning", FRI) == part_of_day_window(D(2026, 10, 30), "morning", ZURICH)
    assert window("was alice in the office monday morning", FRI) == part_of_day_window(
        D(2026, 10, 26), "morning", ZURICH)
    assert window("where was erin yesterday evening", MON_AFTER_AUTUMN) == (utc(2026, 10, 25, 17),
                                                                            utc(2026, 10, 25, 23))
    start, end = window("what happened last night", SUN_AUTUMN)   # 18:00 CEST .. 06:00 CET
    assert (start, end) == (utc(2026, 10, 24, 16), utc(2026, 10, 25, 5)) and end - start == 13 * 3600
    assert window("two days ago in the afternoon", MON_AFTER_SPRING) == part_of_day_window(
        D(2026, 3, 28), "afternoon", ZURICH)
    # lunchtime is 12:00-14:00 of the day
    assert window("who was in the kitchen at lunchtime", FRI) == (zurich(2026, 10, 30, 12), zurich(2026, 10, 30, 14))
    assert window("who was there over lunch yesterday", FRI) == (zurich(2026, 10, 29, 12), zurich(2026, 10, 29, 14))
    # a bare part that has not begun today is yesterday's; "this evening" is today's (empty before it)
    assert window("what happened in the evening", SUN_AUTUMN) == (zurich(2026, 10, 24, 18), zurich(2026, 10, 25))
    assert window("what happened this evening", SUN_AUTUMN) == (SUN_AUTUMN, SUN_AUTUMN)


def test_spans_that_end_now_count_elapsed_time_over_a_change():
    assert window("who came in the last 2 hours", FRI) == (FRI - 7200, FRI)
    # 04:00 CEST minus 3 elapsed hours is 00:00 CET (wall-clock arithmetic would give 01:00)
    assert window("who came in the last 3 hours", SPRING_DAY) == (utc(2026, 3, 28, 23), SPRING_DAY)
    assert window("within the past hour", FRI) == (FRI - 3600, FRI)
    assert window("in the last few minutes", FRI) == (FRI - 180, FRI)
    assert window("what happened in the last day", SUN_AUTUMN) == (zurich(2026, 10, 24, 10), SUN_AUTUMN)
    assert SUN_AUTUMN - window("what happened in the last day", SUN_AUTUMN)[0] == 25 * 3600
    assert window("who was at the desk 5 minutes ago", FRI) == (FRI - 330, FRI - 270)
    assert window("a couple of hours ago", FRI) == (FRI - 9000, FRI - 5400)
    assert window("half an hour ago", FRI) == (FRI - 1830, FRI - 1770)
    expr = parse_time_expression("in the last 99999999999999 days", FRI, ZURICH)
    assert (expr.start, expr.end, expr.granularity) == (0.0, FRI, "recent")


def test_weeks_and_weekends():
    expr = parse_time_expression("who did you see this week", FRI, ZURICH)
    assert (expr.start, expr.end, expr.granularity) == (zurich(2026, 10, 26), FRI, "week")
    start, end = window("who did you see last week", FRI)          # with the 25-hour Sunday
    assert (start, end) == (zurich(2026, 10, 19), zurich(2026, 10, 26)) and end - start == 169 * 3600
    assert window("what happened 2 weeks ago", FRI) == week_window(D(2026, 10, 30), ZURICH, 2)
    start, end = window("who came by over the weekend", MON_AFTER_AUTUMN)
    assert (start, end) == days_window(D(2026, 10, 24), D(2026, 10, 25), ZURICH) and end - start == 49 * 3600
    start, end = window("who came by at the weekend", MON_AFTER_SPRING)
    assert start == zurich(2026, 3, 28) and end - start == 47 * 3600
    # asked during a weekend: "the weekend" is this one (up to now), "last weekend" the one before
    assert window("what happened over the weekend", SUN_AUTUMN) == (zurich(2026, 10, 24), SUN_AUTUMN)
    assert window("what happened last weekend", SUN_AUTUMN) == (zurich(2026, 10, 17), zurich(2026, 10, 19))
    assert window("who came in the past week", FRI) == (zurich(2026, 10, 23, 16), FRI)   # elapsed, not calendar


def test_since_after_before():
    expr = parse_time_expression("who has come in since 10am", FRI, ZURICH)
    assert (expr.start, expr.end, expr.granularity) == (zurich(2026, 10, 30, 10), FRI, "recent")
    assert window("who came in since monday", FRI) == (zurich(2026, 10, 26), FRI)
    assert window("what changed since yesterday", MON_AFTER_AUTUMN) == (zurich(2026, 10, 25), MON_AFTER_AUTUMN)
    assert window("what changed since this morning", FRI) == (zurich(2026, 10, 30, 6), FRI)
    assert window("what changed since last week", FRI) == (zurich(2026, 10, 19), FRI)
    assert window("who was here after lunch yesterday", FRI) == (zurich(2026, 10, 29, 14), zurich(2026, 10, 30))
    assert window("who was here before noon", FRI) == (zurich(2026, 10, 30), zurich(2026, 10, 30, 12))
    assert window("what happened before monday", FRI) == (0.0, zurich(2026, 10, 26))


@pytest.mark.parametrize("q", [
    "where is bob now", "when did you first see bob", "who came in second", "did you see may in the kitchen",
    "where is june", "how long was bob in the lab", "for how long did bob stay", "how long ago did bob leave",
    "bob stayed a few minutes, where did he go", "good morning, where is alice", "what did bob eat for lunch",
    "what is on the 3rd floor", "anyone at 25:99", "who sat down at desk 4", "when did you see bob for the last time",
    "how many minutes ago did bob leave", "is the sun out", "who arrived last", "was anyone here at 3 people",
    "did you see 3 people in room 4", "who was between 3 and 4 people", "how many boxes from 2 to 3 rooms",
    "did you see may 3 times", "bob stayed 2 days", "what did you see after 3 visits"])
def test_no_time_phrase_no_window(q):
    assert parse_time_expression(q, FRI, ZURICH) is None
    assert parse_time_window(q, FRI, ZURICH) == (None, None, [])


def test_only_the_time_phrase_counts():
    expr = parse_time_expression("how many minutes did you see carol in the lab today", FRI, ZURICH)
    assert expr.phrases == ["today"] and (expr.start, expr.end) == (zurich(2026, 10, 30), FRI)
    expr = parse_time_expression("when did you see bob for the last time today", FRI, ZURICH)
    assert expr.phrases == ["today"]
    # numbers and names around a time phrase do not leak into it
    assert window("who was on floor 3 yesterday at 3pm", FRI)[0] == zurich(2026, 10, 29, 14, 45)
    assert window("was bob at desk 4 at 3pm", FRI)[0] == zurich(2026, 10, 30, 14, 45)
    assert window("what was on the 3rd floor at 3 pm", FRI)[0] == zurich(2026, 10, 30, 14, 45)
    assert window("where was june on monday", FRI) == day_window(D(2026, 10, 26), ZURICH)
    assert window("did may come in today", FRI) == (zurich(2026, 10, 30), FRI)


def test_a_dateparser_match_without_a_day_token_is_ignored(monkeypatch):
    """The filter: whatever dateparser returns, a match that covers no day token is none."""
    monkeypatch.setattr(time_expressions, "dateparser_matches",
                        lambda text, base: [("on", dt.datetime(2020, 1, 1, 12))])
    assert parse_time_expression("was bob here on monday", FRI, ZURICH) is None
    monkeypatch.setattr(time_expressions, "dateparser_matches",
                        lambda text, base: [("on", dt.datetime(2020, 1, 1, 12)), ("yesterday", base - dt.timedelta(1))])
    assert window("was bob here on monday yesterday", FRI) == day_window(D(2026, 10, 29), ZURICH)


def test_dateparser_is_called_under_the_module_lock(monkeypatch):
    held = []

    def search(text, **kwargs):
        held.append(day_phrases._DATEPARSER_LOCK.locked())
        return [("yesterday", kwargs["settings"]["RELATIVE_BASE"] - dt.timedelta(1))]

    monkeypatch.setattr(day_phrases, "_search_dates", lambda: search)
    threads = [threading.Thread(target=parse_time_expression, args=("yesterday", FRI, ZURICH)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert held == [True] * 4
    assert not day_phrases._DATEPARSER_LOCK.locked()


def test_contract_of_parse_time_window():
    start, end, words = parse_time_window("anyone by the door yesterday at 3pm", MON_AFTER_SPRING, ZURICH)
    assert words == ["yesterday", "at 3pm"] and end - start == 1800
    expr = parse_time_expression("on monday, when did you last see bob", FRI, ZURICH)
    assert isinstance(expr, TimeExpression) and expr.phrases == ["on monday"]
    assert parse_time_window("where is bob now", FRI, ZURICH) == (None, None, [])


@pytest.mark.parametrize("now", [MON_AFTER_SPRING, SPRING_DAY, SUN_AUTUMN, FRI, 3600.0])
def test_windows_stay_between_the_epoch_and_now(now):
    """0 <= start <= end <= now and end > 0; a window wholly before the epoch is none (asked at
    3600, 01:00 UTC on 1970-01-01, yesterday is before it), so an end is never 0 ("no end")."""
    for q in ["today", "tonight", "this afternoon", "at 11pm today", "this week", "in the last 5 days",
              "yesterday", "over the weekend", "since 10am", "before noon", "on friday", "at 3",
              "between 2pm and 4pm", "the 1st of january"]:
        expr = parse_time_expression(q, now, ZURICH)
        if expr is None:
            assert now == 3600.0 and q in ("yesterday", "over the weekend", "on friday", "before noon", "at 3",
                                           "between 2pm and 4pm"), q
            continue
        assert 0.0 <= expr.start <= expr.end <= now and expr.end > 0, (q, now, expr)
        assert expr.granularity in GRANULARITIES


def test_dateparser_is_imported_on_first_use_only():
    code = ("import sys, embodied_memory.agent.time_expressions as te; assert 'dateparser' not in sys.modules; "
            "te.parse_time_expression('where is bob now', 0.0, 'UTC'); assert 'dateparser' not in sys.modules; "
            "te.parse_time_expression('yesterday', 1e9, 'UTC'); assert 'dateparser' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
