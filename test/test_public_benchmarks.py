"""Public question formats (NaVQA, OpenEQA, PersonEQA) and their replay against a bag.

The real files in ../shared/data/questions are read when present (skipped with the reason on a
fresh clone); hand-written files cover the formats' corners and errors; the replay runs on a
simulated bag standing in for the recording: format and plumbing, not accuracy."""
import datetime as dt
import json

import numpy as np
import pytest

from embodied_memory.evaluation.public_questions import (
    QuestionFormatError, auto_offset, detect_format, load_navqa_csv, load_navqa_json, load_openeqa_json,
    load_personeqa_csv, load_questions, shift_times)
from embodied_memory.evaluation.replay_eval import run_public_eval, topics_with_remaps
from embodied_memory.ingest.bag_reader import BagError
from embodied_memory.ingest.bag_writer import BagWriter
from embodied_memory.params import StoreParams
from embodied_memory.perception.pipeline import PerceptionParams

from bags import T_START, small_bag
from conftest import shared_data

LIGHT = dict(store_params=StoreParams(text_embedder="hash"),
             perception_params=PerceptionParams(text_embedder="hash", image_embedder="none", person_detector="none",
                                                face_backend="none", reid="none"))
NAVQA_HEADER = ('UUID,Seq ID,Question,"Timestamp \nwith answer","Type \n(binary, position, time, text)",'
                'Text answer,Parsable answer,"Question\nCategory"\n')           # lines 1-3, as ReMEmbR's
PERSONEQA_HEADER = "id;question;context_time;type;answer;optimal_context;ready;comment;multiple_days\n"


# -- the real files ------------------------------------------------------------------------------------
def test_real_navqa_csv():
    questions = load_questions(shared_data("questions", "navqa_data.csv"))
    assert len(questions) == 210 and {q.source for q in questions} == {"navqa_csv"}
    by_type = {t: sum(q.type == t for q in questions) for t in ("position", "binary", "text", "time", "duration")}
    assert by_type == {"position": 71, "binary": 67, "text": 33, "time": 30, "duration": 9}
    assert sorted({q.episode for q in questions}, key=int) == ["0", "3", "4", "6", "16", "21", "22"]
    first = next(q for q in questions if q.id == "LONG_5a6cef0c-175d-4779-bfd4-f7b193fb9039")
    assert first.question == "When did you leave the building?" and first.clock_times == ["7:59:00"]
    assert first.context_time is None            # the CSV alone has no context time
    positions = [q for q in questions if q.type == "position"]
    assert all("placeholder" in q.unscored for q in positions)       # filled from CODa poses, absent here
    stay = next(q for q in questions if q.id == "LONG_cbe5ca33-b001-47c4-9397-aca6d275e5e4")
    assert stay.duration_minutes == 2.3 and not stay.unscored
    assert all(q.binary in ("yes", "no") for q in questions if q.type == "binary")
    assert len(load_questions(shared_data("questions", "navqa_data.csv"), episode="21")) == 30


def test_real_navqa_sequence_file_gives_windows_and_the_clock():
    path = shared_data("questions", "navqa_qa_unfilled_0.json")
    assert detect_format(path) == "navqa_json"
    questions = load_questions(path)              # the questions come from navqa_data.csv beside it
    assert len(questions) == 30 and {q.episode for q in questions} == {"0"}
    raw = {e["id"]: e for e in json.loads(path.read_text())["data"]}
    assert all(q.context_time == raw[q.id]["end_time"] and q.window_start == raw[q.id]["start_time"]
               for q in questions)
    # every answer timestamp falls in its question's window (+-5 s) on America/Los_Angeles clocks
    assert all(q.window_start - 5 <= t <= q.context_time + 5 for q in questions for t in q.evidence_times)
    assert sum(1 for q in load_navqa_json(path, timezone="America/Chicago")
               if all(q.window_start - 5 <= t <= q.context_time + 5 for t in q.evidence_times)) == 0
    left = next(q for q in questions if q.id == "LONG_5a6cef0c-175d-4779-bfd4-f7b193fb9039")
    assert left.time == dt.datetime(2023, 1, 16, 15, 59, tzinfo=dt.timezone.utc).timestamp()
    assert round((left.context_time - left.time) / 60, 2) == 4.04   # "4 minutes ago"
    assert sum(bool(q.unscored) for q in questions) == 12          # the position placeholders


def test_real_openeqa():
    path = shared_data("questions", "open-eqa-v0.json")
    questions = load_openeqa_json(path)
    assert len(questions) == 1636 and {q.type for q in questions} == {"text"}
    assert len({q.group for q in questions}) == 7 and sum(len(q.texts) > 1 for q in questions) == 263
    assert questions[0].question == "What is the white object on the wall above the TV?"
    assert questions[0].texts == ["Air conditioning unit"] and questions[0].context_time is None
    assert len(load_questions(path, episode="hm3d-v0/000-hm3d-BFRyYbPCCPE")) < 100


# -- hand-written files ---------------------------------------------------------------------------------
def test_navqa_csv_with_multiline_header_and_its_errors(tmp_path):
    path = tmp_path / "navqa.csv"
    path.write_text(NAVQA_HEADER
                    + "U1,9,Did you see a bike?,7:59:10,binary,,Yes,environmental\n"
                    + 'U2,9,How long were you inside?,"7:59:00,7:59:30",duration,"I was inside\nfor 0.5 minutes",0.5,\n'
                    + "U3,9,Where is the bench?,7:59:20,position,,\"[1.5, -2.0]\",spatial\n"
                    + "U4,9,When did you stop?,7:59:05,time,,[minutes] ago,temporal\n")
    q = {x.id: x for x in load_questions(path)}
    assert detect_format(path) == "navqa_csv" and len(q) == 4
    assert q["U1"].binary == "yes" and q["U2"].duration_minutes == 0.5 and q["U2"].line == 7
    assert q["U3"].position == [1.5, -2.0] and not q["U3"].unscored     # a filled position is scored
    assert q["U4"].clock_times == ["7:59:05"] and q["U4"].time is None  # no day until the bag gives one
    path.write_text(NAVQA_HEADER + "U1,9,Did you see a bike?,7:59:10,binary,,Yes,x\nU2,9,Short row,7:59:10,binary\n")
    with pytest.raises(QuestionFormatError, match=r"navqa\.csv:6: 5 columns, the header has 8"):
        load_navqa_csv(path)
    path.write_text(NAVQA_HEADER + "U1,9,Did you see a bike?,7:59:10,binary,,Yes,x\nU2,9,Odd?,7:59:10,smell,,x,y\n")
    with pytest.raises(QuestionFormatError, match=r"navqa\.csv:6: unknown type 'smell'"):
        load_navqa_csv(path)
    path.write_text(NAVQA_HEADER + "U1,9,When?,25:00:00,time,,[minutes] ago,x\n")
    with pytest.raises(QuestionFormatError, match=r"navqa\.csv:5: Timestamp with answer: '25:00:00'"):
        load_navqa_csv(path)


def test_personeqa_csv_types_clock_and_errors(tmp_path):
    path = tmp_path / "question.csv"
    path.write_text(PERSONEQA_HEADER
                    + "p1;Who is in the lab?;2026-01-15 22:00:00;person;Nemo, Pearl;2026-01-15 10:00:00;1;;0\n"
                    + "p2;Was Pearl here today?;2026-01-15 22:00:00;bool;TRUE;;1;;0\n"
                    + "p3;When did Nigel come in?;2026-01-15 22:00:00;time;2026-01-15 09:08:03;;1;;0\n"
                    + "p4;How long did Nigel stay?;2026-01-15 22:00:00;duration;100;;1;11:31 - 13:11;0\n"
                    + "p5;Where is the ball?;2026-01-15 22:00:00;spatial;waypoint_91;;1;;0\n"
                    + "p6;What is Nigel doing?;2026-01-15 22:00:00;semantic;Sitting on the floor;;1;;0\n"
                    + "p7;Not ready yet?;2026-01-15 22:00:00;bool;maybe;;0;;0\n"
                    + "p8;Was it sunny?;2026-01-15 22:00:00;bool;maybe;;1;;0\n")
    assert detect_format(path) == "personeqa_csv"
    q = {x.id: x for x in load_personeqa_csv(path, timezone="Europe/Berlin")}
    assert sorted(q) == ["p1", "p2", "p3", "p4", "p5", "p6", "p8"]           # ready 0: left out
    assert q["p1"].persons == ["Nemo", "Pearl"] and q["p1"].type == "persons" and q["p1"].group == "person"
    assert q["p2"].binary == "yes" and q["p4"].duration_minutes == 100 and q["p5"].waypoint == "waypoint_91"
    assert q["p3"].time == dt.datetime(2026, 1, 15, 8, 8, 3, tzinfo=dt.timezone.utc).timestamp()  # CET = UTC+1
    assert q["p1"].context_time == dt.datetime(2026, 1, 15, 21, tzinfo=dt.timezone.utc).timestamp()
    assert q["p6"].texts == ["Sitting on the floor"] and q["p4"].extra["comment"] == "11:31 - 13:11"
    assert "not a parsable bool" in q["p8"].unscored and not q["p2"].unscored
    path.write_text(PERSONEQA_HEADER + "p1;Who?;2026-01-15 22:00:00;person;Nemo;;1;;0\n"
                    + "p2;When?;15.01.2026 22:00;time;2026-01-15 09:08:03;;1;;0\n")
    with pytest.raises(QuestionFormatError, match=r"question\.csv:3: context_time '15\.01\.2026 22:00'"):
        load_personeqa_csv(path)
    path.write_text(PERSONEQA_HEADER + "p1;Who?;2026-01-15 22:00:00;person\n")
    with pytest.raises(QuestionFormatError, match=r"question\.csv:2: 4 fields, the header has 9"):
        load_personeqa_csv(path)


def test_filled_navqa_json_detection_and_offsets(tmp_path):
    filled = tmp_path / "human_qa.json"
    filled.write_text(json.dumps({"version": 0.1, "data": [
        {"id": "A", "type": "position", "start_time": 100.0, "end_time": 700.0,
         "question": "You started moving at X. The current time is Y. \n Where is the bench?",
         "answers": {"position": [1.0, 2.0, 0.0]}},
        {"id": "B", "type": "time", "start_time": 100.0, "end_time": 700.0, "question": "When did you stop?",
         "answers": {"text": ["4.0 minutes ago"], "time": 4.0}},
        {"id": "C", "type": "binary", "start_time": 100.0, "end_time": 700.0, "question": "Any bikes?",
         "answers": {"text": ["yes", "yes"]}}]}))
    q = {x.id: x for x in load_questions(filled)}
    assert q["A"].question == "Where is the bench?" and q["A"].position == [1.0, 2.0, 0.0] and not q["A"].unscored
    assert q["B"].time == 700.0 - 240.0 and q["B"].context_time == 700.0 and q["C"].binary == "yes"
    lone = tmp_path / "lone" / "qa_unfilled.json"
    lone.parent.mkdir()
    lone.write_text(json.dumps({"data": [{"id": "A", "start_time": 1.0, "end_time": 2.0}]}))
    with pytest.raises(QuestionFormatError, match="only the question windows"):
        load_questions(lone)
    (tmp_path / "bad.json").write_text('{"data": [\n{"id": 1,,}]}')
    with pytest.raises(QuestionFormatError, match=r"bad\.json:2: not valid JSON"):
        load_navqa_json(tmp_path / "bad.json")
    (tmp_path / "what.txt").write_text("hello\n")
    with pytest.raises(QuestionFormatError, match="unknown question format"):
        load_questions(tmp_path / "what.txt")
    questions = list(q.values())
    assert auto_offset(questions, 400.0, 800.0) == 0.0               # the file's times overlap the bag
    assert auto_offset(questions, 10_000.0, 10_050.0) == 10_000.0 - 100.0
    moved = shift_times(questions, 50.0)
    assert moved[1].time == q["B"].time + 50 and moved[1].window_start == 150.0 and q["B"].window_start == 100.0


# -- replay ---------------------------------------------------------------------------------------------------
def _check_every_question_answered_or_unscored(results: dict) -> None:
    for row in results["answers"]:
        assert row["answer"]["status"] in ("ok", "no_answer", "error")
        if row["scored"]:
            assert row["correct"] in (True, False) and not row["unscored"]
        else:
            assert row["unscored"] and row["correct"] is None


def test_personeqa_replay_end_to_end_with_the_default_memory(tmp_path):
    """The embedded default store and perception on a 10 s simulated bag (2027-01-15 08:00 UTC)."""
    small_bag(tmp_path / "bag", frames=100)
    path = tmp_path / "q.csv"
    path.write_text(PERSONEQA_HEADER
                    + "a1;Did you see anyone today?;2027-01-15 08:00:09;bool;False;2027-01-15 08:00:05;1;;0\n"
                    + "a2;When were you at the dock?;2027-01-15 08:00:09;time;2027-01-15 08:00:02;;1;;0\n"
                    + "a3;How long were you at the dock?;2027-01-15 08:00:09;duration;0.15;;1;;0\n"
                    + "a4;What did you see at the dock?;2027-01-15 08:00:09;semantic;a grey wall;;1;;0\n"
                    + "a5;Who did you see?;2027-01-15 08:00:09;person;Nemo;;1;;0\n"
                    + "a6;When did you see the ball?;2027-01-16 08:00:09;time;2027-01-16 07:00:00;;1;;0\n")
    results = run_public_eval(path, tmp_path / "bag", tmp_path / "out", progress=False)
    _check_every_question_answered_or_unscored(results)
    rows = {r["id"]: r for r in results["answers"]}
    assert results["ingest"]["frames"] == 100 and results["ingest"]["stored"] > 0 and results["time_offset_s"] == 0
    assert rows["a2"]["asked_at"] == T_START + 9 and rows["a1"]["scored"] and rows["a4"]["scored"]
    assert "nobody in the memory has a name" in rows["a5"]["unscored"]
    assert "evidence is outside the bag" in rows["a6"]["unscored"]
    assert results["overall"] == {"questions": 6, "scored": 4, "unscored": 2,
                                  "accuracy": results["overall"]["accuracy"]}
    assert set(results["per_group"]) == {"bool", "time", "duration", "semantic", "person"}
    assert results["per_group"]["semantic"]["method"] == "keyword"
    report = (tmp_path / "out" / "report.md").read_text()
    assert "6 questions: 4 scored, 2 unscored" in report and "| a5 | person |" in report
    assert json.loads((tmp_path / "out" / "results.json").read_text())["overall"]["scored"] == 4


def test_navqa_replay_shifts_the_clock_and_keeps_placeholders_unscored(tmp_path):
    small_bag(tmp_path / "bag", frames=100)
    path = tmp_path / "navqa.csv"
    path.write_text(NAVQA_HEADER
                    + "U1,9,Did you see a wall?,7:59:02,binary,,no,environmental\n"
                    + "U2,9,Where is the closest place to sit?,7:59:03,position,,[position],spatial\n"
                    + "U3,9,When did you reach the dock?,7:59:00,time,,[minutes] ago,temporal\n"
                    + 'U4,9,How long were you at the dock?,"7:59:00,7:59:08",duration,,0.13,temporal\n'
                    + "U5,9,What colour was the wall?,7:59:05,text,The wall was grey,,descriptive\n"
                    + "U6,9,Did you see a bike?,7:59:01,binary,,yes,environmental\n")
    results = run_public_eval(path, tmp_path / "bag", tmp_path / "out", limit=5, progress=False, **LIGHT)
    _check_every_question_answered_or_unscored(results)
    rows = {r["id"]: r for r in results["answers"]}
    assert len(rows) == 5 and results["timezone"] == "America/Los_Angeles"
    # 7:59:00 PST on the bag's day (2027-01-15) is 8 h after the bag: the earliest moves to its start
    assert results["time_offset_s"] == pytest.approx(T_START - (T_START + 7 * 3600 + 59 * 60))
    assert rows["U3"]["truth"]["time"] == pytest.approx(T_START) and rows["U3"]["scored"]
    assert rows["U3"]["asked_at"] == pytest.approx(results["bag_end"])     # no context time: the bag's end
    assert "placeholder" in rows["U2"]["unscored"] and rows["U1"]["scored"] and rows["U4"]["scored"]
    assert results["per_group"]["position"]["scored"] == 0 and "shifted" in results["warnings"][0]


def _spot_bag(path, frames: int = 30, topic: str = "/spot/camera/frontleft/image/compressed") -> None:
    with BagWriter(path) as bag:
        for i in range(frames):
            t = T_START + 0.1 * i
            bag.clock(t)
            bag.odometry(t, 0.1 * i, 0.0, 0.0)
            bag.tf(t, 0.1 * i, 0.0, 0.0)
            bag.image(t, np.full((48, 64, 3), 20 + 5 * i, np.uint8), topic=topic)


def test_a_bag_with_another_camera_topic_needs_a_remap(tmp_path):
    _spot_bag(tmp_path / "spot")
    path = tmp_path / "q.csv"
    path.write_text(PERSONEQA_HEADER + "s1;Did you see anyone?;2027-01-15 08:00:02;bool;false;;1;;0\n")
    with pytest.raises(BagError, match=r"no frames to ingest: the camera topic /camera/color/image_raw/compressed "
                                       r"is not in the bag.*--remap /spot/camera/frontleft/image/compressed:="
                                       r"/camera/color/image_raw/compressed"):
        run_public_eval(path, tmp_path / "spot", tmp_path / "out", progress=False, **LIGHT)
    with pytest.raises(ValueError, match="context_time 'soon'"):
        run_public_eval(path, tmp_path / "spot", tmp_path / "out", context_time="soon", progress=False,
                        remaps={"/spot/camera/frontleft/image/compressed": "image_topic"}, **LIGHT)
    assert not (tmp_path / "out" / "memory").exists()            # refused before ingesting
    results = run_public_eval(path, tmp_path / "spot", tmp_path / "out", progress=False,
                              remaps={"/spot/camera/frontleft/image/compressed": "/camera/color/image_raw/compressed"},
                              **LIGHT)
    assert results["ingest"]["frames"] == 30 and results["ingest"]["stored"] > 0
    assert results["topics"]["image_topic"] == "/spot/camera/frontleft/image/compressed"
    _check_every_question_answered_or_unscored(results)
    assert topics_with_remaps({"/spot/odometry": "odom_topic"}).odom_topic == "/spot/odometry"
    with pytest.raises(ValueError, match="'/front' is none of the stack's topics"):
        topics_with_remaps({"/a": "/front"})


def test_openeqa_replay_judged_by_llm_match(tmp_path):
    from scripted_llm import ScriptedLLM, content, first_user_message
    small_bag(tmp_path / "bag", frames=30)
    path = tmp_path / "open-eqa.json"
    path.write_text(json.dumps([
        {"question": "What colour is the wall?", "answer": "Grey", "category": "attribute recognition",
         "question_id": "o1", "episode_history": "sim/small", "extra_answers": ["light grey", "gray"]},
        {"question": "Where is the sofa?", "answer": "Next to the door", "category": "object localization",
         "question_id": "o2", "episode_history": "sim/small"}]))

    def judge(body, n):
        prompt = first_user_message(body)
        return content("5" if "Question: What colour" in prompt else "2" if "Your mark" in prompt else "{}")
    with ScriptedLLM([], choose=judge) as llm:
        results = run_public_eval(path, tmp_path / "bag", tmp_path / "out", llm_base_url=llm.base_url,
                                  llm_model="judge", progress=False, **LIGHT)
        prompts = [first_user_message(r) for r in llm.requests if "Your mark" in first_user_message(r)]
    assert len(prompts) == 2 and "Answer: Grey (also accepted: light grey; gray)" in prompts[0]
    groups = results["per_group"]
    assert groups["attribute recognition"]["accuracy"] == 1.0 and groups["object localization"]["accuracy"] == 0.0
    assert groups["object localization"]["method"] == "llm_match" and groups["object localization"]["llm_match"] == 0.25
    assert all(r["asked_at"] == results["bag_end"] for r in results["answers"])   # OpenEQA has no times
    assert "LLM-Match (judge)" in (tmp_path / "out" / "report.md").read_text()
