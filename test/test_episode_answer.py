"""Answering an embodied question from the episode's views (HIMM's "ready to answer" step): the
VLM answerer's protocol against a real HTTP endpoint that plays a script, the view selection,
and the EQA scoring (truth and OpenEQA's LLM-Match)."""
import re

import cv2
import numpy as np
import pytest

from embodied_memory.agent.answer import Answer
from embodied_memory.explore.episode_answer import MemoryAnswerer, VlmAnswerer, select_views
from embodied_memory.explore.explorer import EpisodeView
from embodied_memory.llm.chat_client import ChatClient, LLMConfig
from embodied_memory.sim.eqa import (EQA_PHRASING_SETS, EqaQuestion, always_baselines, eqa_phrasings, llm_match,
                                     make_question, question_for, truth_score)
from embodied_memory.sim.exploration import SimTask
from embodied_memory.sim.floor_plans import FLOOR_PLANS
from embodied_memory.types import Pose

from scripted_llm import ScriptedLLM, content, error


@pytest.fixture(scope="module")
def minilm():
    from embodied_memory.text_embedding import MiniLMTextEmbedder
    return MiniLMTextEmbedder()


def _views(tmp_path, descriptions):
    views = []
    for i, (place, text) in enumerate(descriptions):
        path = tmp_path / f"{i:03d}.jpg"
        cv2.imwrite(str(path), np.full((48, 64, 3), 20 * i, np.uint8))
        views.append(EpisodeView(f"ep/{i:05d}", Pose(float(i), 0.0, 1.5, 0.0), place, text, str(path), i))
    return views


SEEN = [("corridor", "An empty stretch of wall and floor."), ("kitchen", "I see a red box about 2.0 m ahead."),
        ("kitchen", "I see an office chair about 1.0 m on the left."), ("office", "I see a barrel about 3.0 m ahead."),
        ("corridor", "An empty stretch of wall and floor."), ("corridor", "I see an office desk about 2.0 m ahead.")]


def _client(url):
    return ChatClient(LLMConfig(base_url=url, model="scripted", timeout_s=5.0))


def test_the_views_shown_are_the_best_described_then_the_last(tmp_path, minilm):
    views = _views(tmp_path, SEEN)
    chosen = select_views("Where is the red box?", views, minilm, k=3)
    assert chosen[0].observation_id == "ep/00001"                 # the red box's view first
    assert [v.observation_id for v in chosen[1:]] == ["ep/00004", "ep/00005"]   # then the last two, in order
    assert select_views("Where is the red box?", [v.__class__(**{**v.__dict__, "image_path": ""}) for v in views],
                        minilm) == []                             # nothing stored: nothing to show


def test_the_vlm_answerer_sends_the_views_and_returns_a_typed_answer_with_evidence(tmp_path, minilm):
    views = _views(tmp_path, SEEN)
    reply = '{"answer": "The red box is in the kitchen.", "yes_no": "", "place": "kitchen", "views": [1, 9, true], ' \
            '"confident": true}'
    with ScriptedLLM([content(reply)]) as llm:
        answer = VlmAnswerer(_client(llm.base_url), minilm, max_views=4).answer("Where is the red box?", views)
        request = llm.requests[0]
    parts = request["messages"][0]["content"]
    text = " ".join(p["text"] for p in parts if p["type"] == "text")
    assert sum(p["type"] == "image_url" for p in parts) == 4
    assert "Question: Where is the red box?" in text and "1. at (1.0, 0.0) in kitchen: I see a red box" in text
    assert answer.status == "ok" and answer.type == "waypoint" and answer.waypoint == "kitchen"
    assert answer.evidence == ["ep/00001"]                       # view 9 and a bool are no views
    assert answer.position is None and answer.confidence == 0.8 and answer.planner == "vlm"
    assert answer.tokens_in > 0


@pytest.mark.parametrize("reply", ["the box is in the kitchen", '{"answer": ""}', '{"answer": 3}', "[1, 2]"])
def test_an_unusable_reply_is_an_error_answer_not_a_guess(tmp_path, minilm, reply):
    with ScriptedLLM([content(reply)]) as llm:
        answer = VlmAnswerer(_client(llm.base_url), minilm).answer("Where is the red box?", _views(tmp_path, SEEN))
    assert answer.status == "error" and "no answer" in answer.error and answer.text == ""


def test_a_dead_endpoint_or_no_stored_view_is_an_error_that_says_why(tmp_path, minilm):
    with ScriptedLLM([error(500, "model crashed")]) as llm:
        answer = VlmAnswerer(_client(llm.base_url), minilm).answer("Is the box here?", _views(tmp_path, SEEN))
    assert answer.status == "error" and "vision-language endpoint failed" in answer.error
    no_images = [EpisodeView("ep/1", Pose(0, 0), "", "a box", "", 0)]
    answer = VlmAnswerer(_client("http://127.0.0.1:9/v1"), minilm).answer("Is the box here?", no_images)
    assert answer.status == "error" and "image directory" in answer.error
    with pytest.raises(ValueError, match="max_views"):
        VlmAnswerer(None, minilm, max_views=0)


def test_a_yes_no_reply_is_a_binary_answer_and_an_unsure_one_without_views_no_answer():
    views = [EpisodeView("ep/1", Pose(0, 0), "office", "", "x.jpg", 0)]
    replies = [content('{"answer": "No, it is in the office.", "yes_no": "no", "views": [1], "place": "the roof", '
                       '"confident": false}'),
               content('{"answer": "I don\'t know", "yes_no": "", "views": [], "confident": false}')]
    with ScriptedLLM(replies) as llm:
        answerer = VlmAnswerer(_client(llm.base_url), load=lambda p: np.zeros((8, 8, 3), np.uint8))
        answer, unsure = (answerer.answer("Is the box in the kitchen?", views) for _ in range(2))
    assert answer.type == "binary" and answer.binary == "no" and answer.confidence == 0.3
    assert answer.waypoint == "" and answer.evidence == ["ep/1"]             # no place the robot does not know
    assert unsure.status == "no_answer" and "not sure" in unsure.error


def test_the_memory_answerer_is_the_query_agent():
    asked = []
    answerer = MemoryAnswerer(lambda q: asked.append(q) or Answer(text="In the kitchen.", waypoint="kitchen"))
    assert answerer.answer("Where is the red box?", []).waypoint == "kitchen" and asked == ["Where is the red box?"]


def test_yes_no_questions_ask_each_phrasing_with_both_answers():
    task = SimTask(2, "box", "red", "kitchen")
    assert make_question(task, "location", "dev") == EqaQuestion("location", "Where is the red box?", "kitchen")
    assert make_question(task, "yes_no", "dev") == EqaQuestion("yes_no", "Is the red box in the kitchen?", "yes",
                                                               "kitchen")
    other = make_question(SimTask(11, "box", "red", "kitchen"), "yes_no", "dev")     # the third dev template
    assert other.text.startswith("Can the red box be found in the ") and other.answer == "no"
    assert other.room != "kitchen"
    there = [make_question(SimTask(seed, "duckie", "", "kitchen"), "yes_no", "dev") for seed in (14, 15)]
    assert all(q.text.startswith("Does the ") and q.text.endswith(" have a rubber duck?") for q in there)
    assert [q.answer for q in there] == ["no", "yes"]
    yes_no_seeds = [s for s in range(10, 20) if question_for(SimTask(s, "duckie", "", "kitchen"), "dev").kind == "yes_no"]
    assert yes_no_seeds == [10, 11, 14, 15, 18, 19]
    for phrasing_set in EQA_PHRASING_SETS:          # template indices only: the evaluation wording is not printed
        for layout, plan in FLOOR_PLANS.items():
            templates = eqa_phrasings(phrasing_set)["yes_no"]
            asked = {}
            for seed in yes_no_seeds:
                q = make_question(SimTask(seed, "duckie", "", plan.target_rooms[0], layout), "yes_no", phrasing_set)
                index = next(i for i, t in enumerate(templates)
                             if q.text == t.format(target="rubber duck", room=q.room.replace("_", " ")))
                asked.setdefault(index, []).append(q.answer)
            assert all(a.count("yes") == a.count("no") > 0 for a in asked.values()), (phrasing_set, layout)
            assert len(asked) == min(3, len(templates))                       # every template (of up to 3 pairs)
    held_out = [make_question(SimTask(seed, "duckie", "", "kitchen"), "yes_no", "dev").answer for seed in yes_no_seeds]
    assert held_out.count("yes") == held_out.count("no") == 3
    rows = [{"question_kind": "yes_no", "true_answer": a} for a in held_out] + [{"question_kind": "location"}]
    assert always_baselines(rows) == {"always_yes": 0.5, "always_no": 0.5}


def test_truth_scoring_reads_the_place_the_yes_no_and_refuses_credit_for_i_dont_know():
    where = EqaQuestion("location", "Where is the red box?", "meeting_room")
    assert truth_score(where, Answer(text="I saw red box in the meeting room at 10:02.")) == 1.0
    assert truth_score(where, Answer(text="It is in the office.", waypoint="meeting_room")) == 1.0
    assert truth_score(where, Answer(text="In the office or the meeting room.")) == 0.0      # two rooms: no answer
    assert truth_score(where, Answer(text="In the kitchen.")) == 0.0
    assert truth_score(where, Answer(status="no_answer", text="I saw it in the meeting room")) == 0.0
    yes_no = EqaQuestion("yes_no", "Is the red box in the kitchen?", "no", "kitchen")
    assert truth_score(yes_no, Answer(type="binary", binary="no", text="No, it is in the office.",
                                      evidence=["ep/7"])) == 1.0
    assert truth_score(yes_no, Answer(text="No, I last saw it in the office.", evidence=["ep/7"])) == 1.0
    assert truth_score(yes_no, Answer(text="No, I have no such observation.")) == 0.0     # no evidence: no answer
    assert truth_score(yes_no, Answer(text="Yes, last in the kitchen at 10:00.")) == 0.0
    assert truth_score(yes_no, Answer(text="I don't know: I was never in the kitchen.")) == 0.0


def test_llm_match_is_openeqas_judge_mark_scaled_and_none_without_a_mark():
    question = EqaQuestion("location", "Where is the red box?", "meeting_room")
    with ScriptedLLM([content('{"mark": 5}'), content('{"mark": 2}'), content('{"mark": 7}'), content("great")]) as llm:
        client = _client(llm.base_url)
        scores = [llm_match(client, question, Answer(text="In the meeting room.")) for _ in range(4)]
        prompt = llm.requests[0]["messages"][0]["content"]
    assert scores == [1.0, 0.25, None, None]
    assert "Question: Where is the red box?" in prompt and "Answer: meeting room" in prompt
    assert "Response: In the meeting room." in prompt
    assert llm_match(_client("http://127.0.0.1:9/v1"), question, Answer(text="x")) is None


# what the simulated explorer stores (its oracle describer's wording, the camera's room; it looks
# around in each room it enters), and the truth: red box in the kitchen (also seen from the
# corridor), barrel in the lab, blue box in the office; the meeting room looked at, nothing in it;
# the entrance never looked at
NOTHING = "I see nothing in particular."
EPISODE = [("corridor", "I see a desk and an office chair about 3.0 m ahead."),              # o0
           ("corridor", "I see a red box about 4.1 m on the left."), ("kitchen", "I see a red box about 1.5 m ahead."),
           ("kitchen", "I see a red box about 2.5 m on the right."), ("kitchen", NOTHING),      # o3, o4
           ("lab", "I see a barrel about 2.0 m ahead."), ("lab", NOTHING), ("lab", NOTHING),     # o5-o7
           ("meeting_room", "I see a desk and an office chair about 2.0 m ahead."),             # o8
           ("meeting_room", NOTHING), ("meeting_room", NOTHING),                                 # o9, o10
           ("office", NOTHING), ("office", "I see a blue box about 4.3 m on the right."),       # o11, o12
           ("office", "I see a blue box about 1.0 m ahead.")]                                    # o13
WHERE = {"red box": "kitchen", "barrel": "lab", "blue box": "office"}


def _agent_over(tmp_path, rows):
    from embodied_memory.agent.query_agent import AgentParams, QueryAgent
    from embodied_memory.agent.tools import StoreMemoryClient
    from embodied_memory.store.memory_store import open_store
    from store_fixtures import T0, make_params, obs
    store = open_store(make_params(tmp_path, "sqlite_faiss", text_embedder="minilm"))
    store.insert([obs(i, T0 + t, text, i, 0, room) for i, (t, room, text) in enumerate(rows)])
    return store, QueryAgent(StoreMemoryClient(store), AgentParams(planner="rules"))


@pytest.fixture(scope="module")
def episode_agent(tmp_path_factory):
    from store_fixtures import HOUR, T0
    store, agent = _agent_over(tmp_path_factory.mktemp("episode"),
                               [(10 * i, room, text) for i, (room, text) in enumerate(EPISODE)])
    yield lambda question: agent.ask(question, as_of=T0 + HOUR)
    store.close()


def test_every_dev_wording_of_an_eqa_question_is_answered_from_the_episode(episode_agent):
    """Each dev template, both ways: a "no" must be grounded (where the thing was seen instead, or
    the views of the room that show it is not there), as the benchmark's truth-match demands;
    a room that holds only something like the thing (a red box for a blue box) is a no."""
    wrong = []
    for template in eqa_phrasings("dev")["yes_no"]:
        for target, room in [("blue box", "kitchen"), ("blue box", "office"), ("red box", "kitchen"),
                             ("red box", "office"), ("barrel", "meeting_room"), ("barrel", "lab"),
                             ("rubber duck", "kitchen")]:
            truth = "yes" if WHERE.get(target) == room else "no"
            question = EqaQuestion("yes_no", template.format(target=target, room=room.replace("_", " ")), truth, room)
            answer = episode_agent(question.text)
            if truth_score(question, answer) != 1.0:
                wrong.append((question.text, answer.text or answer.error))
    for template in eqa_phrasings("dev")["location"]:
        for target, room in WHERE.items():
            question = EqaQuestion("location", template.format(target=target), room)
            answer = episode_agent(question.text)
            if truth_score(question, answer) != 1.0:
                wrong.append((question.text, answer.text or answer.error))
    assert wrong == []


def test_a_grounded_no_says_where_the_thing_was_seen_and_what_was_looked_at(episode_agent):
    moved = episode_agent("Is there a blue box in the kitchen?")      # the kitchen's red box is not it
    assert moved.binary == "no" and moved.waypoint == "office" and moved.evidence[0] == "o13"
    assert "last saw blue box in the office" in moved.text and "3 view(s) in the kitchen" in moved.text
    assert moved.evidence[1:] == ["o4", "o3", "o2"]                    # the kitchen's views, newest first
    never = episode_agent("Is there a rubber duck in the meeting room?")    # seen nowhere; the room was looked at
    assert never.binary == "no" and never.evidence == ["o10", "o9", "o8"] and "saw no rubber duck" in never.text
    # a room never looked at: no grounds for "no" about "a" rubber duck; "the" barrel is in one place only
    assert episode_agent("Is there a rubber duck in the entrance?").status == "no_answer"
    elsewhere = episode_agent("Is there a barrel in the entrance?")          # one may be there; one is in the lab
    assert elsewhere.status == "no_answer" and elsewhere.binary == "" and elsewhere.evidence == ["o5"]
    assert "not been in the entrance" in elsewhere.text and "barrel in the lab" in elsewhere.text
    unseen = episode_agent("Does the entrance have the barrel?")
    assert unseen.binary == "no" and "in the lab" in unseen.text and "not been in the entrance" in unseen.text
    assert episode_agent("Is there a barrel in the lab?").binary == "yes"
    few = episode_agent("Is there a rubber duck in the corridor?")           # 2 views there: too few for a no
    assert few.status == "no_answer" and "only 2 view(s) in the corridor" in few.text and few.evidence == ["o1", "o0"]


def test_names_reads_a_phrase_singular_or_plural_and_not_negated():
    from embodied_memory.agent.rules_planner import _names, singular
    assert [singular(w) for w in ("boxes", "bottles", "knives", "shelves", "batteries", "glass", "bus", "mugs")] == \
        ["box", "bottle", "knife", "shelf", "battery", "glass", "bus", "mug"]
    said = lambda text, phrase: _names({"description": text}, phrase)       # noqa: E731
    assert said("Two blue boxes on a shelf.", "blue box") and said("A white mug.", "mugs")
    assert said("Several glasses and bottles on the bench.", "bottle")
    assert not said("A cardboard box and a red kettle.", "red box")             # the words, not in order
    assert not said("There is no mug on the counter.", "mug") and not said("", "mug")


def test_long_descriptions_in_the_room_are_no_grounds_for_a_no(tmp_path):
    """A real describer's many-object sentence matches a short phrase less closely than a short
    one elsewhere: that alone never turns a yes into a no; only a view elsewhere that names the
    thing does, against a room whose views do not."""
    from store_fixtures import T0
    kitchen = ("A kitchen counter with a coffee machine, a toaster, a fruit bowl and a white mug next to the sink, "
               "and a recycling bin for plastic bottles.")
    store, agent = _agent_over(tmp_path, [(0, "kitchen", kitchen), (10, "kitchen", kitchen),
                                          (20, "kitchen", "The fridge door and a calendar on the wall."),
                                          (30, "office", "A coffee cup on the desk."), (40, "office", "A water bottle."),
                                          (50, "office", "A red box."),
                                          (60, "lab", "A red kettle next to a cardboard box on the bench."),
                                          (70, "lab", NOTHING), (80, "lab", NOTHING)])
    try:
        ask = lambda q: agent.ask(q, as_of=T0 + 600)                         # noqa: E731
        for question in ("Is there a coffee machine in the kitchen?", "Is there a mug in the kitchen?",
                         "Any mugs in the kitchen?", "Is there a bottle in the kitchen?"):
            assert ask(question).binary == "yes", question
        mine = ask("Is my mug in the kitchen?")              # the office's later coffee cup is not the mug
        assert mine.binary == "yes" and mine.waypoint == "kitchen", mine.text
        red = ask("Is there a red box in the lab?")                         # a red kettle and a box are no red box
        assert red.binary == "no" and "in the office" in red.text
    finally:
        store.close()


def test_a_named_view_in_the_room_is_a_yes_only_when_the_thing_was_not_seen_elsewhere_since(tmp_path):
    from store_fixtures import HOUR, T0
    store, agent = _agent_over(tmp_path, [(0, "kitchen", "A white mug on the counter next to a kettle and a toaster "
                                                         "by the window."),
                                          (10, "kitchen", NOTHING), (20, "kitchen", NOTHING)]
                               + [(HOUR + 60 * i, "office", "A mug on the desk.") for i in range(40)])
    try:
        now = agent.ask("Is the mug in the kitchen?", as_of=T0 + 2 * HOUR)
        assert now.binary == "no" and "in the office" in now.text
        past = agent.ask("Tell me if the mug was in the kitchen.", as_of=T0 + 2 * HOUR)
        assert past.binary == "yes" and past.waypoint == "kitchen"
        later = agent.ask("Is the mug in the kitchen?", as_of=T0 + 26 * HOUR)     # a day later: dated
        assert later.binary == "no" and re.search(r"at \w{3} \d{2} \d{2}:\d{2}", later.text), later.text
    finally:
        store.close()


def test_views_described_by_the_detectors_alone_answer_nothing_about_things(tmp_path):
    """Offline without a VLM, a view is "Robot camera view at office." or a people count: no
    sighting of a desk, and no grounds for "no desk" either."""
    from embodied_memory.detector_sentences import detector_sentence
    from store_fixtures import T0
    rows = [(10 * i, room, detector_sentence(people, 0, [], room))
            for i, (room, people) in enumerate([("office", 0), ("office", 2), ("office", 0), ("kitchen", 1),
                                               ("kitchen", 0), ("kitchen", 0)])]
    store, agent = _agent_over(tmp_path, rows + [(100, "lab", "A wooden desk with a lamp."),
                                                 (110, "lab", NOTHING), (120, "lab", NOTHING)])
    try:
        ask = lambda q: agent.ask(q, as_of=T0 + 600)                         # noqa: E731
        office = ask("Is there a desk in the office?")
        assert office.status == "no_answer" and "not described" in office.text and office.binary == ""
        assert ask("Is there a desk in the lab?").binary == "yes"
        assert ask("Where is the desk?").waypoint == "lab"                  # not the office's generic views
    finally:
        store.close()
