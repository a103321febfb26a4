"""The llm planner on every benchmark v2 question type (DEV-style wordings), against a scripted model.

The robot is in Europe/Zurich; the week runs Tue 2026-03-24 .. Mon 2026-03-30 (asked at 17:00 on
Monday); Sunday 2026-03-29 is a daylight-saving change day (23 h).  For each type the scripted
model makes the calls a good model would make, with local ISO times or dates, then answers.
Checked: (a) the store got the window in UNIX time the robot's zone gives, (b) the typed answer,
(c) the system prompt names the local time, zone and dates and the needed tools are offered,
(d) the tool results the model read hold the facts the answer needs.
"""
from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from typing import Any, Callable
from zoneinfo import ZoneInfo

import pytest

from embodied_memory.agent import history_pages
from embodied_memory.agent import tools as tools_module
from embodied_memory.agent.prompts import SYSTEM
from embodied_memory.agent.query_agent import AgentParams, QueryAgent
from embodied_memory.agent.tools import StoreMemoryClient, ToolBox
from embodied_memory.store import open_store

from scripted_llm import ScriptedLLM, content, tool_call
from store_fixtures import make_params, obs, unit

ZONE = "Europe/Zurich"
TZ = ZoneInfo(ZONE)
PLACES = {"office": (5, 2), "kitchen": (1, 1), "meeting_room": (20, 5), "entrance": (0, -5), "lounge": (12, 8)}


def local(day: int, hour: int, minute: int = 0, second: int = 0) -> float:
    """UNIX time of a local clock time in March 2026, Europe/Zurich."""
    return dt.datetime(2026, 3, day, hour, minute, second, tzinfo=TZ).timestamp()


NOW = local(30, 17)
NOW_ISO = "2026-03-30T17:00:00+02:00"


def day(d: int) -> tuple[float, float]:
    """The store window of a whole local day (the last instant before the next midnight; today: now)."""
    return local(d, 0), min(math.nextafter(local(d + 1, 0), -math.inf), NOW)


# (day, hour, minute, waypoint, persons)
SIGHTINGS = [
    (24, 8, 5, "office", ["alice"]), (24, 8, 30, "office", ["alice"]), (24, 9, 0, "office", ["bob"]),
    (24, 11, 0, "office", ["alice"]), (24, 12, 10, "kitchen", ["alice"]), (24, 12, 15, "kitchen", ["alice", "bob"]),
    (24, 12, 35, "kitchen", ["alice"]),
    (25, 8, 10, "office", ["alice"]), (25, 12, 20, "kitchen", ["alice", "carol"]),
    (27, 8, 0, "office", ["alice"]), (27, 10, 0, "office", ["bob"]), (27, 12, 5, "kitchen", ["alice"]),
    (28, 10, 0, "office", ["alice"]),
    (29, 1, 30, "entrance", []),  # CET, before the change
    (29, 9, 5, "entrance", ["carol"]), (29, 10, 0, "office", ["carol", "dave"]), (29, 11, 0, "lounge", ["bob"]),
    (30, 8, 15, "office", ["alice"]), (30, 9, 40, "entrance", ["bob"]),
    (30, 10, 0, "meeting_room", ["alice", "bob"]), (30, 10, 10, "meeting_room", ["alice", "bob"]),
    (30, 10, 20, "meeting_room", ["alice"]), (30, 10, 40, "meeting_room", ["alice", "bob"]),
    (30, 12, 30, "kitchen", ["alice", "carol"]), (30, 12, 40, "kitchen", []), (30, 12, 50, "kitchen", []),
    *[(30, 13, m, "kitchen", []) for m in range(0, 60, 2)],   # 30 later frames: a plain history misses 12:30
    (30, 14, 0, "meeting_room", ["alice"]), (30, 14, 15, "meeting_room", ["alice"]),
    (30, 15, 10, "entrance", ["bob"]), (30, 16, 30, "office", ["alice"]),
    (30, 17, 30, "office", ["bob"]),  # after the question: never seen by any tool
]
WEEK = [f"2026-03-{d}" for d in range(24, 31)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("week")
    s = open_store(make_params(path, "sqlite_faiss", timezone=ZONE))
    s.insert([obs(i, local(d, h, m), f"{', '.join(people) or 'nobody'} at the {wp}", *PLACES[wp], wp, people,
                  episode=f"2026-03-{d}", image=unit(i)) for i, (d, h, m, wp, people) in enumerate(SIGHTINGS)])
    yield s
    s.close()


class RecordingMemory(StoreMemoryClient):
    """The store, recording every call the agent's tools make (tool name, arguments)."""

    def __init__(self, store):
        super().__init__(store)
        self.calls: list[tuple[str, dict]] = []

    def call(self, tool: str, arguments: dict) -> Any:
        self.calls.append((tool, dict(arguments)))
        return super().call(tool, arguments)


def ask(store, script: list[dict], question: str):
    memory = RecordingMemory(store)
    with ScriptedLLM(script) as llm:
        agent = QueryAgent(memory, AgentParams(planner="llm", llm_base_url=llm.base_url, llm_model="m", timezone=ZONE))
        ans = agent.ask(question, as_of=NOW)
    return ans, memory.calls, llm.requests


@dataclass
class Case:
    type: str
    question: str
    calls: list[tuple[str, dict]]            # the model's tool calls, all in its first turn
    answer: dict                             # the model's final JSON answer
    store: list[tuple[str, dict]]            # store calls expected (tool, a subset of its arguments)
    expect: dict                             # Answer fields expected
    sees: Callable[[list[Any]], bool]        # the tool results (parsed), in call order
    status: str = "ok"
    no_value: bool = False                   # the answer must carry no value at all

    @property
    def id(self) -> str:
        return self.type


def window(tool: str, t: tuple[float, float], **kw) -> tuple[str, dict]:
    return tool, {"t_start": t[0], "t_end": t[1], **kw}


def summary_of(results: list[Any], key: str, value: str) -> dict:
    return next(p for p in results[0][key] if p.get("waypoint", p.get("person")) == value)


def persons(rows: list[dict]) -> set[str]:
    return {p["person"] for p in rows}


CASES = [
    Case("position", "Where did you last see Alice?", [("person_observations", {"person": "alice"})],
         {"type": "position", "text": "In the office at 16:30.", "position": [5, 2, 0], "waypoint": "office",
          "time": "2026-03-30T16:30:00"},
         [window("person_observations", (0.0, NOW), person="alice", order="newest")],
         {"type": "position", "position": [5.0, 2.0, 0.0], "waypoint": "office", "time": local(30, 16, 30)},
         lambda r: r[0][0]["time"] == "2026-03-30T16:30:00+02:00" and r[0][0]["waypoint"] == "office"),
    Case("where_now", "Where is Bob right now?", [("person_observations", {"person": "bob"})],
         {"type": "position", "text": "At the entrance (15:10).", "position": [0, -5, 0], "waypoint": "entrance",
          "time": "2026-03-30T15:10:00"},
         [window("person_observations", (0.0, NOW), person="bob")],
         {"type": "position", "waypoint": "entrance", "position": [0.0, -5.0, 0.0], "time": local(30, 15, 10)},
         lambda r: r[0][0]["time"] == "2026-03-30T15:10:00+02:00" and "17:30" not in json.dumps(r)),
    Case("time", "When did you last see Bob yesterday?", [("person_observations", {"person": "bob",
                                                                                   "date": "2026-03-29"})],
         {"type": "time", "text": "At 11:00 in the lounge.", "time": "2026-03-29T11:00:00"},
         [window("person_observations", day(29), person="bob")],
         {"type": "time", "time": local(29, 11), "time_iso": "2026-03-29T11:00:00+02:00"},
         lambda r: [x["time"] for x in r[0]] == ["2026-03-29T11:00:00+02:00"]),
    Case("first_seen", "When did you first see Carol?", [("person_observations", {"person": "carol",
                                                                                 "order": "oldest"})],
         {"type": "time", "text": "On Wednesday at 12:20.", "time": "2026-03-25T12:20:00"},
         [window("person_observations", (0.0, NOW), person="carol", order="oldest")],
         {"type": "time", "time": local(25, 12, 20), "time_iso": "2026-03-25T12:20:00+01:00"},
         lambda r: r[0][0]["time"] == "2026-03-25T12:20:00+01:00"),
    Case("arrival", "When did Carol arrive yesterday?",   # the DST day, as local ISO start / end
         [("person_observations", {"person": "carol", "start": "2026-03-29T00:00:00", "end": "2026-03-29T23:59:59",
                                   "order": "oldest"})],
         {"type": "time", "text": "At 09:05.", "time": "2026-03-29T09:05:00"},
         [window("person_observations", (local(29, 0), local(29, 23, 59, 59)), person="carol", order="oldest")],
         {"type": "time", "time": local(29, 9, 5)},
         lambda r: r[0][0]["time"] == "2026-03-29T09:05:00+02:00"),
    Case("departure", "When did Bob leave today?", [("person_observations", {"person": "bob", "date": "2026-03-30"})],
         {"type": "time", "text": "At 15:10.", "time": "2026-03-30T15:10:00"},
         [window("person_observations", day(30), person="bob", order="newest")],
         {"type": "time", "time": local(30, 15, 10)},
         lambda r: r[0][0]["time"] == "2026-03-30T15:10:00+02:00"),
    Case("binary", "Was Alice in the kitchen on Friday?",
         [("person_observations", {"person": "alice", "date": "2026-03-27", "summary": True})],
         {"type": "binary", "binary": "yes", "text": "Yes, at 12:05."},
         [window("person_observations", day(27), person="alice", order="oldest")],
         {"type": "binary", "binary": "yes"},
         lambda r: summary_of(r, "places", "kitchen")["visits"] == {"2026-03-27": "12:05-12:05"}),
    Case("persons", "Who was in the kitchen today?",
         [("waypoint_observations", {"waypoint": "kitchen", "date": "2026-03-30", "summary": True})],
         {"type": "persons", "persons": ["alice", "carol"], "text": "Alice and Carol."},
         [window("waypoint_observations", day(30), waypoint_id="kitchen", order="oldest")],
         {"type": "persons", "persons": ["alice", "carol"]},
         lambda r: persons(r[0]["persons"]) == {"alice", "carol"} and r[0]["observations"] == 33),
    Case("duration", "How long was Alice in the meeting room today?",
         [("person_observations", {"person": "alice", "date": "2026-03-30", "summary": True})],
         {"type": "duration", "duration": 55, "waypoint": "meeting_room", "text": "About 55 minutes."},
         [window("person_observations", day(30), person="alice")],
         {"type": "duration", "duration_minutes": 55.0, "waypoint": "meeting_room"},
         lambda r: summary_of(r, "places", "meeting_room")["minutes"] == 55.0
         and summary_of(r, "places", "meeting_room")["visits"] == {"2026-03-30": "10:00-10:40 14:00-14:15"}),
    Case("who_first", "Who arrived first today, Alice or Bob?", [("persons_per_day", {"date": "2026-03-30"})],
         {"type": "persons", "persons": ["alice"], "text": "Alice came first, at 08:15."},
         [window("persons_between", day(30))],
         {"type": "persons", "persons": ["alice"]},
         lambda r: {p["person"]: p["first_seen"] for p in r[0]} == {
             "alice": "2026-03-30T08:15:00+02:00", "bob": "2026-03-30T09:40:00+02:00",
             "carol": "2026-03-30T12:30:00+02:00"}),
    Case("with_whom", "Who was Alice with today?",
         [("person_observations", {"person": "alice", "date": "2026-03-30", "summary": True})],
         {"type": "persons", "persons": ["bob", "carol"], "text": "With Bob and Carol."},
         [window("person_observations", day(30), person="alice")],
         {"type": "persons", "persons": ["bob", "carol"]},
         lambda r: persons(r[0]["seen_with"]) == {"bob", "carol"}),
    Case("together", "Were Carol and Dave together yesterday?",
         [("person_observations", {"person": "carol", "date": "2026-03-29", "summary": True})],
         {"type": "binary", "binary": "yes", "text": "Yes, in the office at 10:00."},
         [window("person_observations", day(29), person="carol")],
         {"type": "binary", "binary": "yes"},
         lambda r: r[0]["seen_with"] == [{"person": "dave", "sightings": 1, "first_seen": "2026-03-29T10:00:00+02:00",
                                          "waypoint": "office"}]),
    Case("count", "How many people did you see yesterday?", [("persons_per_day", {"date": "2026-03-29"})],
         {"type": "count", "count": 3, "text": "3 people."},
         [window("persons_between", day(29))],
         {"type": "count", "count": 3},
         lambda r: persons(r[0]) == {"bob", "carol", "dave"}),
    Case("count_in_room", "How many people were in the meeting room today?",
         [("waypoint_observations", {"waypoint": "meeting_room", "date": "2026-03-30", "summary": True})],
         {"type": "count", "count": 2, "persons": ["alice", "bob"], "text": "2 people: Alice and Bob."},
         [window("waypoint_observations", day(30), waypoint_id="meeting_room")],
         {"type": "count", "count": 2, "persons": ["alice", "bob"]},
         lambda r: persons(r[0]["persons"]) == {"alice", "bob"}),
    Case("absent_days", "On which days this week did you not see Bob?", [("persons_per_day", {"date": WEEK})],
         {"type": "days", "days": ["2026-03-25", "2026-03-28"], "text": "On Wednesday and Saturday."},
         [window("persons_between", day(int(d[-2:]))) for d in WEEK],
         {"type": "days", "days": ["2026-03-25", "2026-03-28"]},
         lambda r: [d for d, rows in r[0].items() if rows and "bob" not in persons(rows)] == ["2026-03-25",
                                                                                             "2026-03-28"]),
    Case("first_time", "Who did you see for the first time yesterday?", [("persons_per_day", {"date": "2026-03-29"})],
         {"type": "persons", "persons": ["dave"], "text": "Dave."},
         [window("persons_between", day(29)),
          ("people", {"before": math.nextafter(local(29, 0), -math.inf)})],
         {"type": "persons", "persons": ["dave"]},
         lambda r: [p["person"] for p in r[0] if p.get("first_time")] == ["dave"]),
    Case("habit_place", "Where does Alice usually work?",
         [("person_observations", {"person": "alice", "start": "2026-03-24", "summary": True})],
         {"type": "waypoint", "waypoint": "office", "text": "In the office."},
         [window("person_observations", (local(24, 0), NOW), person="alice")],
         {"type": "waypoint", "waypoint": "office"},
         lambda r: summary_of(r, "places", "office")["days"] == 5 and summary_of(r, "places", "kitchen")["days"] == 4
         and r[0]["days"] == ["2026-03-24", "2026-03-25", "2026-03-27", "2026-03-28", "2026-03-30"]),
    Case("habit_time", "When does Alice usually have lunch?",
         [("person_observations", {"person": "alice", "start": "2026-03-24T00:00:00", "summary": True})],
         {"type": "time", "time": "12:15", "text": "Usually around 12:15."},
         [window("person_observations", (local(24, 0), NOW), person="alice")],
         {"type": "time", "time": local(30, 12, 15)},
         lambda r: summary_of(r, "places", "kitchen")["visits"] == {
             "2026-03-24": "12:10-12:35", "2026-03-25": "12:20-12:20", "2026-03-27": "12:05-12:05",
             "2026-03-30": "12:30-12:30"}),
    # unanswerable: the right answer says so and carries no value
    Case("unanswerable_absent_day", "When did Alice arrive yesterday?",
         [("person_observations", {"person": "alice", "date": "2026-03-29", "order": "oldest"})],
         {"type": "none", "text": "I have not seen Alice yesterday."},
         [window("person_observations", day(29), person="alice", order="oldest")],
         {"type": "text", "text": "I have not seen Alice yesterday."},
         lambda r: r[0] == [], status="no_answer", no_value=True),
    Case("unanswerable_never_seen", "Where did you last see Zoe?", [("person_observations", {"person": "Zoe"})],
         # a model that also echoes a value: declining drops it
         {"type": "none", "text": "I have never seen Zoe.", "position": [0, 0, 0], "persons": ["Zoe"]},
         [window("person_observations", (0.0, NOW), person="Zoe")],
         {"type": "text", "text": "I have never seen Zoe."},
         lambda r: "unknown person" in r[0]["error"], status="no_answer", no_value=True),
    Case("unanswerable_unobserved", "When does Dave usually have lunch?",
         [("person_observations", {"person": "dave", "start": "2026-03-24", "summary": True})],
         {"type": "text", "text": "I don't know: I have never seen Dave having lunch."},
         [window("person_observations", (local(24, 0), NOW), person="dave")],
         {"type": "text", "text": "I don't know: I have never seen Dave having lunch."},
         lambda r: [p["waypoint"] for p in r[0]["places"]] == ["office"], no_value=True),
]
VALUE_FIELDS = {"binary": "", "position": None, "time": None, "duration_minutes": None, "persons": [],
                "waypoint": "", "count": None, "days": []}


def test_every_question_type_has_a_case():
    from embodied_memory.sim.questions_v2 import PEOPLE_TYPES
    covered = {c.type.split("_in_room")[0] for c in CASES}
    assert set(PEOPLE_TYPES) <= covered and any(c.type.startswith("unanswerable") for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_question_type(store, case: Case):
    script = [{"tool_calls": [tool_call(name, args, f"call_{i}")["tool_calls"][0]
                              for i, (name, args) in enumerate(case.calls)]},
              content(json.dumps(case.answer))]
    ans, store_calls, requests = ask(store, script, case.question)

    # (a) the store got the windows the robot's zone gives
    for tool, expected in case.store:
        assert any(name == tool and all(
            math.isclose(args.get(k), v, abs_tol=1e-6) if isinstance(v, float) else args.get(k) == v
            for k, v in expected.items()) for name, args in store_calls), (tool, expected, store_calls)
    # (b) the typed answer
    assert ans.status == case.status and ans.planner == "llm", ans.summary()
    for key, value in case.expect.items():
        got = getattr(ans, key)
        assert (math.isclose(got, value, abs_tol=1e-6) if isinstance(value, float) and got is not None
                else got == value), (key, got, value)
    if case.no_value:
        assert {k: getattr(ans, k) for k in VALUE_FIELDS} == VALUE_FIELDS and ans.text == case.expect["text"]
    # (c) the prompt names the local time, zone and dates; the tools the type needs are offered
    first = requests[0]
    system = first["messages"][0]["content"]
    assert first["messages"][0]["role"] == "system"
    assert NOW_ISO in system and ZONE in system and "Mon 2026-03-30 (today), Sun 2026-03-29" in system
    assert {name for name, _ in case.calls} <= {t["function"]["name"] for t in first["tools"]}
    # (d) what the model read
    results = [json.loads(m["content"]) for m in requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(case.calls) and case.sees(results), results


def toolbox(store, tz=ZONE) -> tuple[ToolBox, RecordingMemory]:
    memory = RecordingMemory(store)
    return ToolBox(memory, NOW, ZoneInfo(tz)), memory


def test_a_bare_date_as_end_is_the_end_of_that_day_and_date_wins(store):
    box, memory = toolbox(store)
    box.run("person_observations", {"person": "carol", "start": "2026-03-29", "end": "2026-03-29"})
    box.run("person_observations", {"person": "carol", "date": "2026-03-29", "start": "2026-03-01"})
    box.run("person_observations", {"person": "carol", "date": "2026-03-29T08:00:00", "summary": "false"})
    (_, by_dates), (_, by_day), (_, by_datetime) = memory.calls
    assert (by_dates["t_start"], by_dates["t_end"]) == day(29) == (by_day["t_start"], by_day["t_end"])
    assert (by_datetime["t_start"], by_datetime["t_end"], by_datetime["limit"]) == (*day(29), 30)  # rows, not a summary
    assert day(29)[1] - day(29)[0] < 23 * 3600   # the DST day: 23 hours
    assert "error" in box.run("person_observations", {"person": "carol", "date": "29.03.2026"})


def test_result_times_are_in_the_robots_zone_whatever_the_store_renders(tmp_path):
    s = open_store(make_params(tmp_path, "sqlite_faiss", timezone="UTC"))
    s.insert([obs(0, local(29, 9, 5), "carol at the entrance", 0, -5, "entrance", ["carol"], image=unit(0))])
    try:
        box, _ = toolbox(s)
        rows = box.run("person_observations", {"person": "carol"})
        state = box.run("current_state", {})
        per_day = box.run("persons_per_day", {"date": "2026-03-29"})
    finally:
        s.close()
    assert rows[0]["time"] == "2026-03-29T09:05:00+02:00"
    assert state["people"][0]["last_seen"] == "2026-03-29T09:05:00+02:00"
    assert per_day[0]["first_seen"] == "2026-03-29T09:05:00+02:00" and per_day[0]["first_time"] is True


def test_a_summary_pages_through_the_whole_window(store, monkeypatch):
    monkeypatch.setattr(history_pages, "PAGE", 5)   # 5 + 9 * 4 new rows in 10 pages
    box, memory = toolbox(store)
    result = box.run("waypoint_observations", {"waypoint": "kitchen", "date": "2026-03-30", "summary": True})
    assert persons(result["persons"]) == {"alice", "carol"} and result["observations"] == 33
    assert result["first"] == "2026-03-30T12:30:00+02:00" and result["last"] == "2026-03-30T13:58:00+02:00"
    assert len(memory.calls) > 8 and "truncated" not in result
    monkeypatch.setattr(tools_module, "SUMMARY_PAGES", 2)
    assert box.run("waypoint_observations", {"waypoint": "kitchen", "date": "2026-03-30", "summary": True})[
        "truncated"] is True


def test_a_plain_history_is_capped_so_the_prompt_points_to_summaries(store):
    box, _ = toolbox(store)
    rows = box.run("waypoint_observations", {"waypoint": "kitchen", "date": "2026-03-30"})
    assert len(rows) == tools_module.HISTORY_ROWS and not any(r.get("persons") for r in rows)
    assert "waypoint_observations summary=true" in SYSTEM


def test_persons_per_day_takes_at_most_a_week_of_dates(store):
    box, _ = toolbox(store)
    assert "1 to 8 dates" in box.run("persons_per_day", {"date": WEEK * 2})["error"]


def test_a_summary_finds_the_identity_behind_a_display_name(tmp_path):
    s = open_store(make_params(tmp_path, "sqlite_faiss", timezone=ZONE))
    s.insert([obs(0, local(30, 9), "", *PLACES["office"], "office", ["person_0001", "person_0002"], image=unit(0)),
              obs(1, local(30, 10), "", *PLACES["office"], "office", ["person_0001", "person_0002"], image=unit(1))])
    s.name_identity("person_0002", "Erin")
    try:
        result = toolbox(s)[0].run("person_observations", {"person": "erin", "summary": True})
    finally:
        s.close()
    assert result["person"] == "person_0002" and result["sightings"] == 2
    assert result["seen_with"] == [{"person": "person_0001", "sightings": 2, "first_seen": "2026-03-30T09:00:00+02:00",
                                    "waypoint": "office"}]


def test_a_long_summary_keeps_the_visits_of_the_most_seen_places(store, monkeypatch):
    monkeypatch.setattr(tools_module, "SUMMARY_CHARS", 860)   # 895 characters with every place's visits
    monkeypatch.setattr(tools_module, "VISITS_PER_DAY", 1)
    result = toolbox(store)[0].run("person_observations", {"person": "alice", "start": "2026-03-24", "summary": True})
    office, kitchen, meeting = result["places"]
    assert [p["waypoint"] for p in result["places"]] == ["office", "kitchen", "meeting_room"]
    assert office["visits"]["2026-03-24"] == "08:05-08:30 +1" and "visits" in kitchen and "visits" not in meeting
    assert len(tools_module.result_text({k: v for k, v in result.items() if k != "window"})) <= 860


def test_declining_with_empty_text_still_says_so(store):
    ans, _, _ = ask(store, [content('{"type": "none"}')], "Where did you last see Quentin?")
    assert ans.status == "no_answer" and ans.text == "I don't know." and ans.position is None
