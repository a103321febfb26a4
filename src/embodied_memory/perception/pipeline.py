"""Perception: keyframes -> observations (embeddings, people with identities, description).

Backends are chosen by name in :class:`PerceptionParams`; a GPU backend without weights fails
at start-up with the parameter to set, never silently downgrading.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

import cv2
import numpy as np

from ..people.identity import Evidence, IdentityManager, IdentityParams, face_px
from ..types import Keyframe, Observation, PersonSighting, Pose
from .describer import DetectorDescriber, VLMDescriber
from .projection import person_position
from .regions import REGION_PROPOSERS, make_region_proposer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PerceptionParams:
    image_embedder: str = "mobilenetv2"     # mobilenetv2 | clip | none
    clip_model: str = "ViT-B-32"
    clip_weights: str = ""
    person_detector: str = "hog"            # hog | yolo | none
    hog_upscale: float = 1.6
    yolo_weights: str = ""
    face_backend: str = "yunet_sface"       # yunet_sface | insightface | none
    insightface_root: str = ""
    face_upscale: float = 2.0               # yunet_sface: a second pass at this scale finds faces of 10-20 px
                                            # (people 5-7 m away at 640x480); 1: one pass
    face_score_threshold: float = 0.6       # yunet_sface: YuNet's score to keep a face ...
    face_small_score_threshold: float = 0.45  # ... and a face under 40 px: dim, far faces (tuned on seeds 0-4)
    face_min_px: int = 8                    # smaller faces (shorter side, pixels) are not kept; those under
                                            # identity_min_face_px only join an identity at a tight match
    reid: str = "mobilenetv2"               # mobilenetv2 (appearance features) | torchscript | none
    reid_weights: str = ""                  # torchscript: a body re-ID model (e.g. exported OSNet/KPR)
    region_proposer: str = "none"           # none | segments (offline colour segments) | sam (HIMM / HOV-SG
                                            # regions); each embedded with image_embedder, 3D boxes from depth
    sam_weights: str = ""
    sam_model_type: str = "vit_h"
    describer: str = "detector"             # detector | vlm
    describer_prompt: str = "object_centric"  # object_centric (LVMem) | caption (ReMEmbR)
    vlm_base_url: str = ""
    vlm_model: str = ""
    vlm_api_key_env: str = "OPENAI_API_KEY"
    text_embedder: str = "minilm"           # minilm | hash
    identity_eps: float = IdentityParams.eps                  # a face joins an identity this close (people/identity.py)
    identity_min_samples: int = IdentityParams.min_samples
    identity_merge_eps: float = IdentityParams.merge_eps      # two identities merge this close on average
    identity_min_face_px: float = IdentityParams.min_face_px  # smaller faces open no identity
    reid_threshold: float = IdentityParams.reid_threshold
    reid_window_s: float = IdentityParams.reid_window_s       # body re-ID counts within this long (clothes change)
    data_dir: str = "~/.local/share/embodied_memory/default"   # identities/ go here (the memory writes images/)
    jpeg_quality: int = 90
    device: str = "cuda"                    # for GPU backends

    def validate(self) -> None:
        choices = {"image_embedder": ("mobilenetv2", "clip", "none"), "person_detector": ("hog", "yolo", "none"),
                   "face_backend": ("yunet_sface", "insightface", "none"),
                   "reid": ("mobilenetv2", "torchscript", "none"), "region_proposer": REGION_PROPOSERS,
                   "describer": ("detector", "vlm"), "describer_prompt": ("object_centric", "caption"),
                   "text_embedder": ("minilm", "hash")}
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key}: unknown '{getattr(self, key)}' ({' | '.join(allowed)})")
        if not 1.0 <= self.face_upscale <= 4.0:
            raise ValueError(f"face_upscale: {self.face_upscale} (1 = one pass, at most 4)")
        if not 0.0 < self.face_small_score_threshold <= self.face_score_threshold < 1.0:
            raise ValueError(f"face_score_threshold {self.face_score_threshold}, face_small_score_threshold "
                             f"{self.face_small_score_threshold}: YuNet scores in (0, 1), the small faces' no higher")
        if self.face_min_px < 1:
            raise ValueError(f"face_min_px: {self.face_min_px} (pixels, >= 1)")
        if self.describer == "vlm" and not self.vlm_base_url:
            raise ValueError("describer 'vlm' needs vlm_base_url (an OpenAI-compatible endpoint serving a VLM)")


def _inside(point: tuple[float, float], box) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


class Perception:
    def __init__(self, params: PerceptionParams = PerceptionParams()):
        self.params = p = params
        self.data_dir = Path(p.data_dir).expanduser()
        self.timings: dict[str, float] = defaultdict(float)
        self.embedder = None
        if p.image_embedder == "mobilenetv2" or p.reid == "mobilenetv2":
            from .image_embedding import MobileNetV2Embedder
            self._mobilenet = MobileNetV2Embedder()
        if p.image_embedder == "mobilenetv2":
            self.embedder = self._mobilenet
        elif p.image_embedder == "clip":
            from .image_embedding import ClipEmbedder
            self.embedder = ClipEmbedder(p.clip_model, p.clip_weights, p.device)
        self.detector = None
        if p.person_detector == "hog":
            from .person_detection import HogPersonDetector
            self.detector = HogPersonDetector(upscale=p.hog_upscale)
        elif p.person_detector == "yolo":
            from .person_detection import YoloPersonDetector
            self.detector = YoloPersonDetector(p.yolo_weights, device=p.device)
        self.faces = None
        if p.face_backend == "yunet_sface":
            from .faces import YuNetSFace
            self.faces = YuNetSFace(p.face_score_threshold, min_size=p.face_min_px, upscale=p.face_upscale,
                                    small_score_threshold=p.face_small_score_threshold)
        elif p.face_backend == "insightface":
            from .faces import InsightFaceBackend
            self.faces = InsightFaceBackend(p.insightface_root)
        self.reid = self._mobilenet if p.reid == "mobilenetv2" else None
        if p.reid == "torchscript":
            from .reid import TorchScriptReid
            self.reid = TorchScriptReid(p.reid_weights, p.device)
        self.regions = make_region_proposer(p.region_proposer, p.sam_weights, p.sam_model_type, p.device)
        self.describer = (VLMDescriber(p.vlm_base_url, p.vlm_model, p.describer_prompt, p.vlm_api_key_env)
                          if p.describer == "vlm" else DetectorDescriber())
        from ..text_embedding import make_text_embedder
        self.text_embedder = make_text_embedder(p.text_embedder, 384)
        self.identities = IdentityManager(replace(IdentityParams(), eps=p.identity_eps, min_samples=p.identity_min_samples,
                                                  merge_eps=p.identity_merge_eps, min_face_px=p.identity_min_face_px,
                                                  min_match_face_px=min(IdentityParams.min_match_face_px,
                                                                        p.identity_min_face_px),
                                                  reid_threshold=p.reid_threshold, reid_window_s=p.reid_window_s),
                                          self.data_dir / "identities")
        # identity merges not yet sent to the memory: at start every merge so far (the memory may
        # have missed some while down; a merge sent twice changes nothing)
        self.merges: list[tuple[str, str]] = list(self.identities.merge_log)
        self.suppressed_sightings = 0
        self._attempt_people: dict[str, list[PersonSighting]] = {}

    @property
    def image_dim(self) -> int:
        return self.embedder.dim if self.embedder else 0

    def _timed(self, stage: str, start: float) -> None:
        self.timings[stage] += time.perf_counter() - start

    def people_in(self, image: np.ndarray, depth: Optional[np.ndarray] = None,
                  intrinsics: Optional[tuple[float, float, float, float]] = None,
                  pose: Optional[Pose] = None, stamp: Optional[float] = None) -> list[PersonSighting]:
        """Detect people and faces, embed them, give the keyframe's people identities jointly
        (``IdentityManager.assign_frame``: tracked from the keyframes before ``stamp``); with
        depth, intrinsics and a pose, where each one stood (``projection.person_position``)."""
        start = time.perf_counter()
        bodies = self.detector.detect(image) if self.detector else []
        self._timed("person_detection", start)
        start = time.perf_counter()
        faces = self.faces.detect(image) if self.faces else []
        self._timed("faces", start)
        sightings: list[PersonSighting] = []
        used_faces = set()
        for body in bodies:
            face_idx = next((i for i, f in enumerate(faces) if i not in used_faces and
                             _inside(((f.box[0] + f.box[2]) / 2, (f.box[1] + f.box[3]) / 2), body.box)), None)
            if face_idx is not None:
                used_faces.add(face_idx)
            sightings.append(PersonSighting(box=body.box, detection_score=body.score,
                                            face_box=faces[face_idx].box if face_idx is not None else None,
                                            face_embedding=faces[face_idx].embedding if face_idx is not None else None))
        for i, face in enumerate(faces):  # a face without a detected body (close-ups, HOG misses)
            if i not in used_faces:
                x1, y1, x2, y2 = face.box
                w, h = x2 - x1, y2 - y1
                body = (max(0.0, x1 - w), y1, min(float(image.shape[1]), x2 + w), min(float(image.shape[0]), y2 + 6 * h))
                sightings.append(PersonSighting(box=body, detection_score=face.score, face_box=face.box,
                                                face_embedding=face.embedding))
        start = time.perf_counter()
        if self.reid is not None and sightings:
            crops = []
            for s in sightings:
                x1, y1, x2, y2 = (int(round(v)) for v in s.box)
                crop = image[max(0, y1):max(y1 + 1, y2), max(0, x1):max(x1 + 1, x2)]
                crops.append(crop if crop.size else image)
            for s, vec in zip(sightings, self.reid.embed(crops)):
                s.reid_embedding = vec
        self._timed("reid", start)
        if depth is not None and intrinsics is not None and pose is not None:
            size = (image.shape[1], image.shape[0])
            for s in sightings:
                s.position = person_position(s.box, depth, size, intrinsics, pose)
        recorded = []
        evidence = [Evidence(s.face_embedding, s.reid_embedding, face_px(s.face_box),
                             None if s.position is None else tuple(s.position[:2]), s.box) for s in sightings]
        for s, result in zip(sightings, self.identities.assign_frame(stamp, evidence)):
            if result.via == "suppressed":   # a forgotten person (forgotten_person: drop): not recorded
                self.suppressed_sightings += 1
                continue
            s.identity_id, s.identity_confidence, s.track_id = result.identity_id, result.confidence, result.track_id
            self.merges.extend(result.merged)
            recorded.append(s)
        return recorded

    def process(self, keyframes: Sequence[Keyframe], describe_together: bool = False) -> list[Observation]:
        """Observations for keyframes (one segment when ``describe_together``: one VLM call)."""
        observations = []
        for kf in keyframes:
            # a keyframe perceived again after a failure (the VLM was down) keeps the people and
            # identities of its first attempt: a face is never assigned twice
            people = self._attempt_people.get(kf.keyframe_id)
            if people is None:
                people = self._attempt_people[kf.keyframe_id] = self.people_in(
                    kf.image, kf.depth, kf.intrinsics, kf.pose, kf.stamp)
                while len(self._attempt_people) > 64:
                    self._attempt_people.pop(next(iter(self._attempt_people)))
            start = time.perf_counter()
            embedding = self.embedder.embed([kf.image])[0] if self.embedder else None
            self._timed("global_embedding", start)
            regions = []
            if self.regions is not None:
                start = time.perf_counter()
                regions = self.regions.propose(kf.image, self.embedder, kf.depth, kf.intrinsics, kf.pose)
                self._timed("regions", start)
            start = time.perf_counter()
            ok, jpeg = cv2.imencode(".jpg", kf.image, [cv2.IMWRITE_JPEG_QUALITY, self.params.jpeg_quality])
            self._timed("jpeg", start)
            # the store writes the file only if it accepts the observation (store/image_files.py)
            observations.append(Observation(
                observation_id=kf.keyframe_id, stamp=kf.stamp, episode_id=kf.episode_id, pose=kf.pose,
                keyframe_id=kf.keyframe_id, segment_id=kf.segment_id, waypoint_id=kf.waypoint_id,
                image_jpeg=jpeg.tobytes() if ok else None, global_embedding=embedding, people=people,
                regions=regions))
        start = time.perf_counter()
        groups = [list(zip(keyframes, observations))] if describe_together else \
            [[(kf, obs)] for kf, obs in zip(keyframes, observations)]
        for group in groups:
            detections = {"people": max((len(o.people) for _, o in group), default=0),
                          "faces": max((sum(1 for s in o.people if s.face_box) for _, o in group), default=0),
                          "identities": [s.identity_id for _, o in group for s in o.people],
                          "waypoint": group[0][0].waypoint_id}
            text, structured = self.describer.describe([kf.image for kf, _ in group], detections)
            for _, obs in group:
                obs.description, obs.description_json = text, structured
        self._timed("describe", start)
        start = time.perf_counter()
        if observations:
            vectors = self.text_embedder.embed([o.description for o in observations])
            for obs, vec in zip(observations, vectors):
                obs.text_embedding = vec
        self._timed("text_embedding", start)
        self.identities.sync()   # the ids in these observations are durable before anyone sees them
        for kf in keyframes:
            self._attempt_people.pop(kf.keyframe_id, None)
        return observations

    def forget_attempt(self, keyframe_id: str) -> None:
        """The caller gave up on a keyframe: drop the people kept for another attempt."""
        self._attempt_people.pop(keyframe_id, None)

    def take_merges(self) -> list[tuple[str, str]]:
        merges, self.merges = self.merges, []
        return merges

    def close(self) -> None:
        self.identities.close()
