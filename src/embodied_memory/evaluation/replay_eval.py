"""``embodied-memory eval --questions FILE --bag BAG``: a public benchmark replayed through the stack.

The bag (CODa for NaVQA, a user's own Spot recording for PersonEQA, a rendered episode for
OpenEQA) is ingested into a fresh embedded memory under ``out_dir/memory`` (keyframe selection
PSFR, 10 s segments, 6 frames each, as LVMem/ReMEmbR; the default perception), every question is
asked as of its context time, and the answers are scored by the papers' metrics:

* position (NaVQA): Euclidean error in m (over the dimensions the truth has), within 5 m / 2 m;
* time: error in minutes, within 5 / 1 min (ReMEmbR's error in "minutes ago" at the same "now";
  HUMEMBR's +-5 min); duration: error in minutes, within 5 / 1 min;
* binary: exact yes/no; persons (PersonEQA): exact set, with precision and recall;
* waypoint (PersonEQA spatial): the same waypoint, or within 5 m (HUMEMBR measures the path
  on Spot's graph; here the straight line between the waypoints' mean stored positions);
* text: LLM-Match (OpenEQA's judge prompt, mark >= 4 of 5 correct, plus OpenEQA's aggregate)
  when an endpoint is given, else the offline keyword match (at least half of the answer's
  content words).

A question whose answer cannot be scored is reported "unscored" with the reason, never counted
right or wrong: the file has no parsable answer (NaVQA's "[position]" placeholders), the answer's
evidence lies outside the bag, it is asked before the bag starts, the memory is empty, or
(persons) nobody in the memory has a name.  How the files' clocks meet the bag's: see
``public_questions``.
"""
from __future__ import annotations

import json
import logging
import math
import re
import shutil
from collections import Counter
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Optional, Union

from .public_questions import (NAVQA_TIMEZONE, PublicQuestion, auto_offset, load_questions,
                               resolve_clock_times, shift_times)

from ..sim.scoring import POSITION_M, POSITION_STRICT_M, STOP_WORDS, TIME_MIN, TIME_STRICT_MIN, keyword_match
from .llm_match import JUDGE_CORRECT_MARK

log = logging.getLogger(__name__)

WITHIN_M = (POSITION_M, POSITION_STRICT_M)         # position: correct within the first (sim/scoring.py)
WITHIN_MIN = (TIME_MIN, TIME_STRICT_MIN)           # time and duration: correct within the first
WAYPOINT_RADIUS_M = 5.0
KEYWORD_SHARE = 0.5              # offline: share of the answer's content words named
EVIDENCE_SLACK_S = 5.0           # NaVQA annotators' timestamps are a few seconds outside their windows
ANSWER_FIELDS = ("status", "type", "text", "binary", "position", "time", "time_iso", "minutes_ago",
                 "duration_minutes", "persons", "waypoint", "error", "planner", "tokens_in", "tokens_out",
                 "tool_calls", "latency_s")
TimeArg = Union[None, float, str]


def topics_with_remaps(remaps: dict[str, str], base=None):
    """``TopicParams`` reading the bag's topics: each ``FROM -> TO`` says the bag records as FROM
    what the stack reads as TO (a stack topic name, e.g. /camera/color/image_raw/compressed, or a
    TopicParams field, e.g. image_topic), as ``replay --remap FROM:=TO``."""
    from ..ingest.offline import TopicParams
    base = base or TopicParams()
    names = {f.name: getattr(base, f.name) for f in fields(base) if f.name.endswith("_topic")}
    changes = {}
    for source, target in remaps.items():
        hit = [n for n, v in names.items() if v and v == target] or ([target] if target in names else [])
        if not source or not hit:
            raise ValueError(f"remap {source}:={target}: {target!r} is none of the stack's topics ("
                             + ", ".join(f"{n}={v or '-'}" for n, v in names.items()) + ")")
        changes.update({n: source for n in hit})
    return replace(base, **changes)


def _bag_span(bag: str, topics) -> tuple[float, float]:
    from ..ingest.bag_reader import Bag, BagError
    with Bag(bag) as b:
        present = b.topics
        start = b.start_ns * 1e-9
        end = start + b.duration_s
    if topics.image_topic not in present:
        images = [t.name for t in present.values() if t.msgtype.endswith(("/Image", "/CompressedImage"))]
        raise BagError(f"{bag}: no frames to ingest: the camera topic {topics.image_topic} is not in the bag"
                       + (f" (image topics there: {', '.join(images)}); remap one onto it, e.g. "
                          f"--remap {images[0]}:={type(topics)().image_topic}" if images else
                          f"; it has {', '.join(sorted(present))}"))
    return start, end


def _asking_time(q: PublicQuestion, context_time: TimeArg, start: float, end: float) -> float:
    try:
        if context_time is None:
            return q.context_time if q.context_time is not None else end
        if context_time == "end":
            return end
        if isinstance(context_time, str) and context_time.startswith("+"):
            return start + float(context_time[1:])
        return float(context_time)
    except ValueError as exc:
        raise ValueError(f"context_time {context_time!r}: 'end', '+SECONDS' (after the bag's start) or a "
                         "UNIX time") from exc


def _unscored_by_bag(q: PublicQuestion, asked: float, start: float, end: float) -> str:
    """Why the bag cannot hold this question's answer ("" = it may)."""
    if asked < start:
        return f"asked {start - asked:.0f} s before the bag starts: the memory is empty then"
    if q.evidence_times and not any(start - EVIDENCE_SLACK_S <= t <= end + EVIDENCE_SLACK_S
                                    for t in q.evidence_times):
        return "the answer's evidence is outside the bag (" + ", ".join(
            f"{(t - start):+.0f} s from its start" for t in q.evidence_times[:3]) + f", bag {end - start:.0f} s)"
    return ""


# -- scoring ---------------------------------------------------------------------------------------------
def _content_words(text: str) -> list[str]:
    return [w for w in dict.fromkeys(re.findall(r"[a-z0-9]+", text.lower())) if w not in STOP_WORDS]


def _score_text(q: PublicQuestion, ans: dict, judge) -> tuple[Optional[bool], Optional[float], str, Optional[int]]:
    from ..llm.chat_client import LLMError
    from .llm_match import JudgeError, llm_match
    response = " ".join(x for x in (ans.get("text", ""), ans.get("binary", "")) if x)
    if judge is not None:
        truth = q.texts[0] + (f" (also accepted: {'; '.join(q.texts[1:])})" if len(q.texts) > 1 else "")
        try:
            mark = llm_match(judge, q.question, truth, response)
            return mark >= JUDGE_CORRECT_MARK, None, f"LLM-Match {mark}/5", mark
        except (JudgeError, LLMError) as exc:
            log.warning("LLM-Match judge failed (%s): keyword match instead", exc)
    shares = [keyword_match(words, response) for words in map(_content_words, q.texts) if words]
    share = max(shares, default=0.0)
    return share >= KEYWORD_SHARE, None, f"keywords {share:.2f}", None


def _waypoint_xy(store, waypoint: str) -> Optional[tuple[float, float]]:
    for name in dict.fromkeys((waypoint, waypoint.lower())):
        points = [o["position"] for o in store.waypoint_observations(name, limit=200)
                  if o.get("position") and "robot_waypoint" not in o]      # where the robot was there
        if points:
            return (sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points))
    return None


def score(q: PublicQuestion, ans: dict, names_of: dict[str, str], store, judge) -> dict:
    """{correct, error (m | min | None), compared, [mark, precision, recall]} for one answer."""
    if q.type == "text":
        correct, _, compared, mark = _score_text(q, ans, judge)
        return {"correct": correct, "error": None, "compared": compared, **({"mark": mark} if mark else {})}
    if q.type == "binary":
        given = ans.get("binary") or ""
        return {"correct": given == q.binary, "error": None, "compared": f"{given or 'no yes/no'} vs {q.binary}"}
    if q.type == "persons":
        given = {names_of.get(p, p).strip().lower() for p in ans.get("persons") or []}
        truth = {p.lower() for p in q.persons}
        hit = len(given & truth)
        return {"correct": given == truth, "error": None, "compared": f"{sorted(given)} vs {sorted(truth)}",
                "precision": hit / len(given) if given else 0.0, "recall": hit / len(truth)}
    if q.type == "waypoint":
        given = ans.get("waypoint") or ""
        if given and given.lower() == q.waypoint.lower():
            return {"correct": True, "error": 0.0, "compared": given}
        here = _waypoint_xy(store, given) if given else (tuple(ans["position"][:2]) if ans.get("position") else None)
        there = _waypoint_xy(store, q.waypoint)
        if here is None or there is None:
            return {"correct": False, "error": None, "compared": f"{given or 'no waypoint'} vs {q.waypoint}"}
        dist = math.dist(here, there)
        return {"correct": dist <= WAYPOINT_RADIUS_M, "error": dist, "compared": f"{given} {dist:.1f} m from {q.waypoint}"}
    if q.type == "position":
        given = ans.get("position")
        if not given:
            return {"correct": False, "error": None, "compared": "no position"}
        err = math.dist(given[:len(q.position)], q.position[:len(given)])
        return {"correct": err <= WITHIN_M[0], "error": err, "compared": f"{err:.1f} m"}
    given = ans.get("time") if q.type == "time" else ans.get("duration_minutes")
    if given is None:
        return {"correct": False, "error": None, "compared": f"no {q.type}"}
    err = abs(given - q.time) / 60.0 if q.type == "time" else abs(given - q.duration_minutes)
    return {"correct": err <= WITHIN_MIN[0], "error": err, "compared": f"{err:.1f} min"}


def _metrics(rows: list[dict]) -> dict:
    scored = [r for r in rows if r["scored"]]
    kind = rows[0]["type"]
    out = {"type": kind, "questions": len(rows), "scored": len(scored), "unscored": len(rows) - len(scored),
           "answered": sum(r["answer"]["status"] == "ok" for r in rows),
           "accuracy": round(sum(r["correct"] for r in scored) / len(scored), 3) if scored else None}
    errors = [r["error"] for r in scored if r["error"] is not None]
    if kind in ("position", "waypoint", "time", "duration"):
        unit, limits = ("m", WITHIN_M) if kind in ("position", "waypoint") else ("min", WITHIN_MIN)
        out[f"mean_error_{unit}"] = round(sum(errors) / len(errors), 3) if errors else None
        out["with_error"] = len(errors)
        if kind != "waypoint":
            for limit in limits:
                out[f"within_{limit:g}{unit}"] = round(sum(e <= limit for e in errors) / len(scored), 3) \
                    if scored else None
    if kind == "persons" and scored:
        out["precision"] = round(sum(r["precision"] for r in scored) / len(scored), 3)
        out["recall"] = round(sum(r["recall"] for r in scored) / len(scored), 3)
    if kind == "text":
        marks = [r["mark"] for r in scored if r.get("mark")]
        if marks:
            from .llm_match import llm_match_accuracy
            out["llm_match"] = round(llm_match_accuracy(marks), 3)
        out["method"] = "llm_match" if marks else "keyword"
    return out


# -- the run -------------------------------------------------------------------------------------------------
def run_public_eval(questions_file, bag, out_dir, remaps: Optional[dict[str, str]] = None, planner: str = "rules",
                    llm_base_url: str = "", llm_model: str = "", fmt: str = "auto", limit: Optional[int] = None,
                    progress: bool = True, *, time_offset: TimeArg = "auto", context_time: TimeArg = None,
                    timezone: Optional[str] = None, episode: str = "", csv_path=None, topics=None,
                    selection=None, store_params=None, perception_params=None) -> dict:
    """Ingest ``bag`` into a fresh memory under ``out_dir``, ask every question of
    ``questions_file``, score, write ``report.md`` and ``results.json``; returns the latter.
    ``time_offset``: seconds added to the file's times, or "auto" (``auto_offset``).
    ``context_time``: None = each question's own (else the bag's end); "end"; "+S" = S seconds
    after the bag's start; a UNIX time: every question is asked then.  ``remaps``: bag topic ->
    stack topic (``topics_with_remaps``).  ``limit``: the first N questions (None or 0: all).
    ``timezone``: the files' wall clock and the agent's "today" (default: NaVQA's zone for NaVQA,
    else UTC).  ``episode``: one NaVQA sequence / OpenEQA episode.  ``csv_path``: the NaVQA CSV
    for a ``qa_unfilled.json``.  ``topics``, ``selection``, ``store_params``,
    ``perception_params``: instead of the defaults (the store's and perception's ``data_dir`` is
    always ``out_dir/memory``).  Raises ``QuestionFormatError`` (the file), ``BagError`` (the bag;
    no camera topic: the remap to give), ``ValueError`` (an argument) before ingesting."""
    from ..agent.query_agent import AgentParams, QueryAgent
    from ..agent.tools import StoreMemoryClient
    from ..calendar_windows import local_date
    from ..consolidate_memory import attach_in_process
    from ..ingest.offline import ingest_bag
    from ..ingest.selection import SelectionParams
    from ..params import ATTACH_AFTER_IDLE_S, StoreParams
    from ..perception.pipeline import Perception, PerceptionParams
    from ..progress import progress_bar
    from ..store import open_store

    out_dir, bag = Path(out_dir), str(bag)
    questions = load_questions(questions_file, fmt, timezone=timezone, episode=episode, csv_path=csv_path)
    source = questions[0].source if questions else fmt
    tz = timezone or (NAVQA_TIMEZONE if source.startswith("navqa") else "UTC")
    questions = questions[:limit] if limit else questions
    agent_params = AgentParams(planner=planner, llm_base_url=llm_base_url, llm_model=llm_model, timezone=tz)
    agent_params.validate()
    topics = topics_with_remaps(remaps or {}, topics)
    start, end = _bag_span(bag, topics)
    warnings = []
    questions = [resolve_clock_times(q, local_date(start, tz), tz) for q in questions]
    try:
        offset = auto_offset(questions, start, end) if time_offset == "auto" else float(time_offset or 0.0)
    except ValueError as exc:
        raise ValueError(f"time_offset {time_offset!r}: 'auto' or seconds") from exc
    if offset:
        warnings.append(f"the file's times were shifted by {offset:+.0f} s onto the bag's clock "
                        f"({'auto: they miss the bag' if time_offset == 'auto' else 'time_offset'})")
    questions = shift_times(questions, offset)
    asking = [_asking_time(q, context_time, start, end) for q in questions]
    episodes = sorted({q.episode for q in questions if q.episode})
    if len(episodes) > 1:
        warnings.append(f"questions of {len(episodes)} episodes ({', '.join(episodes[:8])}) against one bag: "
                        "select the bag's one (episode=)")

    data = out_dir / "memory"
    if data.exists():
        shutil.rmtree(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(replace(store_params or StoreParams(), data_dir=str(data), timezone=tz))
    perception = None
    try:
        store.warm_up()
        perception = Perception(replace(perception_params or PerceptionParams(), data_dir=str(data)))
        report = ingest_bag(bag, store, perception, topics=topics, progress=progress,
                            selection=selection or SelectionParams(policy="psfr", segment_s=10.0,
                                                                   frames_per_segment=6),
                            on_idle=lambda: attach_in_process(store, perception.identities), idle_s=ATTACH_AFTER_IDLE_S)
        log.info("%s", report.summary())
        if not report.stored:
            warnings.append(f"the memory is empty: none of the bag's {report.frames} frames was stored")
        names_of = {i.identity_id: i.display_name for i in store.identities() if i.display_name}
        agent = QueryAgent(StoreMemoryClient(store), agent_params)
        judge = None
        if llm_base_url:
            from ..llm.chat_client import ChatClient, LLMConfig
            judge = ChatClient(LLMConfig(base_url=llm_base_url, model=llm_model, max_tokens=8))
        rows = []
        for q, asked in progress_bar(iterable=list(zip(questions, asking)), desc="questions", unit="q",
                                     disable=not progress):
            ans = agent.ask(q.question, as_of=asked, planner=planner).to_dict()
            reason = q.unscored or _unscored_by_bag(q, asked, start, end) or (
                "the memory is empty" if not report.stored else "") or (
                "nobody in the memory has a name (person answers are unnamed identities)"
                if q.type == "persons" and not names_of else "")
            row = {"id": q.id, "question": q.question, "group": q.group, "type": q.type, "episode": q.episode,
                   "line": q.line, "asked_at": asked, "truth": _truth(q), "answer": {k: ans.get(k) for k in ANSWER_FIELDS},
                   "scored": not reason, "unscored": reason, "correct": None, "error": None, "compared": ""}
            if not reason:
                row.update(score(q, ans, names_of, store, judge))
            rows.append(row)
    finally:
        if perception is not None:
            perception.close()
        store.close()
    groups = {g: _metrics([r for r in rows if r["group"] == g]) for g in dict.fromkeys(r["group"] for r in rows)}
    scored = [r for r in rows if r["scored"]]
    results = {
        "questions_file": str(questions_file), "format": source, "bag": bag, "bag_start": start, "bag_end": end,
        "time_offset_s": offset, "context_time": context_time, "timezone": tz, "remaps": dict(remaps or {}),
        "topics": asdict(topics), "planner": planner, "judge": llm_model or llm_base_url or "",
        "ingest": {"frames": report.frames, "keyframes": report.keyframes, "stored": report.stored,
                   "wall_s": round(report.wall_s, 2), "summary": report.summary()},
        "overall": {"questions": len(rows), "scored": len(scored), "unscored": len(rows) - len(scored),
                    "accuracy": round(sum(r["correct"] for r in scored) / len(scored), 3) if scored else None},
        "per_group": groups, "unscored_reasons": dict(Counter(_reason_kind(r["unscored"]) for r in rows
                                                              if r["unscored"])),
        "warnings": warnings, "answers": rows}
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (out_dir / "report.md").write_text(_report(results))
    return results


def _truth(q: PublicQuestion) -> dict:
    value = {"position": q.position, "time": q.time, "duration": q.duration_minutes, "binary": q.binary,
             "persons": q.persons, "waypoint": q.waypoint, "text": q.texts}.get(q.type)
    return {"raw": q.answer, q.type: value, **({"evidence_times": q.evidence_times} if q.evidence_times else {})}


def _reason_kind(reason: str) -> str:
    """A reason without its particulars (for the report's counts): before any "(", numbers as N."""
    return re.sub(r"[-+]?\d[\d.:]*", "N", reason.split(" (")[0]).strip()[:120]


def _report(r: dict) -> str:
    o = r["overall"]
    lines = ["# Public benchmark replay", "",
             f"Questions: `{r['questions_file']}` ({r['format']}); bag: `{r['bag']}` "
             f"({r['bag_end'] - r['bag_start']:.1f} s); planner: {r['planner']}; text judged by "
             f"{'LLM-Match (' + r['judge'] + ')' if r['judge'] else 'keyword match (no endpoint)'}.",
             f"Clock: file times {r['time_offset_s']:+.0f} s, time zone {r['timezone']}, asked at "
             f"{r['context_time'] or 'each question' + chr(39) + 's context time (else the end of the bag)'}; "
             f"remaps: {', '.join(f'{k}:={v}' for k, v in r['remaps'].items()) or 'none'}.",
             f"Ingest: {r['ingest']['summary']}", "",
             f"**{o['questions']} questions: {o['scored']} scored, {o['unscored']} unscored; accuracy "
             f"{'-' if o['accuracy'] is None else format(o['accuracy'], '.2f')} over the scored ones.** This "
             "measures the format and the plumbing against this bag; accuracy means something only on the "
             "recording the questions were written for.", "",
             "| group | scored as | questions | scored | unscored | accuracy | mean error | within |",
             "|---|---|---|---|---|---|---|---|"]
    for g, m in r["per_group"].items():
        error = next((f"{m[k]:.2f} {k.rsplit('_', 1)[1]}" for k in ("mean_error_m", "mean_error_min")
                      if m.get(k) is not None), "-")
        within = ", ".join(f"{k[7:]} {v:.2f}" for k, v in m.items() if k.startswith("within_") and v is not None)
        extra = ", ".join(f"{k} {m[k]:.2f}" for k in ("precision", "recall", "llm_match") if k in m)
        lines.append(f"| {g or '-'} | {m['type']}{' (' + m['method'] + ')' if 'method' in m else ''} | "
                     f"{m['questions']} | {m['scored']} | {m['unscored']} | "
                     f"{'-' if m['accuracy'] is None else format(m['accuracy'], '.2f')} | {error} | "
                     f"{within or extra or '-'} |")
    if r["warnings"]:
        lines += ["", "Warnings:"] + [f"- {w}" for w in r["warnings"]]
    if r["unscored_reasons"]:
        lines += ["", "Unscored (never counted right or wrong):"] + [
            f"- {n} x {reason}" for reason, n in sorted(r["unscored_reasons"].items(), key=lambda kv: -kv[1])]
    lines += ["", "| id | group | question | truth | answer | result |", "|---|---|---|---|---|---|"]
    for a in r["answers"]:
        cell = (lambda s: str(s).replace("|", "/").replace("\n", " ")[:80])
        answer = a["answer"]["text"] or a["answer"]["error"] or a["answer"]["status"]
        result = ("unscored: " + a["unscored"]) if not a["scored"] else \
            f"{'right' if a['correct'] else 'wrong'} ({a['compared']})"
        lines.append(f"| {cell(a['id'])} | {cell(a['group'])} | {cell(a['question'])} | {cell(a['truth']['raw'])} | "
                     f"{cell(answer)} | {cell(result)} |")
    return "\n".join(lines) + "\n"
