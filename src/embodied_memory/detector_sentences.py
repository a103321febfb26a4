"""The sentence a keyframe is described by when no vision-language model is configured
(``perception.describer.DetectorDescriber``): what the detectors found (people, faces,
identities) and the place, never a thing. Written here once, for the describer that writes
it and for the query planner, which must not read such a sentence as a sighting of an object
("is there a desk in the office?" is not answered by "Robot camera view at office.")."""
from __future__ import annotations

import re

GENERIC_VIEW = "Robot camera view"


def detector_sentence(people: int, faces: int, identities: list[str], place: str) -> str:
    """Positive statements only (LVMem: "no person" would sit close to person queries)."""
    parts = []
    if people:
        parts.append(f"{people} {'person' if people == 1 else 'people'} visible")
    if faces:
        parts.append(f"{faces} face{'s' if faces > 1 else ''} seen")
    if identities:
        parts.append("identified: " + ", ".join(dict.fromkeys(identities)))
    where = f" at {place.replace('_', ' ')}" if place else ""
    text = ("; ".join(parts) + where + ".") if parts else f"{GENERIC_VIEW}{where}."
    return text[0].upper() + text[1:]


_PART = r"(?:\d+ (?:person|people) visible|\d+ faces? seen|identified: [^;]*?)"
_SENTENCE = re.compile(rf"^(?:{re.escape(GENERIC_VIEW)}|{_PART}(?:; {_PART})*)(?: at [^;.]+)?\.$", re.IGNORECASE)


def names_no_things(description: str) -> bool:
    """``description`` is a detector sentence: it says who and where, never what."""
    return bool(_SENTENCE.match((description or "").strip()))
