"""The inspector's reader on long memories: days and hours counted in SQL per quarter hour are
the local days and hours (a zone 5:45 off UTC, a DST change), and the map draws at most
MAP_POINTS of each kind, evenly over time, while saying how many there are."""
import datetime as dt
from zoneinfo import ZoneInfo

from embodied_memory.inspector.reader import MemoryReader
from embodied_memory.store import open_store

from store_fixtures import make_params, obs


def _times(zone: str, start: dt.datetime, minutes: int, step_min: int) -> list[float]:
    t0 = start.replace(tzinfo=ZoneInfo(zone)).timestamp()
    return [t0 + 60.0 * m for m in range(0, minutes, step_min)]


def _reader(tmp_path, times: list[float], zone: str) -> MemoryReader:
    store = open_store(make_params(tmp_path, "sqlite_faiss", timezone=zone))
    records = [obs(i, t, "a corridor", x=float(i), y=0.0, wp="corridor", people=["alice"] if i % 2 else ())
               for i, t in enumerate(times)]
    for record in records:
        for sighting in record.people:          # where they stood: the map draws sightings with a position
            sighting.position = (record.pose.x + 1.0, 0.5, 0.0)
    store.insert(records)
    store.close()
    return MemoryReader(tmp_path / "store", zone)


def _local_counts(times, zone):
    counts = {}
    for t in times:
        local = dt.datetime.fromtimestamp(t, ZoneInfo(zone))
        counts.setdefault(local.date().isoformat(), [0] * 24)[local.hour] += 1
    return counts


def test_days_and_hours_are_local_in_a_zone_off_by_a_quarter_hour_and_across_dst(tmp_path):
    # Kathmandu is UTC+5:45: a UTC hour bucket would put 23:50 local into the next day
    kathmandu = _times("Asia/Kathmandu", dt.datetime(2026, 3, 10, 22, 0), 4 * 60, 10)
    reader = _reader(tmp_path / "k", kathmandu, "Asia/Kathmandu")
    assert {d["day"]: d["hours"] for d in reader.days()} == _local_counts(kathmandu, "Asia/Kathmandu")
    # the night clocks go forward in Zurich: 02:00 is skipped, the day has 23 hours
    zurich = _times("Europe/Zurich", dt.datetime(2026, 3, 28, 23, 0), 5 * 60, 15)
    reader = _reader(tmp_path / "z", zurich, "Europe/Zurich")
    assert {d["day"]: d["hours"] for d in reader.days()} == _local_counts(zurich, "Europe/Zurich")
    day = reader.days()[-1]["day"]
    ident = reader.identity("alice")
    per_day = dict(ident["per_day"])
    assert per_day == {d: n for d, n in _count_sightings(zurich, "Europe/Zurich").items()}
    rates = reader.ingest_rates()
    assert {r["hour"] for r in rates} == {h for h, n in enumerate(_local_counts(zurich, "Europe/Zurich")[day]) if n}


def _count_sightings(times, zone):
    out = {}
    for i, t in enumerate(times):
        if i % 2:
            day = dt.datetime.fromtimestamp(t, ZoneInfo(zone)).date().isoformat()
            out[day] = out.get(day, 0) + 1
    return out


def test_the_map_draws_at_most_its_limit_evenly_and_counts_them_all(tmp_path):
    times = _times("UTC", dt.datetime(2026, 3, 10, 8, 0), 500, 1)
    reader = _reader(tmp_path, times, "UTC")
    points = reader.map_points(limit=120)
    assert points["counts"] == {"observations": 500, "sightings": 250}
    drawn = points["observations"]
    assert 118 <= len(drawn) <= 120 and 118 <= len(points["sightings"]) <= 120
    assert [o["t"] for o in drawn] == sorted(o["t"] for o in drawn)
    assert drawn[0]["t"] == times[0] and drawn[-1]["t"] == times[-1]       # the whole span, the newest included
    gaps = sorted({round(b["t"] - a["t"]) for a, b in zip(drawn, drawn[1:-1])})     # the newest: added
    assert gaps[-1] - gaps[0] <= 60                                         # evenly: one row more or less
    path = reader.map_points(person="alice", limit=120)["path"]
    assert 118 <= len(path) <= 120 and all(p["person"] == "alice" for p in path)
    assert path[-1]["t"] == times[-1]                                       # where she was last seen
    assert len(reader.map_points(limit=1000)["observations"]) == 500        # under the limit: every one
    assert len(reader.map_points(limit=500)["observations"]) == 500         # at it, too
