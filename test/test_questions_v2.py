"""Benchmark v2 questions (sim/truth.py, sim/questions_v2.py, sim/phrasings, sim/scoring.py)
on a hand-built three-day ground truth (Monday 2026-03-09 .. Wednesday, UTC): every answer
checked here was computed by hand from the frames and stays below."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from embodied_memory.sim.episode import GroundTruth
from embodied_memory.sim.questions_v2 import (OBJECT_TYPES, SLOTS, TYPES, UNANSWERABLE, Question,
                                              generate_questions, load_phrasings, template_slots)
from embodied_memory.sim.scoring import Score, score, summarize
from embodied_memory.sim.truth import observed_truth

REPO = Path(__file__).resolve().parents[1]
DAY0 = dt.datetime(2026, 3, 9, tzinfo=dt.timezone.utc).timestamp()     # Monday 00:00 UTC
MON, TUE, WED = dt.date(2026, 3, 9), dt.date(2026, 3, 10), dt.date(2026, 3, 11)
SPOT = {"open_office": (-10.0, 8.0), "lab": (4.0, 8.0), "kitchen": (-18.0, 8.0), "reception": (0.0, 0.5)}


def at(day: int, hour: float, minute: float = 0.0) -> float:
    return DAY0 + day * 86400 + hour * 3600 + minute * 60


def burst(day, hour, minute, room, people, n, step_s=60.0, objects=None):
    """``n`` frames ``step_s`` apart with the robot in ``room`` and ``people`` in view there."""
    out = []
    for k in range(n):
        seen = {p: {"u": 320.0, "room": room, "position": [SPOT[room][0] + i, SPOT[room][1]]}
                for i, p in enumerate(people)}
        out.append({"t": at(day, hour, minute) + k * step_s, "robot": [0.0, 0.0, 0.0], "waypoint": room,
                    "room": room, "visible": list(people), "seen": seen, "objects": dict(objects or {})})
    return out


def stay(person, day, room, start, end, kind="desk"):
    return {"person": person, "day": day, "room": room, "start": at(day, *start), "end": at(day, *end),
            "kind": kind, "position": list(SPOT[room])}


def make_truth(with_stays: bool = True) -> GroundTruth:
    frames = (
        burst(0, 9, 0, "open_office", ["alice"], 5)            # alice 09:00-09:04
        + burst(0, 9, 30, "lab", ["bob", "carol"], 3)          # bob + carol 09:30-09:32
        + burst(0, 11, 0, "kitchen", [], 10, objects={"red box": "kitchen"})
        + burst(0, 12, 10, "kitchen", ["alice", "bob"], 5)     # lunch 12:10-12:14
        + burst(0, 15, 0, "open_office", ["alice"], 3)         # alice 15:00-15:02
        + burst(1, 9, 10, "open_office", ["alice"], 3)         # Tuesday: no bob
        + burst(1, 10, 0, "lab", ["carol"], 3)                 # carol 10:00-10:02
        + burst(1, 10, 30, "reception", ["victor"], 2)         # a visitor, first seen
        + burst(1, 11, 0, "lab", ["carol"], 2)                 # carol 11:00-11:01 (same desk stay)
        + burst(1, 11, 30, "lab", [], 10, objects={"red box": "lab"})
        + burst(1, 12, 30, "kitchen", ["alice"], 4)            # lunch 12:30
        + burst(2, 8, 50, "open_office", ["alice"], 3)         # Wednesday
        + burst(2, 9, 40, "lab", ["bob", "carol"], 4)
        + burst(2, 12, 20, "kitchen", ["alice", "carol"], 3)   # lunch 12:20
        + burst(2, 14, 0, "open_office", ["alice"], 6)
        + burst(2, 16, 0, "lab", ["bob"], 2)                   # the last frame: Wed 16:01
    )
    truth = GroundTruth(config={"world": "building", "days": 3}, frames=frames)
    truth.rooms = {r: {"label": r.replace("_", " "), "bounds": [0, 1, 0, 1], "shared": r in ("kitchen", "reception")}
                   for r in ("kitchen", "open_office", "lab", "reception", "north_corridor")}
    truth.people = {"alice": {"visitor": False, "home": "open_office"}, "bob": {"visitor": False, "home": "lab"},
                    "carol": {"visitor": False, "home": "lab"}, "victor": {"visitor": True, "home": ""},
                    "dave": {"visitor": False, "home": "lab"}}               # dave is never seen
    truth.day_starts = [DAY0 + d * 86400 for d in range(3)]
    truth.objects = [{"red box": {"room": "kitchen", "position": [-17.0, 9.0]}},
                     {"red box": {"room": "lab", "position": [5.0, 9.0]}},
                     {"red box": {"room": "lab", "position": [5.0, 9.0]}}]
    truth.stays = [] if not with_stays else [
        stay("alice", 0, "open_office", (8, 30), (12, 0)), stay("alice", 0, "kitchen", (12, 0), (12, 45), "lunch"),
        stay("alice", 0, "open_office", (12, 45), (17, 0)),
        stay("bob", 0, "lab", (9, 0), (12, 5)), stay("bob", 0, "kitchen", (12, 5), (12, 40), "lunch"),
        stay("bob", 0, "lab", (12, 40), (17, 30)), stay("carol", 0, "lab", (9, 15), (17, 0)),
        stay("alice", 1, "open_office", (8, 45), (12, 20)), stay("alice", 1, "kitchen", (12, 20), (13, 0), "lunch"),
        stay("alice", 1, "open_office", (13, 0), (17, 0)), stay("carol", 1, "lab", (9, 0), (17, 0)),
        stay("victor", 1, "reception", (10, 20), (10, 40), "visit"),
        stay("alice", 2, "open_office", (8, 40), (10, 0)), stay("alice", 2, "lab", (10, 0), (10, 30), "meeting"),
        stay("alice", 2, "open_office", (10, 30), (12, 15)), stay("alice", 2, "kitchen", (12, 15), (12, 50), "lunch"),
        stay("alice", 2, "open_office", (12, 50), (17, 0)),
        stay("bob", 2, "lab", (9, 0), (17, 30)),
        stay("carol", 2, "lab", (9, 20), (12, 15)), stay("carol", 2, "kitchen", (12, 15), (12, 50), "lunch"),
        stay("carol", 2, "lab", (12, 50), (15, 0)),
    ]
    return truth


@pytest.fixture(scope="module")
def truth():
    return make_truth()


@pytest.fixture(scope="module")
def every_question(truth):
    """Every candidate question (per_type large), dev wording."""
    return generate_questions(truth, seed=3, per_type=1000, phrasing_set="dev", objects=True)


def find(questions, kind, *words):
    return [q for q in questions if q.type == kind and all(w.lower() in q.question.lower() for w in words)]


# --- phrasings
def _normal(template: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9{}]+", " ", template.lower()).split())


def test_phrasing_sets_are_complete_disjoint_and_varied():
    sets = {name: load_phrasings(name) for name in ("dev", "evaluation")}
    for name, phrasings in sets.items():
        assert set(phrasings) == set(SLOTS), name
        for kind, templates in phrasings.items():
            assert len(templates) >= 8, (name, kind)
            assert len({_normal(t) for t in templates}) == len(templates), (name, kind, "near-duplicates")
            assert all(template_slots(t) in SLOTS[kind] for t in templates)
            for slots in SLOTS[kind]:
                assert sum(template_slots(t) == slots for t in templates) >= 4, (name, kind, sorted(slots))
        starts = {_normal(t).split()[0] for ts in phrasings.values() for t in ts}
        assert len(starts) >= 15, (name, "too few different openings")
    dev = {_normal(t) for ts in sets["dev"].values() for t in ts}
    evaluation = {_normal(t) for ts in sets["evaluation"].values() for t in ts}
    assert not dev & evaluation
    with pytest.raises(ValueError):
        load_phrasings("training")


def _template_pattern(template: str) -> re.Pattern:
    """A template, slots filled with anything (1..40 characters), on normalised text."""
    parts = re.split(r"\{[a-z0-9]+\}", _normal(template))
    return re.compile(r"[a-z0-9 ]{1,40}?".join(re.escape(p) for p in parts))


def _guarded_texts() -> dict[str, str]:
    files = [REPO / "test" / "test_rules_planner.py", REPO / "test" / "test_llm_planner.py"]
    files += sorted(p for p in (REPO / "src" / "embodied_memory" / "agent").rglob("*") if p.is_file()
                    and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo", ".so"))
    return {str(p.relative_to(REPO)): _normal(p.read_text(encoding="utf-8", errors="replace")) for p in files}


def _leaks(texts: dict[str, str]) -> list[str]:
    return [f"{path}: {template!r}" for kind, templates in load_phrasings("evaluation").items()
            for template in templates for path, text in texts.items() if _template_pattern(template).search(text)]


def test_no_evaluation_template_in_the_planners_or_their_tests():
    texts = _guarded_texts()
    assert len(texts) >= 5
    assert _leaks(texts) == []
    # the guard finds a filled template
    planted = "ask('" + load_phrasings("evaluation")["duration"][1].format(
        name="Zed", room="north wing", day="on Friday") + "')"
    assert _leaks({"planted.py": _normal(planted)})


# --- the observed truth
def test_durations_come_from_stays_and_sightings(truth):
    obs = observed_truth(truth)
    assert obs.days == [MON, TUE, WED]
    assert obs.durations[("alice", "open_office", MON)] == pytest.approx(4 + 2)     # two stays
    assert obs.durations[("alice", "kitchen", MON)] == pytest.approx(4)
    assert obs.durations[("carol", "lab", TUE)] == pytest.approx(61)               # one desk stay 10:00-11:01
    old = observed_truth(make_truth(with_stays=False))
    assert not old.stays_simulated
    assert old.durations[("carol", "lab", TUE)] == pytest.approx(2 + 1)            # two runs (58 min apart)
    assert old.durations[("alice", "open_office", MON)] == pytest.approx(6)


def test_presence_co_occurrence_absences_first_sightings_and_habits(truth):
    obs = observed_truth(truth)
    assert obs.arrivals[("alice", MON)] == at(0, 9) and obs.departures[("alice", MON)] == at(0, 15, 2)
    assert obs.together[MON] == {("alice", "bob"), ("bob", "carol")}
    assert TUE not in obs.together
    assert obs.together[WED] == {("bob", "carol"), ("alice", "carol")}
    assert obs.companions("bob", MON) == {"alice", "carol"}
    assert obs.seen_on[TUE] == {"alice", "carol", "victor"}
    assert obs.seen_in[("kitchen", WED)] == {"alice", "carol"}
    assert obs.first_day == {"alice": MON, "bob": MON, "carol": MON, "victor": TUE}
    assert obs.absent_days == {"alice": [], "bob": [TUE], "carol": [], "victor": [MON, WED]}
    assert (obs.habits["alice"].place, obs.habits["alice"].place_days) == ("open_office", 3)
    assert obs.habits["alice"].lunch_minutes == pytest.approx(12 * 60 + 20)          # median of 12:10 12:30 12:20
    assert obs.habits["bob"].place == "lab" and obs.habits["bob"].lunch_days == 1
    assert obs.habits["victor"].place == "" and obs.habits["victor"].lunch_minutes is None
    assert obs.was_in("alice", "lab", WED) and not obs.was_in("alice", "lab", TUE)   # an unseen meeting
    assert obs.met("alice", "bob", MON) and not obs.met("alice", "carol", TUE)


def test_local_days_follow_the_time_zone(truth):
    obs = observed_truth(truth, "Asia/Tokyo")            # UTC+9: Monday 15:00 UTC is Tuesday 00:00
    assert obs.days == [MON, TUE, WED, dt.date(2026, 3, 12)]
    assert obs.durations[("alice", "open_office", TUE)] == pytest.approx(2 + 2)
    assert obs.durations[("alice", "open_office", MON)] == pytest.approx(4)


# --- generation
def test_generation_is_deterministic_and_covers_every_type(truth):
    a = generate_questions(truth, seed=1, per_type=4, objects=True)
    assert [q.to_dict() for q in a] == [q.to_dict() for q in generate_questions(truth, seed=1, per_type=4,
                                                                              objects=True)]
    assert [q.question for q in a] != [q.question for q in generate_questions(truth, seed=2, per_type=4,
                                                                            objects=True)]
    assert {q.type for q in a} == set(TYPES)
    assert all(q.asked_at == truth.frames[-1]["t"] + 600 for q in a)
    templates = load_phrasings("evaluation")
    for q in a:
        assert q.phrasing_set == "evaluation" and "{" not in q.question and q.question[0].isupper()
        kind = q.answer["imitates"] if q.type == UNANSWERABLE else q.type
        assert q.template in templates[kind] and q.answerable == (q.type != UNANSWERABLE)
    people = [q for q in a if q.type not in OBJECT_TYPES]
    share = sum(not q.answerable for q in people) / len(people)
    assert 0.10 <= share <= 0.15, share
    assert not any(q.type in OBJECT_TYPES for q in generate_questions(truth, seed=1, per_type=4))
    dev = generate_questions(truth, seed=1, per_type=4, phrasing_set="dev")
    assert all(q.template in load_phrasings("dev")[q.answer.get("imitates", q.type)] for q in dev)


def test_answers_on_hand_computed_cases(every_question):
    qs = every_question
    assert {q.answer["duration_minutes"] for q in find(qs, "duration", "Carol", "lab", "yesterday")} == {61.0}
    assert {q.answer["duration_minutes"] for q in find(qs, "duration", "Alice", "open office", "on Monday")} == {6.0}
    assert [q.answer["binary"] for q in find(qs, "together", "Alice", "Bob", "on Monday")] == ["yes"]
    assert [q.answer["binary"] for q in find(qs, "together", "Alice", "Carol", "yesterday")] == ["no"]
    assert find(qs, "together", "Alice", "Bob", "yesterday") == []            # bob was not seen on Tuesday
    assert [q.answer["persons"] for q in find(qs, "with_whom", "Bob", "on Monday")] == [["alice", "carol"]]
    assert [q.answer["days"] for q in find(qs, "absent_days", "Bob")] == [["2026-03-10"]]
    assert [q.answer["days"] for q in find(qs, "absent_days", "Victor")] == [["2026-03-09", "2026-03-11"]]
    assert find(qs, "absent_days", "Alice") == []
    first_time = {q.question: q.answer["persons"] for q in qs if q.type == "first_time"}
    assert sorted(first_time.values()) == [["alice", "bob", "carol"], ["victor"]]
    assert [q.answer["minutes_of_day"] for q in find(qs, "habit_time", "Alice")] == [740.0]
    assert find(qs, "habit_time", "Bob") == []                                 # lunch seen on one day only
    assert {q.answer["room"] for q in find(qs, "habit_place", "Bob")} == {"lab"}
    assert [q.answer["person"] for q in find(qs, "who_first", "Alice", "Carol", "yesterday")] == ["alice"]
    assert find(qs, "who_first", "Bob", "Carol", "on Monday") == []            # both arrived at 09:30
    assert {q.answer["count"] for q in find(qs, "count", "on Monday") if "{room}" not in q.template} == {3}
    assert [q.answer["time"] for q in find(qs, "arrival", "Alice", "on Monday")] == [at(0, 9)]
    assert find(qs, "departure", "Alice", "today") == []                       # still at her desk
    assert [q.answer["time"] for q in find(qs, "departure", "Carol", "today")] == [at(2, 12, 22)]
    assert [q.answer["binary"] for q in find(qs, "binary", "Alice", "lab", "today")] == []   # there, unseen
    assert {q.answer["room"] for q in find(qs, "where_now", "Bob")} == {"lab"}
    assert find(qs, "where_now", "Victor") == []                               # not seen today
    assert find(qs, "where_now", "Carol") == []                                # went home at 15:00
    assert [q.answer["position"] for q in find(qs, "position", "Victor")] == [[0.0, 0.5, 0.0]]
    assert {q.answer["room"] for q in find(qs, "object_position", "red box", "on Monday")} == {"kitchen"}
    assert {q.answer["room"] for q in find(qs, "object_position", "red box", "today")} == set()   # not in view
    assert [q.answer["objects"] for q in find(qs, "text", "lab", "yesterday")] == [["red box"]]


def test_unanswerable_questions_ask_what_was_never_observed(truth):
    qs = generate_questions(truth, seed=5, per_type=4)
    obs = observed_truth(truth)
    un = [q for q in qs if q.type == UNANSWERABLE]
    assert un and all(q.answer == {"unanswerable": True, "imitates": q.answer["imitates"]} for q in un)
    for q in un:
        named = {n for n in ("alice", "bob", "carol", "victor") if n.capitalize() in q.question}
        day = next((d for phrase, d in (("today", WED), ("yesterday", TUE), ("on Monday", MON))
                    if phrase in q.question), None)
        if not named:
            continue                                                          # a name never seen
        person = named.pop()
        if day is not None:
            assert person not in obs.seen_on[day], q.question
        else:
            assert q.answer["imitates"] in ("habit_time", "habit_place") and person == "victor", q.question


# --- scoring
def q_of(kind, answer, asked_at=None, answerable=True):
    return Question("?", kind, asked_at or at(2, 16, 11), answer, "evaluation", "", answerable)


def ok(s: Score) -> tuple[bool, bool]:
    return s.correct, s.strict


def test_position_and_room_thresholds():
    q = q_of("position", {"position": [10.0, 0.0, 0.0], "room": "lab"})
    assert ok(score(q, {"status": "ok", "position": [15.1, 0.0, 0.0]}, {})) == (False, False)
    assert ok(score(q, {"status": "ok", "position": [14.9, 0.0, 0.0]}, {})) == (True, False)
    assert ok(score(q, {"status": "ok", "position": [12.1, 0.0, 0.0]}, {})) == (True, False)
    s = score(q, {"status": "ok", "position": [11.9, 0.0, 0.0]}, {})
    assert ok(s) == (True, True) and s.error == pytest.approx(1.9) and s.unit == "m"
    assert ok(score(q, {"status": "ok", "waypoint": "lab"}, {})) == (True, False)         # room only
    assert ok(score(q, {"status": "ok", "text": "In the lab, by the window."}, {})) == (True, False)
    for kind in ("where_now", "habit_place"):
        q = q_of(kind, {"position": [10.0, 0.0, 0.0], "room": "open_office"} if kind == "where_now"
                 else {"room": "open_office"})
        assert ok(score(q, {"status": "ok", "waypoint": "open_office"}, {})) == (True, True)
        assert ok(score(q, {"status": "ok", "waypoint": "lab"}, {})) == (False, False)
        assert score(q, {"status": "ok", "text": "Usually in the open office."}, {}).correct
        assert not score(q, {"status": "ok", "text": "Usually in the kitchen."}, {}).correct


def test_time_thresholds_and_clock_times_in_text():
    t = at(1, 14, 5)
    q = q_of("time", {"time": t, "local": "", "tz": "UTC"})
    for delta_min, expected in ((5.1, (False, False)), (4.9, (True, False)), (1.1, (True, False)),
                                (0.9, (True, True))):
        assert ok(score(q, {"status": "ok", "time": t - delta_min * 60}, {})) == expected, delta_min
    assert score(q, {"status": "ok", "text": "I last saw her at 14:08."}, {}).correct        # that day
    assert not score(q, {"status": "ok", "text": "At 2:20 pm."}, {}).correct
    assert score(q, {"status": "ok", "text": "Around 2:05 pm"}, {}).strict
    zurich = q_of("arrival", {"time": t, "tz": "Europe/Zurich"})                         # 15:05 local
    assert score(zurich, {"status": "ok", "text": "She came in at 15:05."}, {}).strict
    assert not score(zurich, {"status": "ok", "text": "She came in at 14:05."}, {}).correct
    first = q_of("first_seen", {"time": at(0, 9), "tz": "UTC"})
    assert score(first, {"status": "ok", "text": "On Monday at 09:02."}, {}).correct
    assert not score(first, {"status": "ok", "text": "At 09:02."}, {}).correct              # that is today


def test_duration_count_and_habit_time_thresholds():
    q = q_of("duration", {"duration_minutes": 60.0})
    for got, expected in ((65.1, (False, False)), (64.9, (True, True)), (54.9, (False, False))):
        assert ok(score(q, {"status": "ok", "duration_minutes": got}, {})) == expected, got
    short = q_of("duration", {"duration_minutes": 3.0})
    assert ok(score(short, {"status": "ok", "duration_minutes": 4.1}, {})) == (True, False)   # > 1 min off
    assert ok(score(short, {"status": "ok", "duration_minutes": 3.9}, {})) == (True, True)
    assert score(q, {"status": "ok", "text": "About an hour and a half."}, {}).error == pytest.approx(30)
    assert score(q, {"status": "ok", "text": "1 hour 2 minutes"}, {}).strict
    assert score(q, {"status": "ok", "text": "She stayed 58 min."}, {}).correct
    c = q_of("count", {"count": 3})
    assert ok(score(c, {"status": "ok", "text": "I saw three people."}, {})) == (True, True)
    assert not score(c, {"status": "ok", "text": "4 people."}, {}).correct
    assert score(c, {"status": "ok", "persons": ["p1", "p2", "p3"]}, {}).correct
    h = q_of("habit_time", {"minutes_of_day": 740.0, "tz": "UTC"})
    for clock, expected in (("12:35", (True, False)), ("12:36", (False, False)), ("12:24", (True, True)),
                            ("12:26", (True, False)), ("12:04", (False, False))):
        assert ok(score(h, {"status": "ok", "text": f"Usually at {clock}."}, {})) == expected, clock
    assert ok(score(h, {"status": "ok", "time": at(2, 12, 22)}, {})) == (True, True)


def test_sets_binary_who_first_and_days():
    names_of = {"person_1": "alice", "person_2": "bob", "person_3": "carol"}
    q = q_of("persons", {"persons": ["alice", "bob"]})
    assert ok(score(q, {"status": "ok", "persons": ["person_1", "person_2"]}, names_of)) == (True, True)
    s = score(q, {"status": "ok", "persons": ["person_1", "person_3"]}, names_of)
    assert not s.correct and (s.precision, s.recall) == (0.5, 0.5)
    s = score(q, {"status": "ok", "text": "Alice, Bob and Carol."}, names_of)
    assert not s.correct and s.recall == 1.0 and s.precision == pytest.approx(2 / 3)
    assert score(q, {"status": "ok", "text": "bob and alice"}, names_of).correct
    b = q_of("binary", {"binary": "no"})
    assert score(b, {"status": "ok", "binary": "no"}, {}).correct
    assert not score(b, {"status": "ok", "binary": "yes"}, {}).correct
    assert score(b, {"status": "ok", "text": "No, I did not see Bob in the kitchen today."}, {}).correct
    assert score(b, {"status": "ok", "text": "I did not see Bob there."}, {}).correct
    assert not score(b, {"status": "ok", "text": "I don't know."}, {}).correct
    w = q_of("who_first", {"person": "carol", "options": ["alice", "carol"]})
    assert score(w, {"status": "ok", "text": "Carol came in before Alice."}, names_of).correct
    assert not score(w, {"status": "ok", "persons": ["person_1"]}, names_of).correct
    d = q_of("absent_days", {"days": ["2026-03-09", "2026-03-11"], "tz": "UTC"})          # asked Wednesday
    assert score(d, {"status": "ok", "text": "I did not see him on Monday or today."}, {}).correct
    assert score(d, {"status": "ok", "days": ["2026-03-11", "2026-03-09"]}, {}).correct
    s = score(d, {"status": "ok", "text": "Only on Monday."}, {})
    assert not s.correct and (s.precision, s.recall) == (1.0, 0.5)


def test_declining_is_wrong_when_answerable_and_the_only_right_answer_otherwise():
    q = q_of("time", {"time": at(1, 14, 5), "tz": "UTC"})
    for answer in ({"status": "no_answer", "text": "I could not answer that."},
                   {"status": "ok", "text": "I don't know."}, {"status": "ok", "text": "No record of Alice."},
                   {"status": "ok", "text": "I have not seen Alice yesterday."}, {"status": "error", "error": "x"},
                   {"status": "ok", "text": ""}):
        assert not score(q, answer, {}).correct, answer
    un = q_of("unanswerable", {"unanswerable": True, "imitates": "time"}, answerable=False)
    for answer in ({"status": "no_answer", "text": "I could not answer that."},
                   {"status": "ok", "text": "I did not see Dave on Tuesday."},
                   {"status": "ok", "text": "I don't know anyone called Zoe."}):
        assert ok(score(un, answer, {})) == (True, True), answer
    for answer in ({"status": "ok", "text": "At 10:00.", "time": at(1, 10)},
                   {"status": "ok", "text": "I did not see him after 10:00.", "time": at(1, 10)},
                   {"status": "ok", "text": "At 10:00."}, {"status": "error", "error": "timeout"},
                   {"status": "ok", "text": ""}):
        assert not score(un, answer, {}).correct, answer


def test_objects_text_and_summary():
    t = q_of("text", {"objects": ["red box", "medkit"]})
    assert score(t, {"status": "ok", "text": "A red box."}, {}).correct
    assert not score(t, {"status": "ok", "text": "A chair."}, {}).correct
    scores = {"time": [Score(True, True, 0.5, "min"), Score(False, False, 10.5, "min"), Score(False, False)],
              "persons": [Score(True, True, precision=1.0, recall=1.0), Score(False, False, precision=0.5,
                                                                              recall=1.0)]}
    summary = summarize(scores)
    assert summary["time"]["n"] == 3 and summary["time"]["accuracy"] == pytest.approx(1 / 3)
    assert summary["time"]["mean_error"] == pytest.approx(5.5) and summary["time"]["median_error"] == 5.5
    assert summary["time"]["unit"] == "min" and "mean_precision" not in summary["time"]
    assert summary["persons"]["mean_precision"] == 0.75 and summary["persons"]["mean_recall"] == 1.0
    assert summary["persons"]["strict_accuracy"] == 0.5 and summary["persons"]["mean_error"] is None


def test_old_truth_and_other_time_zones(truth):
    old = GroundTruth(config={"world": "small"}, frames=truth.frames)          # frames only
    qs = generate_questions(old, seed=0, per_type=4)
    kinds = {q.type for q in qs}
    assert {"position", "duration", "binary", "habit_place", "unanswerable"} <= kinds
    assert {q.answer["room"] for q in qs if q.type == "habit_place"} <= {"open_office", "lab"}
    zurich = generate_questions(truth, seed=0, per_type=4, tz="Europe/Zurich")
    arrivals = [q for q in zurich if q.type == "arrival"]
    assert arrivals and all(q.answer["local"].endswith("+01:00") and q.answer["tz"] == "Europe/Zurich"
                            for q in arrivals)
    s = score(arrivals[0], {"status": "ok", "text": "At " + arrivals[0].answer["local"][11:16] + "."}, {})
    assert s.strict
