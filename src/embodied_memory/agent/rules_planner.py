"""The ``rules`` planner: deterministic routing of parsed questions to memory tools.

No model beyond the text embedder: it is the embedded default when no LLM endpoint is
configured and the fallback when the endpoint is down.  Object phrases are matched by
embedding similarity (``match_threshold``); among near-equal matches the most recent (or
the first, for "first"/"arrive" questions) wins.
"""
from __future__ import annotations

import datetime as dt
import re
from .answer import Answer, no_answer
from .question_parser import ParsedQuestion, parse_question
from .tools import ToolBox, ToolCallRecord
from .visits import observed_minutes, split_visits

NEAR_EQUAL = 0.05  # similarity margin within which matches count as the same thing


_GENERIC = {"", "objects", "object", "things", "anything", "everything", "what"}


class RulesPlanner:
    name = "rules"

    def __init__(self, match_threshold: float = 0.35):
        self.match_threshold = match_threshold
        self._names: dict[str, str] = {}

    # -- memory access (through the toolbox, so calls are counted and evidence kept) --------
    def _call(self, tools: ToolBox, tool: str, args: dict):
        """A direct memory call recorded like a tool call."""
        result = tools.memory.call(tool, args)
        tools.calls.append(ToolCallRecord(tool, args, result=None))
        return result

    def _matches(self, tools: ToolBox, p: ParsedQuestion) -> list[dict]:
        """Observations matching the target phrase inside the window, best similarity first."""
        end = min(p.end or tools.now, tools.now)
        # a time window (yesterday, on Monday) needs a deeper candidate list: the best matches
        # overall may all lie on other days
        k = 300 if p.start else 30
        hits = self._call(tools, "text_observations", {"query": p.target or p.text, "k": k, "before": end})
        hits = [h for h in hits if h["t"] >= (p.start or 0.0)]
        if p.place:
            hits = [h for h in hits if h.get("waypoint") == p.place]
        if p.person:
            hits = [h for h in hits if p.person in h.get("persons", [])]
        if not hits or hits[0]["similarity"] < self.match_threshold:
            return []
        best = hits[0]["similarity"]
        return [h for h in hits if h["similarity"] >= best - NEAR_EQUAL]

    def _person_sightings(self, tools: ToolBox, p: ParsedQuestion) -> list[dict]:
        rows = self._call(tools, "person_observations", {
            "person": p.person, "t_start": p.start or 0.0, "t_end": min(p.end or tools.now, tools.now),
            "limit": 10_000})
        return [r for r in rows if not p.place or r.get("waypoint") == p.place]

    def _pick(self, rows: list[dict], first: bool) -> dict:
        return min(rows, key=lambda r: r["t"]) if first else max(rows, key=lambda r: r["t"])

    # -- answering ---------------------------------------------------------------------------
    def answer(self, question: str, tools: ToolBox, rules: list[dict], now_iso: str, tz_name: str) -> Answer:
        people = self._call(tools, "people", {})
        self._names = {p["person"]: p.get("name") or p["person"] for p in people}
        waypoints = [w["waypoint"] for w in self._call(tools, "waypoints", {})]
        p = parse_question(question, tools.now, tools.tz, people, waypoints)
        handler = getattr(self, f"_{p.kind}")
        ans = handler(p, tools)
        ans.planner = self.name
        return ans

    def _evidence(self, ans: Answer, rows: list[dict]) -> Answer:
        ans.evidence = [r["id"] for r in rows[:10]]
        return ans

    def _located(self, kind: str, row: dict, tools: ToolBox, what: str) -> Answer:
        ans = Answer(type=kind, position=list(row["position"]), waypoint=row.get("waypoint", ""),
                     confidence=float(row.get("similarity", 1.0)))
        ans.set_time(row["t"], tools.now, tools.tz)
        place = f"at {row['waypoint']}" if row.get("waypoint") else f"at {row['position'][:2]}"
        ans.text = f"{what} {place} at {ans.time_iso[11:16]} ({ans.minutes_ago:.0f} min ago)."
        return ans

    def _where(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.person and (not p.target or p.about_people):
            rows = self._person_sightings(tools, p)
            if not rows:
                return no_answer(f"{p.person} was not seen in that time", self.name)
            row = self._pick(rows, p.first)
            return self._evidence(self._located("position", row, tools, f"I saw {self._name(p.person)}"), [row])
        rows = self._matches(tools, p)
        if not rows:
            return no_answer(f"nothing matching '{p.target}' in memory", self.name)
        row = self._pick(rows, p.first)
        return self._evidence(self._located("position", row, tools, f"I saw {p.target or 'it'}"),
                              list({r["id"]: r for r in [row] + rows}.values()))

    def _go(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        """A command ("go to where you last saw Alice"): find the place, then drive there."""
        ans = self._where(p, tools)
        if ans.status != "ok" or tools.navigate is None:
            return ans  # without a bridge: say where it is
        target = ans.waypoint or (p.place if p.place else "")
        if not target:
            return no_answer("the place has no waypoint to drive to", self.name)
        result = tools.run("navigate_to_waypoint", {"waypoint": target, "person": p.person if p.about_people else ""})
        ans.type = "waypoint"
        if isinstance(result, dict) and result.get("success"):
            ans.text = f"Arrived at {target} ({ans.text.rstrip('.')})."
            ans.position = result.get("final_position", ans.position)
        else:
            ans.status = "error"
            ans.error = f"navigation to {target} failed: {(result or {}).get('message') or (result or {}).get('error')}"
        return ans

    def _when(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        ans = self._where(p, tools)
        if ans.status == "ok":
            ans.type = "time"
        return ans

    def _how_long(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.person:
            if p.start is None:  # default: the day of the last sighting
                last = self._person_sightings(tools, ParsedQuestion(p.text, p.kind, person=p.person, place=p.place))
                if last:
                    start = dt.datetime.fromtimestamp(last[-1]["t"], tz=tools.tz).replace(hour=0, minute=0, second=0)
                    p.start, p.end = start.timestamp(), start.timestamp() + 86400
            rows = self._person_sightings(tools, p)
        else:
            rows = sorted(self._matches(tools, p), key=lambda r: r["t"])
        if not rows:
            return no_answer("no sightings to measure a duration from", self.name)
        visits = split_visits(rows, lambda r: r["t"])
        minutes = observed_minutes(visits, lambda r: r["t"])
        who = self._name(p.person) if p.person else (p.target or "it")
        where = f" at {p.place}" if p.place else ""
        spans = ", ".join(f"{self._hhmm(v[0]['t'], tools)}-{self._hhmm(v[-1]['t'], tools)}" for v in visits)
        ans = Answer(type="duration", duration_minutes=round(minutes, 1), waypoint=p.place, confidence=0.6,
                     text=f"{who}{where}: about {minutes:.0f} minutes in {len(visits)} visit(s) ({spans}).")
        return self._evidence(ans, rows)

    def _yes_no(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.person and (not p.target or p.about_people):
            rows = self._person_sightings(tools, p)
        elif p.about_people and p.place and not p.target.strip():
            rows = [r for r in self._call(tools, "waypoint_observations", {
                "waypoint_id": p.place, "t_start": p.start or 0.0, "t_end": min(p.end or tools.now, tools.now),
                "limit": 10_000}) if r.get("persons")]
        else:
            rows = self._matches(tools, p)
        found = bool(rows)
        ans = Answer(type="binary", binary="yes" if found else "no", confidence=0.7 if found else 0.5)
        if found:
            row = max(rows, key=lambda r: r["t"])
            ans.text = f"Yes, last at {row.get('waypoint') or row['position'][:2]} at {self._hhmm(row['t'], tools)}."
            ans.position, ans.waypoint = list(row["position"]), row.get("waypoint", "")
        else:
            ans.text = "No, I have no such observation."
        return self._evidence(ans, rows)

    def _persons_in(self, p: ParsedQuestion, tools: ToolBox) -> tuple[list[str], list[dict]]:
        start, end = p.start or 0.0, min(p.end or tools.now, tools.now)
        if p.place:
            rows = self._call(tools, "waypoint_observations", {"waypoint_id": p.place, "t_start": start,
                                                                "t_end": end, "limit": 10_000})
        elif p.target:
            rows = self._matches(tools, p)
        else:  # everyone seen on the days of the window (default: the question's day)
            first_day = dt.datetime.fromtimestamp(p.start if p.start is not None else end, tz=tools.tz).date()
            last_day = dt.datetime.fromtimestamp(end, tz=tools.tz).date()
            persons: list[str] = []
            for offset in range(min((last_day - first_day).days, 31) + 1):
                day = (first_day + dt.timedelta(days=offset)).isoformat()
                persons += [x["person"] for x in self._call(tools, "persons_per_day", {"date": day})]
            return list(dict.fromkeys(persons)), []
        persons = list(dict.fromkeys(x for r in rows for x in r.get("persons", [])))
        return persons, [r for r in rows if r.get("persons")]

    def _who(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        persons, rows = self._persons_in(p, tools)
        ans = Answer(type="persons", persons=persons, waypoint=p.place, confidence=0.6,
                     text=("I saw " + ", ".join(self._name(x) for x in persons) + ".") if persons else
                     ("I saw nobody there." if p.place else "I saw nobody."))
        return self._evidence(ans, rows)

    def _how_many(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.about_people or not p.target:
            persons, rows = self._persons_in(p, tools)
            ans = Answer(type="text", persons=persons, text=f"{len(persons)} people.", confidence=0.5)
            return self._evidence(ans, rows)
        rows = self._matches(tools, p)
        return self._evidence(Answer(type="text", text=f"{len(rows)} matching observations.", confidence=0.3), rows)

    def _what(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.place and p.target.strip().lower() in _GENERIC:
            return self._seen_at(p, tools)
        rows = self._matches(tools, p) if p.target else []
        if not rows:
            rows = self._call(tools, "semantic_observations", {"query": p.text, "n": 3, "now": tools.now,
                                                               "before": min(p.end or tools.now, tools.now)})
        if not rows:
            return no_answer("memory is empty for that time", self.name)
        row = rows[0]
        ans = Answer(type="text", text=row["description"], position=list(row["position"]),
                     waypoint=row.get("waypoint", ""), confidence=0.4)
        ans.set_time(row["t"], tools.now, tools.tz)
        return self._evidence(ans, rows)

    def _seen_at(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        """What was seen at a place in the window: the distinct statements of its observations."""
        rows = self._call(tools, "waypoint_observations", {"waypoint_id": p.place, "t_start": p.start or 0.0,
                                                            "t_end": min(p.end or tools.now, tools.now), "limit": 10_000})
        if not rows:
            return no_answer(f"no observation at {p.place} in that time", self.name)
        statements: dict[str, None] = {}
        for row in sorted(rows, key=lambda r: r["t"]):
            for sentence in re.split(r"(?<=[.!?])\s+", row["description"]):
                if sentence.strip():
                    statements.setdefault(sentence.strip())
        text = " ".join(statements)
        ans = Answer(type="text", text=text[:1200], waypoint=p.place, confidence=0.4)
        ans.set_time(rows[-1]["t"], tools.now, tools.tz)
        return self._evidence(ans, rows)

    def _name(self, identity: str) -> str:
        """The operator-given display name when there is one."""
        return self._names.get(identity, identity)

    @staticmethod
    def _hhmm(t: float, tools: ToolBox) -> str:
        return dt.datetime.fromtimestamp(t, tz=tools.tz).strftime("%H:%M")

