"""Observations <-> plain JSON dicts (JSON-lines export/import between robots and stores)."""
from __future__ import annotations

from typing import Any

from .types import Observation, PersonSighting, Pose, Region, as_vector, finite_point


def _vec(values) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def observation_to_dict(obs: Observation) -> dict[str, Any]:
    return {
        "observation_id": obs.observation_id, "stamp": obs.stamp, "episode_id": obs.episode_id,
        "pose": None if obs.pose is None else {"x": obs.pose.x, "y": obs.pose.y, "z": obs.pose.z,
                                               "yaw": obs.pose.yaw, "frame_id": obs.pose.frame_id},
        "description": obs.description, "description_json": obs.description_json,
        "keyframe_id": obs.keyframe_id, "segment_id": obs.segment_id, "waypoint_id": obs.waypoint_id,
        "image_path": obs.image_path, "text_embedding": _vec(obs.text_embedding),
        "global_embedding": _vec(obs.global_embedding),
        "regions": [{"box": list(r.box), "label": r.label, "score": r.score, "embedding": _vec(r.embedding),
                     "center_3d": r.center_3d, "size_3d": r.size_3d} for r in obs.regions],
        "people": [{"box": list(s.box), "identity_id": s.identity_id,
                    "identity_confidence": s.identity_confidence, "detection_score": s.detection_score,
                    "face_box": list(s.face_box) if s.face_box else None,
                    "face_embedding": _vec(s.face_embedding), "reid_embedding": _vec(s.reid_embedding),
                    "activity": s.activity, "clothing": s.clothing, "crop_path": s.crop_path,
                    "position": list(s.position) if s.position is not None else None, "track_id": s.track_id}
                   for s in obs.people],
    }


def observation_from_dict(data: dict[str, Any]) -> Observation:
    """Inverse of :func:`observation_to_dict`; raises ValueError naming the missing field."""
    try:
        pose = data["pose"]
        return Observation(
            observation_id=str(data["observation_id"]), stamp=float(data["stamp"]),
            episode_id=str(data["episode_id"]),
            pose=None if pose is None else Pose(float(pose["x"]), float(pose["y"]), float(pose.get("z", 0.0)),
                                                float(pose.get("yaw", 0.0)), pose.get("frame_id", "map")),
            description=data.get("description", ""), description_json=data.get("description_json", ""),
            keyframe_id=data.get("keyframe_id", ""), segment_id=int(data.get("segment_id", 0)),
            waypoint_id=data.get("waypoint_id", ""), image_path=data.get("image_path", ""),
            text_embedding=as_vector(data.get("text_embedding")),
            global_embedding=as_vector(data.get("global_embedding")),
            regions=[Region(tuple(r["box"]), r.get("label", ""), r.get("score", 0.0),
                            as_vector(r.get("embedding")),
                            tuple(r["center_3d"]) if r.get("center_3d") else None,
                            tuple(r["size_3d"]) if r.get("size_3d") else None)
                     for r in data.get("regions", [])],
            people=[PersonSighting(tuple(s["box"]), s.get("identity_id", ""), s.get("identity_confidence", 0.0),
                                   s.get("detection_score", 0.0),
                                   tuple(s["face_box"]) if s.get("face_box") else None,
                                   as_vector(s.get("face_embedding")), as_vector(s.get("reid_embedding")),
                                   s.get("activity", ""), s.get("clothing", ""), s.get("crop_path", ""),
                                   finite_point(s.get("position") or ()), s.get("track_id") or 0)
                    for s in data.get("people", [])],
        )
    except KeyError as exc:
        raise ValueError(f"observation record lacks field {exc}") from exc
