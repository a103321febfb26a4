"""Episodic recall (HIMM, Sec. III-B and eq. 1).

1. For the current views, the top-K most similar past observations (global image embedding)
   from earlier episodes.
2. Verification that a retrieved observation comes from a place near the current one: an MLLM
   shown both images (``MllmPlaceVerifier``), or, offline, ORB feature matching with a RANSAC
   homography (``FeatureMatchVerifier``). Only verified episodes are recalled.
3. The target queries each verified episode: its words against the descriptions, or, given as a
   picture, its image embedding against the episode's stored regions (HIMM's region query; the
   image embedder's space); the episode with the most top-K matches above the threshold is the
   prior; the camera poses of those matches are the landmarks drawn on the map.
4. ``I_explore`` (eq. 1): exploration is needed unless the prior episode saw the target.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Protocol, Sequence

import cv2
import numpy as np

from ..agent.answer import extract_json_objects
from ..llm.chat_client import LLMError
from ..llm.images import image_part

log = logging.getLogger(__name__)

REGION_THRESHOLD = 0.7        # cosine of a stored region's crop to the target's picture (MobileNetV2, simulated
REGION_MARGIN = 0.03          # office: the pictured object's own regions 0.74-0.84, other things' up to 0.84)


class PlaceVerifier(Protocol):
    name: str

    def same_place(self, current: np.ndarray, past: np.ndarray) -> bool: ...


class FeatureMatchVerifier:
    """Two images show the same place when ORB features match (Lowe ratio test) and at least
    ``min_inliers`` of the matches agree with one RANSAC homography."""

    name = "feature_match"

    def __init__(self, min_inliers: int = 20, ratio: float = 0.75, features: int = 1000):
        self.min_inliers, self.ratio = min_inliers, ratio
        self._orb = cv2.ORB_create(nfeatures=features)
        self._matcher = cv2.BFMatcher(cv2.NORM_HAMMING)

    def inliers(self, a: np.ndarray, b: np.ndarray) -> int:
        ka, da = self._orb.detectAndCompute(_gray(a), None)
        kb, db = self._orb.detectAndCompute(_gray(b), None)
        if da is None or db is None or len(ka) < 8 or len(kb) < 8:
            return 0
        good = [m for m, n in (p for p in self._matcher.knnMatch(da, db, k=2) if len(p) == 2)
                if m.distance < self.ratio * n.distance]
        if len(good) < 8:
            return 0
        src = np.float32([ka[m.queryIdx].pt for m in good])
        dst = np.float32([kb[m.trainIdx].pt for m in good])
        _, mask = cv2.findHomography(src, dst, cv2.RANSAC, 5.0)
        return int(mask.sum()) if mask is not None else 0

    def same_place(self, current: np.ndarray, past: np.ndarray) -> bool:
        return self.inliers(current, past) >= self.min_inliers


VERIFY_PROMPT = ("You are a robot recalling past experience. Image 1 is what you see now; image 2 is an "
                 "observation from an earlier visit. Were both taken at nearby places in the same building "
                 "(the same room or its doorway), judging by layout, walls, furniture and objects rather than "
                 'lighting? Reply with JSON only: {"same_place": true|false, "reason": "..."}')


class MllmPlaceVerifier:
    """HIMM's visual-reasoning verification through an OpenAI-compatible multimodal endpoint.
    A malformed reply counts as "not verified" (logged), never as a match."""

    name = "mllm"

    def __init__(self, client):
        self.client = client

    def same_place(self, current: np.ndarray, past: np.ndarray) -> bool:
        messages = [{"role": "user", "content": [
            {"type": "text", "text": VERIFY_PROMPT},
            image_part(current), image_part(past)]}]
        try:
            reply = self.client.chat(messages).content
        except LLMError as exc:
            log.warning("place verification: endpoint error (%s); not verified", exc)
            return False
        for value in extract_json_objects(reply):
            if isinstance(value, dict) and isinstance(value.get("same_place"), bool):
                return value["same_place"]
        log.warning("place verification: malformed reply %r; not verified", reply[:200])
        return False


def _gray(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image


@dataclass
class RecallResult:
    i_explore: bool                                      # eq. 1: exploration needed
    prior_episode: Optional[str] = None
    landmarks: list[tuple[float, float, float]] = field(default_factory=list)   # (x, y, yaw) camera poses
    retrieved: int = 0
    verified: int = 0
    votes: dict[str, int] = field(default_factory=dict)
    reason: str = ""


class EpisodicRecall:
    def __init__(self, store, verifier: PlaceVerifier, top_k: int = 10, target_threshold: float = 0.45,
                 max_verifications: int = 12, region_threshold: float = REGION_THRESHOLD):
        self.store, self.verifier = store, verifier
        self.top_k, self.target_threshold, self.max_verifications = top_k, target_threshold, max_verifications
        self.region_threshold = region_threshold

    def _target_matches(self, episode: str, target: str,
                        target_vector: Optional[np.ndarray]) -> tuple[list[dict], str]:
        """The recalled episode's evidence of the target and how it was found: its regions nearest
        the target's image embedding when there is one and the episode stored regions (HIMM's
        region query), else its descriptions nearest the words."""
        if target_vector is not None:     # crops of other things score near the target's: only the best few
            hits = self.store.similar_regions(target_vector, k=self.top_k, episode=episode)
            if hits:
                best = hits[0]["similarity"]
                return [h for h in hits if h["similarity"] >= max(self.region_threshold, best - REGION_MARGIN)], \
                    "regions like the picture"
        return [h for h in self.store.text_observations(target, k=self.top_k, episode=episode)
                if h["similarity"] >= self.target_threshold], "descriptions"

    def recall(self, views: Sequence[tuple[np.ndarray, np.ndarray]], target: str, episode_id: str,
               target_vector: Optional[np.ndarray] = None) -> RecallResult:
        """``views``: (BGR image, global embedding) of the current place (a look-around);
        ``target_vector``: the target in the image embedder's space (a picture of it), matched
        against the stored regions instead of the words against the descriptions."""
        best: dict[str, dict] = {}
        for view, (_, emb) in enumerate(views):
            for hit in self.store.visual_similarity(emb, k=self.top_k, exclude_episode=episode_id):
                if hit["id"] not in best or hit["similarity"] > best[hit["id"]]["similarity"]:
                    best[hit["id"]] = dict(hit, view=view)
        if not best:
            return RecallResult(True, reason="no earlier episode in memory")
        candidates = sorted(best.values(), key=lambda h: -h["similarity"])[:self.max_verifications]
        verified_episodes: Counter = Counter()
        for hit in candidates:
            past = cv2.imread(hit.get("image_path", "")) if hit.get("image_path") else None
            if past is None:
                continue
            if self.verifier.same_place(views[hit["view"]][0], past):   # the view that retrieved it
                verified_episodes[hit["episode"]] += 1
        if not verified_episodes:
            return RecallResult(True, retrieved=len(best), reason="no retrieved observation verified as a nearby place")
        votes: dict[str, int] = {}
        matches: dict[str, list[dict]] = {}
        found_by: dict[str, str] = {}
        for episode in verified_episodes:
            hits, found_by[episode] = self._target_matches(episode, target, target_vector)
            votes[episode], matches[episode] = len(hits), hits
        prior = max(votes, key=lambda e: (votes[e], verified_episodes[e]))
        if votes[prior] == 0:
            return RecallResult(True, prior, retrieved=len(best), verified=sum(verified_episodes.values()), votes=votes,
                                reason=f"verified episodes never saw {target!r}")
        landmarks = [(h["position"][0], h["position"][1], h["yaw"]) for h in matches[prior]
                     if h.get("position") is not None]          # not those stored without a pose
        return RecallResult(False, prior, landmarks, len(best), sum(verified_episodes.values()), votes,
                            f"episode {prior} saw {target!r} {votes[prior]} times (by {found_by[prior]})")
