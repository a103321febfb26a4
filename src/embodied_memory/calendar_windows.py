"""Calendar days and clock times in a time zone: the one place day windows are built.

A calendar day runs from one local midnight to the next, so it is 23 or 25 hours long on a
daylight-saving change (Europe/Zurich: 2026-03-29 has 23 h, 2026-10-25 has 25 h).  Every
window here is computed from aware local datetimes (``zoneinfo``), never as
``midnight + hours * 3600``: "yesterday at 3pm" asked on 2026-03-30 in Europe/Zurich is
15:00 CEST on 2026-03-29 (13:00 UTC), not 16:00.

Local times that do not exist (the skipped hour of a spring change) or exist twice (the
repeated hour of an autumn change) resolve with ``fold=0`` (PEP 495): a skipped 02:30 maps
to the instant 02:30 would have been before the change (03:30 after it), a repeated 02:30 to
its first occurrence.
"""
from __future__ import annotations

import calendar
import datetime as dt
from typing import Iterable, Optional, Union
from zoneinfo import ZoneInfo

TimeZone = Union[str, dt.tzinfo]
Window = tuple[float, float]

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
# (start hour, end hour) in local clock time of the day itself; hours >= 24 are on the next day.
# "lunchtime" is our convention for "at lunch(time)" / "over lunch": 12:00-14:00.
PARTS_OF_DAY: dict[str, tuple[int, int]] = {
    "morning": (6, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 30), "lunchtime": (12, 14),
}
# when a usual lunch is looked for (habits): local clock, minutes after midnight, both ends included
LUNCH_MINUTES = (11 * 60, 14 * 60 + 30)
UNIT_SECONDS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}


def check_timezone(name: str) -> None:
    try:
        ZoneInfo(name)
    except Exception as exc:  # noqa: BLE001 - ZoneInfoNotFoundError, ValueError
        raise ValueError(f"timezone: unknown time zone '{name}' (IANA name, e.g. Europe/Zurich)") from exc


def as_zone(tz: TimeZone) -> dt.tzinfo:
    """A tzinfo from an IANA name (``"Europe/Zurich"``) or a tzinfo."""
    return ZoneInfo(tz) if isinstance(tz, str) else tz


def local_date(t: float, tz: TimeZone) -> dt.date:
    """The calendar date of UNIX time ``t`` in ``tz``."""
    return dt.datetime.fromtimestamp(t, tz=as_zone(tz)).date()


def clock_time(day: dt.date, hour: int, minute: int, tz: TimeZone, second: float = 0.0) -> float:
    """UNIX time of local clock time ``hour:minute:second`` on ``day`` in ``tz``.  ``hour`` may be
    24 or more (the next day's clock: ``clock_time(d, 30, 0, tz)`` is 06:00 on ``d + 1``)."""
    extra_days, hour = divmod(int(hour), 24)
    whole = int(second)
    local = dt.datetime.combine(day + dt.timedelta(days=extra_days),
                                dt.time(hour, int(minute), whole, int(round((second - whole) * 1e6))),
                                tzinfo=as_zone(tz))
    return local.timestamp()


def day_window(day: dt.date, tz: TimeZone) -> Window:
    """[start, end) of calendar ``day`` in ``tz``: from its local midnight to the next one."""
    return clock_time(day, 0, 0, tz), clock_time(day + dt.timedelta(days=1), 0, 0, tz)


def day_window_at(t: float, tz: TimeZone, days_back: int = 0) -> Window:
    """The calendar day that contains ``t`` (or the one ``days_back`` days before it)."""
    return day_window(local_date(t, tz) - dt.timedelta(days=days_back), tz)


def days_window(first: dt.date, last: dt.date, tz: TimeZone) -> Window:
    """[start, end) of the calendar days ``first`` .. ``last`` (inclusive) in ``tz``: from the local
    midnight that starts ``first`` to the one that ends ``last`` (a weekend over a change is 47 or 49 h)."""
    return clock_time(first, 0, 0, tz), clock_time(last + dt.timedelta(days=1), 0, 0, tz)


def week_start(day: dt.date) -> dt.date:
    """The Monday of the (ISO, Monday-first) week that contains ``day``."""
    return day - dt.timedelta(days=day.weekday())


def week_window(day: dt.date, tz: TimeZone, weeks_back: int = 0) -> Window:
    """[start, end) of the Monday-to-Sunday week that contains ``day`` (or the one ``weeks_back``
    weeks before it), from local Monday 00:00 to the next local Monday 00:00."""
    monday = week_start(day) - dt.timedelta(weeks=weeks_back)
    return days_window(monday, monday + dt.timedelta(days=6), tz)


def part_of_day_window(day: dt.date, part: str, tz: TimeZone) -> Window:
    """"morning" 06-12, "afternoon" 12-18, "evening" 18-24, "night" 18-06 (into the next day),
    "lunchtime" 12-14 (``PARTS_OF_DAY``)."""
    try:
        first, last = PARTS_OF_DAY[part]
    except KeyError:
        raise ValueError(f"part of day: unknown {part!r} ({', '.join(PARTS_OF_DAY)})") from None
    return clock_time(day, first, 0, tz), clock_time(day, last, 0, tz)


def clock_window(day: dt.date, hour: int, minute: int, tz: TimeZone, margin_s: float = 900.0) -> Window:
    """``margin_s`` either side of local ``hour:minute`` on ``day`` ("at 3pm": 14:45-15:15)."""
    t = clock_time(day, hour, minute, tz)
    return t - margin_s, t + margin_s


def recent_window(now: float, n: float, unit: str, tz: TimeZone) -> Window:
    """"the last N minutes/hours/days" up to ``now``: elapsed time for seconds, minutes and hours;
    for days the same local clock time N calendar days earlier (a day back over a change is 23
    or 25 h).  Never starts before the UNIX epoch."""
    if unit == "day":
        local = dt.datetime.fromtimestamp(now, tz=as_zone(tz))
        try:  # same-zone aware arithmetic is wall-clock arithmetic; timestamp() re-resolves the offset
            return max(0.0, (local - dt.timedelta(days=n)).timestamp()), now
        except (OverflowError, ValueError):  # before year 1
            return 0.0, now
    if unit not in UNIT_SECONDS:
        raise ValueError(f"unit: unknown {unit!r} (second | minute | hour | day)")
    return max(0.0, now - n * UNIT_SECONDS[unit]), now


def weekday_date(weekday: Union[str, int], today: dt.date) -> dt.date:
    """The most recent ``weekday`` (name or 0 = Monday) on or before ``today``."""
    index = WEEKDAYS.index(weekday.lower()) if isinstance(weekday, str) else int(weekday)
    return today - dt.timedelta(days=(today.weekday() - index) % 7)



def month_day_date(month: int, day: int, today: dt.date, year: Optional[int] = None) -> Optional[dt.date]:
    """The date ``day`` of ``month`` (1 = January) in ``year``; without a year the most recent one on
    or before ``today`` (February 29: the last leap year's).  None when no such date exists
    (February 30, April 31, month 13)."""
    if year is not None:
        try:
            return dt.date(year, month, day)
        except ValueError:
            return None
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(2024, month)[1]):  # 2024: a leap year
        return None
    for y in range(today.year, max(0, today.year - 8), -1):
        try:
            d = dt.date(y, month, day)
        except ValueError:  # February 29 of a common year
            continue
        if d <= today:
            return d
    return None


def day_of_month_date(day: int, today: dt.date) -> Optional[dt.date]:
    """"The 31st": ``day`` of this month when that is not after ``today``, else of the previous
    month; None when that month has no such day (asked in May, "the 31st" is no date)."""
    first = today.replace(day=1)
    month = first if day <= today.day else (first - dt.timedelta(days=1)).replace(day=1)
    try:
        return month.replace(day=day)
    except ValueError:
        return None


def latest_clock_time(days: Iterable[dt.date], minutes: Iterable[int], now: float,
                      tz: TimeZone) -> tuple[dt.date, int]:
    """Of the local clock times ``minutes`` (after midnight; 1440 and more are on the next day) on
    each of ``days``, the (day, minutes) of the latest at or before UNIX time ``now``; when all
    are later, the earliest."""
    minutes = list(minutes)
    candidates = sorted((clock_time(d, m // 60, m % 60, tz), d, m) for d in days for m in minutes)
    past = [c for c in candidates if c[0] <= now]
    _, day, minute = past[-1] if past else candidates[0]
    return day, minute
