"""embodied_memory_interfaces messages <-> core dataclasses."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
from embodied_memory_interfaces.msg import Answer as AnswerMsg
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.msg import PersonSighting as PersonSightingMsg
from embodied_memory_interfaces.msg import Region as RegionMsg
from geometry_msgs.msg import Point, PoseStamped, Quaternion, Vector3

from ..ingest.sync import yaw_from_quaternion
from ..types import Observation, PersonSighting, Pose, Region, as_vector, finite_point
from .common import from_time_msg, to_time_msg


def quaternion_from_yaw(yaw: float) -> Quaternion:
    return Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2.0), w=math.cos(yaw / 2.0))


def pose_from_msg(msg: PoseStamped) -> Pose:
    p = msg.pose.position
    q = msg.pose.orientation
    return Pose(p.x, p.y, p.z, yaw_from_quaternion(q.x, q.y, q.z, q.w), msg.header.frame_id or "map")


def pose_to_msg(pose: Pose, stamp: float) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = pose.frame_id
    msg.header.stamp = to_time_msg(stamp)
    msg.pose.position = Point(x=float(pose.x), y=float(pose.y), z=float(pose.z))
    msg.pose.orientation = quaternion_from_yaw(pose.yaw)
    return msg


def optional_pose_to_msg(pose: Optional[Pose], stamp: float) -> PoseStamped:
    """A keyframe's or observation's pose; no pose is an empty header frame_id (zeros)."""
    if pose is None:
        msg = PoseStamped()
        msg.header.stamp = to_time_msg(stamp)
        return msg
    msg = pose_to_msg(pose, stamp)
    msg.header.frame_id = pose.frame_id or "map"
    return msg


def optional_pose_from_msg(msg: PoseStamped) -> Optional[Pose]:
    """Inverse of :func:`optional_pose_to_msg`: None when the header has no frame_id."""
    return pose_from_msg(msg) if msg.header.frame_id else None


def _box(values) -> tuple[float, float, float, float]:
    return tuple(float(v) for v in values)  # type: ignore[return-value]


def observation_from_msg(msg: ObservationMsg) -> Observation:
    return Observation(
        observation_id=msg.observation_id, stamp=from_time_msg(msg.header.stamp), episode_id=msg.episode_id,
        pose=optional_pose_from_msg(msg.pose), description=msg.description, description_json=msg.description_json,
        keyframe_id=msg.keyframe_id, segment_id=msg.segment_id, waypoint_id=msg.waypoint_id,
        image_path=msg.image_path, image_jpeg=bytes(msg.image.data) if len(msg.image.data) else None,
        text_embedding=as_vector(msg.text_embedding),
        global_embedding=as_vector(msg.global_embedding),
        regions=[Region(_box(r.box), r.label, r.score, as_vector(r.embedding),
                        (r.center_3d.x, r.center_3d.y, r.center_3d.z) if r.has_box_3d else None,
                        (r.size_3d.x, r.size_3d.y, r.size_3d.z) if r.has_box_3d else None)
                 for r in msg.regions],
        people=[PersonSighting(_box(s.box), s.identity_id, s.identity_confidence, s.detection_score,
                               _box(s.face_box) if s.has_face else None, as_vector(s.face_embedding),
                               as_vector(s.reid_embedding), s.activity, s.clothing,
                               position=finite_point((s.position.x, s.position.y, s.position.z))
                               if s.has_position else None, track_id=int(s.track_id))
                for s in msg.people],
    )


def _floats(vec) -> list[float]:
    return [] if vec is None else np.asarray(vec, dtype=np.float32).tolist()


def observation_to_msg(obs: Observation) -> ObservationMsg:
    msg = ObservationMsg()
    msg.header.stamp = to_time_msg(obs.stamp)
    msg.header.frame_id = obs.pose.frame_id if obs.pose is not None else ""
    msg.observation_id, msg.keyframe_id, msg.episode_id = obs.observation_id, obs.keyframe_id, obs.episode_id
    msg.segment_id, msg.waypoint_id = int(obs.segment_id), obs.waypoint_id
    msg.pose = optional_pose_to_msg(obs.pose, obs.stamp)
    msg.description, msg.description_json, msg.image_path = obs.description, obs.description_json, obs.image_path
    if obs.image_jpeg:
        msg.image.format, msg.image.data = "jpeg", obs.image_jpeg
    msg.text_embedding = _floats(obs.text_embedding)
    msg.global_embedding = _floats(obs.global_embedding)
    for r in obs.regions:
        rm = RegionMsg(label=r.label, score=float(r.score), box=[float(v) for v in r.box],
                       embedding=_floats(r.embedding), has_box_3d=r.center_3d is not None)
        if r.center_3d is not None:
            rm.center_3d = Point(x=float(r.center_3d[0]), y=float(r.center_3d[1]), z=float(r.center_3d[2]))
            rm.size_3d = Vector3(x=float(r.size_3d[0]), y=float(r.size_3d[1]), z=float(r.size_3d[2]))
        msg.regions.append(rm)
    for s in obs.people:
        sm = PersonSightingMsg(identity_id=s.identity_id, identity_confidence=float(s.identity_confidence),
                               detection_score=float(s.detection_score), box=[float(v) for v in s.box],
                               has_face=s.face_box is not None, face_embedding=_floats(s.face_embedding),
                               reid_embedding=_floats(s.reid_embedding), activity=s.activity, clothing=s.clothing,
                               track_id=int(s.track_id))
        if s.face_box is not None:
            sm.face_box = [float(v) for v in s.face_box]
        if s.position is not None:
            sm.has_position = True
            sm.position = Point(x=float(s.position[0]), y=float(s.position[1]), z=float(s.position[2]))
        msg.people.append(sm)
    return msg


def answer_to_msg(answer) -> AnswerMsg:
    """agent.answer.Answer -> embodied_memory_interfaces/Answer (``json`` carries every field;
    no count is ``count = -1``)."""
    msg = AnswerMsg(status=answer.status, error=answer.error, type=answer.type, text=answer.text,
                    binary=answer.binary, persons=list(answer.persons), waypoint_id=answer.waypoint,
                    count=-1 if answer.count is None else int(answer.count), days=list(answer.days),
                    evidence_ids=list(answer.evidence), confidence=float(answer.confidence),
                    tokens_in=int(answer.tokens_in), tokens_out=int(answer.tokens_out),
                    tool_calls=int(answer.tool_calls), latency_s=float(answer.latency_s), json=answer.to_json())
    if answer.position is not None:
        msg.has_position = True
        msg.position = Point(x=float(answer.position[0]), y=float(answer.position[1]), z=float(answer.position[2]))
    if answer.orientation is not None:
        msg.has_orientation, msg.orientation_yaw = True, float(answer.orientation)
    if answer.time is not None:
        msg.has_time, msg.time, msg.time_iso = True, to_time_msg(answer.time), answer.time_iso
        msg.minutes_ago = float(answer.minutes_ago or 0.0)
    if answer.duration_minutes is not None:
        msg.has_duration, msg.duration_minutes = True, float(answer.duration_minutes)
    return msg


def grid_to_msg(values: np.ndarray, resolution: float, origin: tuple[float, float], stamp: float,
                frame_id: str = "map"):
    """int8 grid (row 0 = lowest y; -1/0/100) -> nav_msgs/OccupancyGrid."""
    from nav_msgs.msg import OccupancyGrid as GridMsg
    msg = GridMsg()
    msg.header.frame_id = frame_id
    msg.header.stamp = to_time_msg(stamp)
    msg.info.map_load_time = msg.header.stamp
    msg.info.resolution = float(resolution)
    msg.info.height, msg.info.width = (int(v) for v in values.shape)
    msg.info.origin.position = Point(x=float(origin[0]), y=float(origin[1]), z=0.0)
    msg.data = np.ascontiguousarray(values, np.int8).ravel().tolist()
    return msg


def grid_from_msg(msg) -> tuple[np.ndarray, float, tuple[float, float]]:
    """nav_msgs/OccupancyGrid -> (int8 grid, resolution, origin); only unrotated maps."""
    info = msg.info
    q = info.origin.orientation
    if abs(yaw_from_quaternion(q.x, q.y, q.z, q.w)) > 1e-6:
        raise ValueError("occupancy grid: a rotated map origin is not supported")
    if not (info.resolution > 0 and info.width > 0 and info.height > 0):
        raise ValueError("occupancy grid: resolution, width and height must be positive")
    data = np.asarray(msg.data, np.int8)
    if data.size != info.width * info.height:
        raise ValueError(f"occupancy grid: {data.size} cells for {info.width}x{info.height}")
    return data.reshape(info.height, info.width), float(info.resolution), (info.origin.position.x,
                                                                           info.origin.position.y)
