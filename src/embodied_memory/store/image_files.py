"""Keyframe images are written only for observations the store accepts.

Perception hands over each keyframe as JPEG bytes (``Observation.image_jpeg``); this writes
them under ``<data_dir>/images/<episode>/<observation>.jpg`` as ``*.partial`` files, inserts
the batch, then renames the files of stored observations and removes the others (rejected,
or already stored with their image). A crash between insert and rename leaves a ``*.partial``
file, which :func:`sweep_partial_images` removes at start-up; the sender's copy of the
observation, sent again because it was never acknowledged, then writes the image.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence

from ..types import Observation
from .errors import StoreWriteError

log = logging.getLogger(__name__)
PARTIAL = ".partial"


def file_in(data_dir: Path, path: str) -> Optional[Path]:
    """The stored file ``path`` when it lies in ``data_dir`` and exists, else None. Paths are
    stored absolute: a memory copied or moved off the robot finds its files by their part under
    its own ``images/`` or ``identities/``. Never a file outside ``data_dir``."""
    if not path:
        return None
    stored = Path(path).expanduser()
    candidates = [stored if stored.is_absolute() else data_dir / stored]
    parts = stored.parts
    for sub in ("images", "identities"):     # from the last such folder on
        at = [i for i, part in enumerate(parts) if part == sub]
        if at:
            candidates.append(data_dir.joinpath(*parts[at[-1]:]))
    root = data_dir.resolve()
    for candidate in candidates:
        try:
            resolved = candidate.resolve(strict=True)
        except OSError:
            continue
        if root in resolved.parents and resolved.is_file():
            return resolved
    return None


def image_path_for(images_dir: Path, obs: Observation, ext: str = "jpg") -> Path:
    safe = lambda text: text.replace("/", "_")  # noqa: E731 - ids may hold '/'
    return images_dir / safe(obs.episode_id) / f"{safe(obs.observation_id)}.{ext}"


def insert_with_images(store, observations: Sequence[Observation]):
    """``store.insert_batch`` for observations that may carry ``image_jpeg``; returns its result."""
    partial: dict[str, tuple[Path, Path]] = {}
    try:
        for obs in observations:
            if obs.image_jpeg and not obs.image_path:
                final = image_path_for(store.images_dir, obs)
                tmp = final.with_name(final.name + PARTIAL)
                try:
                    tmp.parent.mkdir(parents=True, exist_ok=True)
                    tmp.write_bytes(obs.image_jpeg)
                except OSError as exc:   # disk full, read-only, file-size limit: nothing stored, retry
                    raise StoreWriteError(f"cannot write the keyframe image {tmp}: {exc}; nothing of this call "
                                          "was stored: keep the record and retry") from exc
                partial[obs.observation_id] = (tmp, final)
                obs.image_path = str(final)
        result = store.insert_batch(observations)
        duplicates = set(result.duplicates)
        for obs_id, (tmp, final) in partial.items():
            if obs_id in result.stored or (obs_id in duplicates and _image_missing(store, obs_id, final)):
                tmp.replace(final)
            else:
                tmp.unlink(missing_ok=True)
        partial.clear()
        return result
    finally:
        for tmp, _final in partial.values():   # the insert raised: nothing was stored
            tmp.unlink(missing_ok=True)


def _image_missing(store, observation_id: str, final: Path) -> bool:
    """A stored observation names this image but the file is not there (its writer died
    before the rename); an image deleted on purpose (forget) is no longer named by the row."""
    row = store.get_observation(observation_id)
    return bool(row) and row.get("image_path") == str(final) and not final.exists()


def sweep_partial_images(images_dir: Path) -> int:
    """Remove images left half-written by a crash; returns how many."""
    removed = 0
    if images_dir.is_dir():
        for path in images_dir.rglob(f"*{PARTIAL}"):
            path.unlink(missing_ok=True)
            removed += 1
    if removed:
        log.info("removed %d half-written images under %s", removed, images_dir)
    return removed

