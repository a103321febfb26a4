"""The rules planner on a stored fixture memory (real MiniLM embeddings), and the parser on
real NaVQA phrasings."""
import csv
import time
from collections import Counter
from zoneinfo import ZoneInfo

import pytest

from embodied_memory.agent.query_agent import AgentParams, QueryAgent
from embodied_memory.agent.question_parser import parse_question, parse_time_window
from embodied_memory.agent.tools import StoreMemoryClient

from conftest import shared_data
from store_fixtures import HOUR, T0, filled_store

NOW = T0 + 27 * HOUR  # 2026-03-11 11:00 UTC
UTC = ZoneInfo("UTC")


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    store = filled_store(tmp_path_factory.mktemp("rules"), "sqlite_faiss", text_embedder="minilm")
    store.name_identity("bob", "Robert")
    yield QueryAgent(StoreMemoryClient(store), AgentParams(planner="rules"))
    store.close()


def test_where_last_seen_object(agent):
    ans = agent.ask("Where did you last see the red mug?", as_of=NOW)
    assert ans.status == "ok" and ans.type == "position" and ans.waypoint == "kitchen"
    assert ans.position == [1.0, 1.5, 0.0] and ans.evidence[0] == "o5"
    # asked earlier, the later sighting does not exist yet
    ans = agent.ask("Where did you last see the red mug?", as_of=T0 + 2.5 * HOUR)
    assert ans.position == [1.0, 1.0, 0.0] and "o5" not in ans.evidence


def test_where_is_a_person_and_display_names(agent):
    ans = agent.ask("Where was Robert last seen?", as_of=NOW)
    assert ans.waypoint == "entrance" and ans.position == [0.0, -5.0, 0.0]


def test_when_questions(agent):
    ans = agent.ask("When did alice arrive yesterday?", as_of=NOW)
    assert ans.type == "time" and ans.time_iso == "2026-03-10T08:00:00+00:00"
    ans = agent.ask("When did you last see alice?", as_of=NOW)
    assert ans.time_iso == "2026-03-10T10:00:00+00:00" and ans.minutes_ago == 25 * 60
    ans = agent.ask("When did you see the bicycle?", as_of=NOW)
    assert ans.time_iso == "2026-03-10T09:00:00+00:00"


def test_how_long(agent):
    ans = agent.ask("How long was alice in the kitchen yesterday?", as_of=NOW)
    assert ans.type == "duration" and ans.duration_minutes == 0.0  # two visits, 2 h apart
    assert "2 visit" in ans.text
    ans = agent.ask("How long was alice in the kitchen yesterday morning?", as_of=NOW)
    assert ans.evidence == ["o0", "o2"]


def test_yes_no(agent):
    assert agent.ask("Did you see a bicycle?", as_of=NOW).binary == "yes"
    assert agent.ask("Did you see an elephant?", as_of=NOW).binary == "no"
    assert agent.ask("Did you see bob at the entrance?", as_of=NOW).binary == "yes"
    assert agent.ask("Was alice at the entrance?", as_of=NOW).binary == "no"
    assert agent.ask("Is there a whiteboard in the meeting room?", as_of=NOW).binary == "yes"
    assert agent.ask("Did you see a bicycle this morning?", as_of=NOW).binary == "no"  # it was yesterday


def test_who_and_how_many(agent):
    assert agent.ask("Who was in the kitchen yesterday?", as_of=NOW).persons == ["alice"]
    assert set(agent.ask("Who did you see yesterday?", as_of=NOW).persons) == {"alice", "bob"}
    assert agent.ask("Who did you see today?", as_of=NOW).persons == []
    assert agent.ask("How many people did you see yesterday?", as_of=NOW).text.startswith("2 people")


def test_time_phrases():
    now = T0 + 27 * HOUR  # Wednesday 2026-03-11 11:00
    start, end, _ = parse_time_window("what happened yesterday afternoon", now, UTC)
    assert (start, end) == (T0 + 4 * HOUR, T0 + 10 * HOUR)
    start, end, _ = parse_time_window("who came in the last 2 hours", now, UTC)
    assert (start, end) == (now - 2 * HOUR, now)
    start, end, _ = parse_time_window("was anyone here at 3pm on monday", now, UTC)
    assert start == T0 - 24 * HOUR - 8 * HOUR + 15 * HOUR - 900
    assert parse_time_window("where is the mug", now, UTC)[:2] == (None, None)


def test_parser_classifies_real_navqa_questions():
    path = shared_data("questions", "navqa_data.csv")
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    type_key = next(k for k in rows[0] if k.startswith("Type"))
    expected = {"position": {"where", "go"}, "binary": {"yes_no"}, "time": {"when"}, "duration": {"how_long"},
                "text": {"what", "who", "how_many"}}
    right, total = Counter(), Counter()
    for row in rows:
        kind = parse_question(row["Question"], time.time(), UTC, [], []).kind
        total[row[type_key]] += 1
        right[row[type_key]] += kind in expected[row[type_key]]
    accuracy = sum(right.values()) / sum(total.values())
    assert len(rows) == 210 and accuracy >= 0.97, {t: f"{right[t]}/{total[t]}" for t in total}
    assert all(right[t] / total[t] >= 0.9 for t in total)
