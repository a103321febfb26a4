"""Calendar days and clock times on daylight-saving change days (Europe/Zurich: 2026-03-29 has
23 hours, 2026-10-25 has 25), through the helper, the question parser and the question generator."""
import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from embodied_memory.agent.time_expressions import parse_time_window
from embodied_memory.calendar_windows import (clock_time, clock_window, day_window, day_window_at, local_date,
                                              part_of_day_window, recent_window, weekday_date)

ZURICH = ZoneInfo("Europe/Zurich")
UTC = dt.timezone.utc
SPRING, AUTUMN = dt.date(2026, 3, 29), dt.date(2026, 10, 25)


def utc(*args) -> float:
    return dt.datetime(*args, tzinfo=UTC).timestamp()


def zurich(*args) -> float:
    return dt.datetime(*args, tzinfo=ZURICH).timestamp()


def test_a_day_runs_from_local_midnight_to_local_midnight():
    start, end = day_window(SPRING, ZURICH)
    assert (start, end) == (utc(2026, 3, 28, 23), utc(2026, 3, 29, 22)) and end - start == 23 * 3600
    start, end = day_window(AUTUMN, ZURICH)
    assert (start, end) == (utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)) and end - start == 25 * 3600
    start, end = day_window(dt.date(2026, 3, 28), ZURICH)
    assert end - start == 24 * 3600 and end == day_window(SPRING, ZURICH)[0]
    # the day that contains an instant, and the days before it
    assert day_window_at(zurich(2026, 3, 30, 0, 30), ZURICH) == day_window(dt.date(2026, 3, 30), ZURICH)
    assert day_window_at(zurich(2026, 3, 30, 0, 30), ZURICH, days_back=1) == day_window(SPRING, ZURICH)
    assert day_window(SPRING, "UTC") == (utc(2026, 3, 29), utc(2026, 3, 30))
    assert local_date(utc(2026, 3, 29, 22, 30), ZURICH) == dt.date(2026, 3, 30)


def test_clock_times_are_local_wall_clock_times():
    assert clock_time(SPRING, 15, 0, ZURICH) == utc(2026, 3, 29, 13)      # CEST, after the change
    assert clock_time(dt.date(2026, 3, 28), 15, 0, ZURICH) == utc(2026, 3, 28, 14)
    assert clock_time(AUTUMN, 15, 0, ZURICH) == utc(2026, 10, 25, 14)      # CET, after the change
    assert clock_time(AUTUMN, 1, 30, ZURICH) == utc(2026, 10, 24, 23, 30)  # still CEST
    assert clock_time(SPRING, 30, 0, ZURICH) == clock_time(dt.date(2026, 3, 30), 6, 0, ZURICH)
    # documented fold=0: a skipped 02:30 is the instant it would have been before the change,
    # a repeated 02:30 its first occurrence
    assert clock_time(SPRING, 2, 30, ZURICH) == utc(2026, 3, 29, 1, 30)
    assert clock_time(AUTUMN, 2, 30, ZURICH) == utc(2026, 10, 25, 0, 30)
    assert clock_window(SPRING, 15, 0, ZURICH, margin_s=600) == (utc(2026, 3, 29, 12, 50), utc(2026, 3, 29, 13, 10))


def test_parts_of_a_change_day():
    assert part_of_day_window(SPRING, "morning", ZURICH) == (utc(2026, 3, 29, 4), utc(2026, 3, 29, 10))
    start, end = part_of_day_window(dt.date(2026, 3, 28), "evening", ZURICH)
    assert end == day_window(SPRING, ZURICH)[0] and end - start == 6 * 3600
    start, end = part_of_day_window(dt.date(2026, 10, 24), "night", ZURICH)  # 18:00 CEST to 06:00 CET
    assert (start, end) == (utc(2026, 10, 24, 16), utc(2026, 10, 25, 5)) and end - start == 13 * 3600
    with pytest.raises(ValueError, match="part of day"):
        part_of_day_window(SPRING, "brunch", ZURICH)


def test_recent_windows_and_weekdays():
    now = zurich(2026, 3, 29, 12)
    assert recent_window(now, 2, "hour", ZURICH) == (now - 7200, now)           # elapsed hours
    assert recent_window(now, 1, "day", ZURICH) == (zurich(2026, 3, 28, 12), now)  # a 23 h day back
    assert now - recent_window(now, 1, "day", ZURICH)[0] == 23 * 3600
    assert recent_window(now, 10 ** 9, "day", ZURICH) == (0.0, now)            # never before the epoch
    monday = dt.date(2026, 3, 30)
    assert weekday_date("sunday", monday) == SPRING and weekday_date("Monday", monday) == monday
    assert weekday_date(1, monday) == dt.date(2026, 3, 24)


def test_parser_resolves_yesterday_afternoon_clock_on_the_day_after_a_change():
    asked = zurich(2026, 3, 30, 10)
    start, end, words = parse_time_window("anyone by the door yesterday at 3pm", asked, ZURICH)
    assert (start + end) / 2 == utc(2026, 3, 29, 13) and end - start == 1800 and "yesterday" in words
    start, end, _ = parse_time_window("what went on yesterday", asked, ZURICH)
    assert (start, end) == day_window(SPRING, ZURICH) and end - start == 23 * 3600
    start, end, _ = parse_time_window("anything on sunday at 15:00", asked, ZURICH)
    assert (start + end) / 2 == utc(2026, 3, 29, 13)
    start, end, _ = parse_time_window("who passed by two days ago", asked, ZURICH)
    assert (start, end) == day_window(dt.date(2026, 3, 28), ZURICH)
    asked = zurich(2026, 10, 26, 10)
    start, end, _ = parse_time_window("what went on yesterday evening", asked, ZURICH)
    assert (start, end) == (utc(2026, 10, 25, 17), utc(2026, 10, 25, 23))
    start, end, _ = parse_time_window("what went on yesterday", asked, ZURICH)
    assert end - start == 25 * 3600
    # an impossible clock time is no clock time (and no crash)
    assert parse_time_window("anyone at 25:99", asked, ZURICH)[:2] == (None, None)


def _frame(t, visible_in: dict, robot_room="kitchen"):
    return {"t": t, "robot": [0.0, 0.0, 0.0], "waypoint": robot_room, "room": robot_room,
            "visible": sorted(visible_in), "seen": {n: {"room": r} for n, r in visible_in.items()}}


@pytest.mark.parametrize("zone_name", ["Europe/Zurich", "UTC"])
def test_question_generator_days_follow_the_zone_the_questions_are_asked_in(zone_name):
    from embodied_memory.sim.episode import GroundTruth
    from embodied_memory.sim.questions import generate_questions

    positions = {"alice": {r: [1.0, 2.0] for r in ("kitchen", "office", "meeting_room")},
                 "bob": {r: [3.0, 4.0] for r in ("kitchen", "office", "meeting_room")}}
    frames = [_frame(utc(2026, 3, 29, 13), {"alice": "kitchen"}),            # 15:00 CEST on 3-29
              _frame(utc(2026, 3, 29, 22, 30), {"alice": "office"}),         # 00:30 CEST on 3-30
              _frame(utc(2026, 3, 30, 7), {"bob": "meeting_room"})]          # 09:00 CEST on 3-30
    truth = GroundTruth(config={}, frames=frames, positions=positions)
    questions = generate_questions(truth, seed=1, per_type=2, tz=zone_name)
    assert {q.asked_at for q in questions} == {utc(2026, 3, 30, 7) + 600}
    times = {q.question: q.answer["time"] for q in questions if q.type == "time"}
    alice_yesterday = [t for text, t in times.items() if "Alice" in text and "yesterday" in text]
    alice_today = [t for text, t in times.items() if "Alice" in text and "today" in text]
    if zone_name == "Europe/Zurich":  # 00:30 CEST belongs to 3-30 although it is 3-29 in UTC
        assert alice_yesterday == [utc(2026, 3, 29, 13)] and alice_today == [utc(2026, 3, 29, 22, 30)]
    else:
        assert alice_yesterday == [utc(2026, 3, 29, 22, 30)] and alice_today == []
    # the 25 h day: a sighting at 23:30 CET on 10-25 is still on 10-25 ("yesterday" on 10-26)
    frames = [_frame(utc(2026, 10, 25, 22, 30), {"alice": "kitchen"}), _frame(utc(2026, 10, 26, 8), {"bob": "office"})]
    questions = generate_questions(GroundTruth(config={}, frames=frames, positions=positions), seed=1, tz=ZURICH)
    times = [q.answer["time"] for q in questions if q.type == "time" and "Alice" in q.question]
    phrases = [q.question for q in questions if q.type == "time" and "Alice" in q.question]
    assert times == [utc(2026, 10, 25, 22, 30)] and "yesterday" in phrases[0]
    durations = [q for q in questions if q.type == "duration" and "Alice" in q.question]
    assert durations and "yesterday" in durations[0].question


def test_a_clock_time_later_than_now_is_yesterday_at_that_wall_clock_time():
    """parse_time('15:00') asked at 10:00 on the day after the spring change is 15:00 local on
    the change day (13:00 UTC), not 24 h before today's 15:00 (an hour off)."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    from embodied_memory.agent.answer import parse_time
    zurich = ZoneInfo("Europe/Zurich")
    now = dt.datetime(2026, 3, 30, 10, 0, tzinfo=zurich).timestamp()
    t = parse_time("15:00", now, zurich)
    assert t == dt.datetime(2026, 3, 29, 13, 0, tzinfo=dt.timezone.utc).timestamp()
    assert parse_time("09:30", now, zurich) == dt.datetime(2026, 3, 30, 7, 30, tzinfo=dt.timezone.utc).timestamp()
    assert parse_time("12:75", now, zurich) is None
