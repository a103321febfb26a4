"""The public question formats (NaVQA, OpenEQA, PersonEQA) as ``PublicQuestion`` records.

Formats (``load_questions`` tells them apart by extension and header/keys):

* ``navqa_csv`` -- ReMEmbR's ``data.csv`` (``../shared/data/questions/navqa_data.csv``): comma
  separated, quoted headers that span lines (``"Timestamp \\nwith answer"``); columns UUID, Seq ID,
  Question, Timestamp with answer, Type (binary | position | time | duration | text), Text answer,
  Parsable answer, Question Category.  One file covers 7 CODa sequences (``episode`` = Seq ID).
  Position answers are the placeholder ``[position]`` (ReMEmbR fills them from CODa poses):
  unscored unless a real ``[x, y(, z)]`` is written there.  Time answers are the template
  ``[minutes] ago``: the truth is the answer timestamp.
* ``navqa_json`` -- a per-sequence file.  ``qa_unfilled.json`` (``navqa_qa_unfilled_0.json``)
  holds NO question text and no answers: per question id only its memory window (``start_time``,
  ``end_time``, UNIX s, and ``length_category`` SHORT | MEDIUM | LONG, ``file_info`` naming the CODa
  frames); it is read together with the CSV (``csv=``, or ``navqa_data.csv`` / ``data.csv`` found
  beside it or one folder up).  ReMEmbR's filled ``human_qa.json`` (``form_question_jsons.py``, after
  CODa poses are available) carries question, type and ``answers`` (position [x, y, z], time as
  minutes before ``end_time``, duration in minutes, text) and is read alone.
* ``openeqa_json`` -- OpenEQA's list of {question, answer, category, question_id,
  episode_history, extra_answers?}: free-form text answers (LLM-Match), no times.
* ``personeqa_csv`` -- HUMEMBR's ``question.csv``, semicolon separated:
  ``id;question;context_time;type;answer;optimal_context;ready;comment;multiple_days`` with types
  person | bool | time | duration (minutes) | spatial (a waypoint id) | semantic.  Rows with
  ``ready`` 0 are left out, as HUMEMBR's evaluation does.

Clocks.  Every time in a ``PublicQuestion`` is UNIX seconds, converted as follows:

* NaVQA windows: ``end_time`` is when the question is asked (``context_time``), ``start_time``
  the window start (ReMEmbR loads only that window's memory; here the memory holds the whole bag
  up to the context time).
* NaVQA answer timestamps (``7:59:00``) are local wall-clock times on the sequence's day in
  ``NAVQA_TIMEZONE`` (ReMEmbR converts them with ``time.localtime`` of its machine: every answer
  of sequence 0 falls inside its question's window in America/Los_Angeles and in no other US
  zone).  The day is the window's start day; with the CSV alone there is no day and no context
  time: ``resolve_clock_times`` puts the timestamps on the bag's day (``replay_eval`` does).
* PersonEQA ``context_time`` / time answers / ``optimal_context`` are local "YYYY-MM-DD HH:MM:SS"
  in the site's time zone (``timezone``, default UTC: give yours).
* OpenEQA has none: its questions are asked at the end of the bag.

A recording rarely shares the files' clock (a simulated bag, a re-recorded route):
``shift_times`` moves every time by an offset and ``auto_offset`` picks one that puts the
file's earliest time at the bag's start when the file's times miss the bag altogether
(``eval --time-offset``); ``eval --context-time`` asks every question at one time instead.
``evidence_times`` (NaVQA answer timestamps, PersonEQA ``optimal_context``, time answers) say when
the answer was in view: a question whose evidence lies outside the bag is reported unscored.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from ..calendar_windows import TimeZone, as_zone, clock_time, local_date

log = logging.getLogger(__name__)

FORMATS = ("navqa_csv", "navqa_json", "openeqa_json", "personeqa_csv")
NAVQA_TIMEZONE = "America/Los_Angeles"
NAVQA_TYPES = {"binary": "binary", "position": "position", "time": "time", "duration": "duration", "text": "text"}
PERSONEQA_TYPES = {"person": "persons", "bool": "binary", "time": "time", "duration": "duration",
                   "spatial": "waypoint", "semantic": "text"}
PERSONEQA_COLUMNS = ("id", "question", "context_time", "type", "answer", "optimal_context", "ready", "comment",
                     "multiple_days")
NAVQA_COLUMNS = ("uuid", "seq id", "question", "timestamp", "type", "text answer", "parsable answer",
                 "question category")        # the headers' first words (theirs span lines)
POSITION_PLACEHOLDER = "no position in the file (a placeholder: {!r}); NaVQA fills them from CODa poses"


class QuestionFormatError(ValueError):
    """A question file that cannot be read; the message names the file and line (or entry)."""


@dataclass
class PublicQuestion:
    """One question of a public benchmark, its answer parsed into what can be scored."""

    id: str
    question: str
    type: str                                   # scoring kind: text | binary | position | time | duration
                                                # | persons | waypoint (the agent's answer types)
    context_time: Optional[float]               # UNIX s the question is asked at (None: the file has none)
    answer: str                                 # the file's answer, raw
    source: str                                 # one of FORMATS
    raw_type: str = ""                          # the file's own type (bool, spatial, ...; OpenEQA: "text")
    category: str = ""                          # NaVQA Question Category, OpenEQA category
    episode: str = ""                           # NaVQA Seq ID, OpenEQA episode_history ("" PersonEQA)
    line: int = 0                               # CSV line (of the row's end) or JSON entry (1-based)
    # the parsed answer: the field of ``type`` is set when the answer can be scored
    position: Optional[list[float]] = None      # [x, y(, z)] m
    time: Optional[float] = None                # UNIX s of the answer event
    duration_minutes: Optional[float] = None
    binary: str = ""                            # yes | no
    persons: list[str] = field(default_factory=list)
    waypoint: str = ""
    texts: list[str] = field(default_factory=list)      # acceptable text answers (OpenEQA extra_answers)
    window_start: Optional[float] = None        # NaVQA: the memory window's start (UNIX s)
    evidence_times: list[float] = field(default_factory=list)   # UNIX s the answer was in view
    clock_times: list[str] = field(default_factory=list)        # NaVQA answer timestamps, local HH:MM:SS
    unscored: str = ""                          # why the answer cannot be scored ("" = it can)
    extra: dict = field(default_factory=dict)   # the file's other columns

    @property
    def group(self) -> str:
        """What the paper reports per: the file's type (OpenEQA: its category)."""
        return self.category if self.source == "openeqa_json" else self.raw_type

    def times(self) -> list[float]:
        return [t for t in (self.context_time, self.window_start, self.time, *self.evidence_times) if t is not None]


# -- helpers ---------------------------------------------------------------------------------------
def _fail(path, line, message: str) -> QuestionFormatError:
    return QuestionFormatError(f"{path}:{line}: {message}")


def _number(text: str) -> Optional[float]:
    try:
        return float(text.strip())
    except (ValueError, AttributeError):
        return None


def _yes_no(text: str) -> str:
    word = re.match(r"\s*([a-z]+)", (text or "").lower())
    return {"yes": "yes", "true": "yes", "no": "no", "false": "no"}.get(word.group(1) if word else "", "")


def _position(text: str) -> Optional[list[float]]:
    values = re.fullmatch(r"\s*\[?\s*(-?[\d.eE+-]+)\s*,\s*(-?[\d.eE+-]+)\s*(?:,\s*(-?[\d.eE+-]+)\s*)?\]?\s*",
                          text or "")
    if not values:
        return None
    try:
        return [float(v) for v in values.groups() if v is not None]
    except ValueError:
        return None


def _local(text: str, tz: TimeZone) -> float:
    """UNIX s of local "YYYY-MM-DD HH:MM:SS" in ``tz`` (ValueError if it is not one)."""
    return dt.datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=as_zone(tz)).timestamp()


def _clock(text: str) -> tuple[int, int, float]:
    m = re.fullmatch(r"\s*(\d{1,2}):(\d{2}):(\d{2}(?:\.\d*)?)\s*", text)
    if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59 or float(m.group(3)) >= 60:
        raise ValueError(f"{text!r} is not a clock time H:MM:SS")
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


def resolve_clock_times(q: PublicQuestion, day: dt.date, tz: TimeZone = NAVQA_TIMEZONE) -> PublicQuestion:
    """``q`` with its NaVQA answer timestamps (local HH:MM:SS) put on ``day`` in ``tz``: its
    evidence times and, for a time question with one timestamp, the answer time.  ReMEmbR scores
    time questions with a single timestamp only; several make it unscored."""
    if not q.clock_times or q.evidence_times:
        return q
    times = [clock_time(day, *_clock(c)[:2], tz, second=_clock(c)[2]) for c in q.clock_times]
    q = replace(q, evidence_times=times)
    if q.type == "time" and not q.unscored:
        if len(times) == 1:
            q.time = times[0]
        else:
            q.unscored = f"{len(times)} answer timestamps ({', '.join(q.clock_times)}): no single answer time"
    return q


def shift_times(questions: list[PublicQuestion], offset_s: float) -> list[PublicQuestion]:
    """Copies with every UNIX time moved by ``offset_s`` (the file's clock onto the bag's)."""
    if not offset_s:
        return list(questions)
    move = (lambda t: None if t is None else t + offset_s)
    return [replace(q, context_time=move(q.context_time), window_start=move(q.window_start), time=move(q.time),
                    evidence_times=[t + offset_s for t in q.evidence_times]) for q in questions]


def auto_offset(questions: list[PublicQuestion], bag_start: float, bag_end: float) -> float:
    """0 when the file's times overlap the bag [start, end] (the recording the file was written
    for), else the shift that puts the file's earliest time at the bag's start."""
    times = [t for q in questions for t in q.times()]
    if not times or (min(times) <= bag_end and max(times) >= bag_start):
        return 0.0
    return bag_start - min(times)


# -- NaVQA -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NavqaWindow:
    """What ``qa_unfilled.json`` holds per question id: the memory window, nothing else."""

    id: str
    start_time: float
    end_time: float
    length_category: str = ""
    file_info: dict = field(default_factory=dict)


def _csv_rows(path: Path, delimiter: str):
    """(line, header, row) of a CSV whose quoted fields may span lines; blank rows skipped."""
    try:
        handle = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise QuestionFormatError(f"{path}: cannot read ({exc})") from exc
    with handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)
        try:
            header = [" ".join(h.split()).lower() for h in next(reader, [])]
            for row in reader:
                if any(cell.strip() for cell in row):
                    yield reader.line_num, header, row
        except csv.Error as exc:
            raise _fail(path, reader.line_num, f"not valid CSV ({exc})") from exc


def _navqa_columns(path: Path, header: list[str]) -> list[int]:
    index = []
    for name in NAVQA_COLUMNS:
        found = [i for i, h in enumerate(header) if h.startswith(name)]
        if not found:
            raise _fail(path, 1, f"not a NaVQA CSV: no column {name!r} in the header {header}")
        index.append(found[0])
    return index


def load_navqa_csv(path, windows: Optional[dict[str, NavqaWindow]] = None,
                   timezone: TimeZone = NAVQA_TIMEZONE) -> list[PublicQuestion]:
    """NaVQA's ``data.csv``.  With ``windows`` (``load_navqa_windows``) a question gets its
    context time (window end) and its answer timestamps a day (the window's); without, they stay
    clock times (``clock_times``) for ``resolve_clock_times``."""
    path = Path(path)
    out, index = [], None
    for line, header, row in _csv_rows(path, ","):
        index = index or _navqa_columns(path, header)
        if len(row) != len(header):
            raise _fail(path, line, f"{len(row)} columns, the header has {len(header)}")
        uuid, seq, question, stamps, qtype, text, parsable, category = (row[i].strip() for i in index)
        if not uuid or not question:
            raise _fail(path, line, "empty UUID or Question")
        if qtype.lower() not in NAVQA_TYPES:
            raise _fail(path, line, f"unknown type {qtype!r} ({' | '.join(NAVQA_TYPES)})")
        clocks = [s.strip() for s in stamps.split(",") if s.strip()]
        for c in clocks:
            try:
                _clock(c)
            except ValueError as exc:
                raise _fail(path, line, f"Timestamp with answer: {exc}") from exc
        raw = text if qtype.lower() == "text" else (parsable or text)
        q = PublicQuestion(uuid, question, NAVQA_TYPES[qtype.lower()], None, raw, "navqa_csv",
                           raw_type=qtype.lower(), category=category, episode=seq, line=line, clock_times=clocks,
                           texts=[t for t in (text, parsable) if t] if qtype.lower() == "text" else [],
                           extra={"text_answer": text, "parsable_answer": parsable, "timestamps": stamps})
        _parse_navqa_answer(q, text, parsable)
        window = (windows or {}).get(uuid)
        if window is not None:
            q.context_time, q.window_start = window.end_time, window.start_time
            q.extra["length_category"] = window.length_category
            q = resolve_clock_times(q, local_date(window.start_time, timezone), timezone)
        out.append(q)
    if index is None:
        raise QuestionFormatError(f"{path}: no header (an empty file?)")
    return out


def _parse_navqa_answer(q: PublicQuestion, text: str, parsable: str) -> None:
    if q.type == "binary":
        q.binary = _yes_no(parsable) or _yes_no(text)
        q.unscored = "" if q.binary else f"binary answer {parsable or text!r} is neither yes nor no"
    elif q.type == "position":
        q.position = _position(parsable)
        q.unscored = "" if q.position else POSITION_PLACEHOLDER.format(parsable)
    elif q.type == "duration":
        q.duration_minutes = _number(parsable)
        q.unscored = "" if q.duration_minutes is not None else f"duration {parsable!r} is not minutes"
    elif q.type == "time" and not q.clock_times:
        q.unscored = "no answer timestamp"
    elif q.type == "text" and not q.texts:
        q.unscored = "no text answer"


def load_navqa_windows(path) -> dict[str, NavqaWindow]:
    """The windows of a per-sequence ``qa_unfilled.json`` by question id."""
    path = Path(path)
    entries = _json_entries(path)
    out = {}
    for i, e in enumerate(entries, 1):
        try:
            out[str(e["id"])] = NavqaWindow(str(e["id"]), float(e["start_time"]), float(e["end_time"]),
                                            str(e.get("length_category", "")), dict(e.get("file_info") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise _fail(path, f"entry {i}", f"a NaVQA window needs id, start_time, end_time ({exc!r})") from exc
    return out


def _json_entries(path: Path) -> list:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuestionFormatError(f"{path}: cannot read ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise _fail(path, exc.lineno, f"not valid JSON ({exc.msg})") from exc
    entries = data.get("data") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise QuestionFormatError(f"{path}: expected a list of questions (or {{'data': [...]}})")
    for i, e in enumerate(entries, 1):
        if not isinstance(e, dict):
            raise _fail(path, f"entry {i}", f"expected an object, got {type(e).__name__}")
    return entries


def _navqa_csv_beside(path: Path) -> Path:
    for folder in (path.parent, path.parent.parent):
        for name in ("navqa_data.csv", "data.csv"):
            if (folder / name).exists():
                return folder / name
    raise QuestionFormatError(
        f"{path}: a qa_unfilled.json holds only the question windows (id, start_time, end_time), no question "
        "text: give the NaVQA CSV with it (csv=..., or navqa_data.csv / data.csv beside it or one folder up)")


def load_navqa_json(path, csv_path=None, timezone: TimeZone = NAVQA_TIMEZONE) -> list[PublicQuestion]:
    """A per-sequence NaVQA JSON: an unfilled one with the CSV's questions for its ids, or a
    filled ``human_qa.json`` alone (see the module docstring)."""
    path = Path(path)
    entries = _json_entries(path)
    if entries and all("question" not in e for e in entries):
        windows = load_navqa_windows(path)
        source = Path(csv_path) if csv_path else _navqa_csv_beside(path)
        questions = [replace(q, source="navqa_json", extra={**q.extra, "csv": str(source)})
                     for q in load_navqa_csv(source, windows, timezone) if q.id in windows]
        missing = sorted(set(windows) - {q.id for q in questions})
        if missing:
            log.warning("%s: %d window(s) without a question in %s: %s", path, len(missing), source, missing[:5])
        return questions
    return [_filled_navqa(path, i, e) for i, e in enumerate(entries, 1)]


def _filled_navqa(path: Path, i: int, e: dict) -> PublicQuestion:
    try:
        qid, text, qtype = str(e["id"]), str(e["question"]), str(e["type"]).lower()
        start, end, answers = float(e["start_time"]), float(e["end_time"]), e.get("answers") or {}
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(path, f"entry {i}", f"a filled NaVQA question needs id, question, type, start_time, "
                                        f"end_time ({exc!r})") from exc
    if qtype not in NAVQA_TYPES:
        raise _fail(path, f"entry {i}", f"unknown type {qtype!r} ({' | '.join(NAVQA_TYPES)})")
    prefix, _, bare = text.rpartition("\n")        # ReMEmbR prepends "You started moving at ... \n"
    texts = [str(t) for t in answers.get("text") or [] if str(t).strip()]
    q = PublicQuestion(qid, bare.strip() or text, NAVQA_TYPES[qtype], end, json.dumps(answers), "navqa_json",
                       raw_type=qtype, line=i, window_start=start, texts=texts if qtype == "text" else [],
                       extra={"prompt_prefix": prefix.strip(), "length_category": e.get("length_category", "")})
    value = answers.get(qtype)
    if qtype == "binary":
        q.binary = _yes_no(texts[-1] if texts else "")
    elif qtype == "position":
        q.position = _position(str(value)) if value is not None and not isinstance(value, list) else \
            ([float(v) for v in value] if isinstance(value, list) and len(value) in (2, 3) else None)
    elif qtype == "time":
        minutes = _number(str(value)) if value is not None else None
        q.time = None if minutes is None else end - 60.0 * minutes
        q.evidence_times = [q.time] if q.time is not None else []
    elif qtype == "duration":
        q.duration_minutes = _number(str(value)) if value is not None else None
    parsed = {"binary": q.binary, "position": q.position, "time": q.time, "duration": q.duration_minutes,
              "text": q.texts}[qtype]
    if parsed in (None, "", []):
        q.unscored = (POSITION_PLACEHOLDER.format(value) if qtype == "position"
                      else f"no parsable {qtype} answer ({value!r})")
    return q


# -- OpenEQA ------------------------------------------------------------------------------------------
def load_openeqa_json(path) -> list[PublicQuestion]:
    """OpenEQA's question list: text answers scored by LLM-Match, no times."""
    path = Path(path)
    out = []
    for i, e in enumerate(_json_entries(path), 1):
        missing = [k for k in ("question", "answer", "question_id") if not str(e.get(k) or "").strip()]
        if missing:
            raise _fail(path, f"entry {i}", f"no {', '.join(missing)}")
        extra_answers = e.get("extra_answers") or []
        if not isinstance(extra_answers, list):
            raise _fail(path, f"entry {i}", "extra_answers must be a list")
        answer = str(e["answer"])
        out.append(PublicQuestion(str(e["question_id"]), str(e["question"]), "text", None, answer, "openeqa_json",
                                  raw_type="text", category=str(e.get("category", "")),
                                  episode=str(e.get("episode_history", "")), line=i,
                                  texts=[answer, *map(str, extra_answers)],
                                  extra={k: v for k, v in e.items() if k not in ("question", "answer", "question_id")}))
    return out


# -- PersonEQA ----------------------------------------------------------------------------------------
def load_personeqa_csv(path, timezone: TimeZone = "UTC", include_unready: bool = False) -> list[PublicQuestion]:
    """HUMEMBR's semicolon-separated ``question.csv``; local times in ``timezone``."""
    path = Path(path)
    out, seen_header = [], False
    for line, header, row in _csv_rows(path, ";"):
        if not seen_header:
            seen_header = True
            missing = [c for c in PERSONEQA_COLUMNS[:5] if c not in header]
            if missing:
                raise _fail(path, 1, f"not a PersonEQA CSV: no column(s) {', '.join(missing)} in {header}")
        if len(row) != len(header):
            raise _fail(path, line, f"{len(row)} fields, the header has {len(header)} (separator ';')")
        r = {h: cell.strip() for h, cell in zip(header, row)}
        if not r["id"] or not r["question"]:
            raise _fail(path, line, "empty id or question")
        qtype = r["type"].lower()
        if qtype not in PERSONEQA_TYPES:
            raise _fail(path, line, f"unknown type {r['type']!r} ({' | '.join(PERSONEQA_TYPES)})")
        if not include_unready and r.get("ready", "1").lower() in ("0", "false"):
            continue                                     # HUMEMBR evaluates ready rows only
        try:
            context = _local(r["context_time"], timezone)
        except ValueError as exc:
            raise _fail(path, line, f"context_time {r['context_time']!r} is not YYYY-MM-DD HH:MM:SS") from exc
        q = PublicQuestion(r["id"], r["question"], PERSONEQA_TYPES[qtype], context, r["answer"], "personeqa_csv",
                           raw_type=qtype, line=line,
                           extra={k: v for k, v in r.items() if k not in PERSONEQA_COLUMNS[:5]})
        try:
            if r.get("optimal_context"):
                q.evidence_times = [_local(r["optimal_context"], timezone)]
        except ValueError:
            log.warning("%s:%d: optimal_context %r is not a time; ignored", path, line, r["optimal_context"])
        _parse_personeqa_answer(q, timezone)
        out.append(q)
    if not seen_header:
        raise QuestionFormatError(f"{path}: no header (an empty file?)")
    return out


def _parse_personeqa_answer(q: PublicQuestion, timezone: TimeZone) -> None:
    a = q.answer
    if q.type == "persons":
        q.persons = [p.strip() for p in a.split(",") if p.strip()]
    elif q.type == "binary":
        q.binary = _yes_no(a) if a.lower() in ("true", "false", "yes", "no") else ""
    elif q.type == "time":
        try:
            q.time = _local(a, timezone)
            q.evidence_times = q.evidence_times or [q.time]
        except ValueError:
            pass
    elif q.type == "duration":
        q.duration_minutes = _number(a)
    elif q.type == "waypoint":
        q.waypoint = a
    elif q.type == "text":
        q.texts = [a] if a else []
    parsed = {"persons": q.persons, "binary": q.binary, "time": q.time, "duration": q.duration_minutes,
              "waypoint": q.waypoint, "text": q.texts}[q.type]
    if parsed in (None, "", []):
        q.unscored = f"answer {a!r} is not a parsable {q.raw_type} answer"


# -- any format ------------------------------------------------------------------------------------------
def detect_format(path) -> str:
    path = Path(path)
    try:
        head = path.read_text(encoding="utf-8-sig", errors="replace")[:4096]
    except OSError as exc:
        raise QuestionFormatError(f"{path}: cannot read ({exc})") from exc
    first = head.split("\n", 1)[0].lower()
    if path.suffix.lower() == ".json" or head.lstrip().startswith(("[", "{")):
        if re.search(r'"(question_id|episode_history)"', head):
            return "openeqa_json"
        if re.search(r'"(start_time|end_time|length_category)"', head):
            return "navqa_json"
        raise QuestionFormatError(f"{path}: JSON, but neither OpenEQA (question_id, episode_history) nor NaVQA "
                                  "(start_time, end_time)")
    if first.startswith("id;question") or first.count(";") >= 4:
        return "personeqa_csv"
    if "uuid" in first and "seq id" in first:
        return "navqa_csv"
    raise QuestionFormatError(f"{path}: unknown question format (first line {first[:80]!r}); one of "
                              f"{', '.join(FORMATS)}")


def load_questions(path, fmt: str = "auto", timezone: Optional[str] = None, episode: str = "",
                   csv_path=None) -> list[PublicQuestion]:
    """Any of ``FORMATS`` (``auto``: detected).  ``timezone``: the files' wall clock (default
    ``NAVQA_TIMEZONE`` for NaVQA, UTC for PersonEQA).  ``episode``: only the questions of one NaVQA
    sequence (Seq ID) or OpenEQA episode_history; a recording is one of them."""
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise QuestionFormatError(f"format: unknown {fmt!r} (auto | {' | '.join(FORMATS)})")
    if fmt == "navqa_csv":
        questions = load_navqa_csv(path, timezone=timezone or NAVQA_TIMEZONE)
    elif fmt == "navqa_json":
        questions = load_navqa_json(path, csv_path, timezone=timezone or NAVQA_TIMEZONE)
    elif fmt == "openeqa_json":
        questions = load_openeqa_json(path)
    else:
        questions = load_personeqa_csv(path, timezone=timezone or "UTC")
    if episode:
        chosen = [q for q in questions if q.episode == episode]
        if not chosen:
            known = sorted({q.episode for q in questions})
            raise QuestionFormatError(f"{path}: no question of episode {episode!r}; it has "
                                      f"{', '.join(known[:20]) or 'no episodes'}{' ...' if len(known) > 20 else ''}")
        questions = chosen
    return questions
