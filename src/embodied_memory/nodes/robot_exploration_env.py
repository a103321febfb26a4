"""The explorer's environment on a real robot: depth + camera info + colour image + pose topics
in, motion through the navigation bridge (NavigateToWaypoint with a pose: GraphNav or Nav2).

Depth: sensor_msgs/Image 32FC1 (metres) or 16UC1 (millimetres), REP 118. The pose topic is
nav_msgs/Odometry in the map frame (GraphNav's localisation or AMCL); the camera sits
``camera_height_m`` above the floor, tilted ``camera_pitch_deg`` (negative = down)."""
from __future__ import annotations

import math
import threading
from typing import Callable, Optional, Sequence

import cv2
import numpy as np
from nav_msgs.msg import Odometry
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from ..explore.explorer import Frame
from ..explore.occupancy import CameraModel
from ..ingest.images import ImageDecodeError, decode_compressed, decode_depth
from ..ingest.sync import yaw_from_quaternion
from ..types import Pose
from .common import from_time_msg
from .sensor_qos import SensorSubscriptions


class SensorTimeout(RuntimeError):
    pass


class RosExplorationEnv:
    def __init__(self, node: Node, params, navigate):
        self.node, self.params, self.navigate = node, params, navigate
        self.cancelled: Callable[[], bool] = lambda: False   # set per goal: a cancel stops the drive at once
        self.camera: Optional[CameraModel] = None
        self._lock = threading.Lock()
        self._depth: Optional[tuple[float, np.ndarray]] = None
        self._image: Optional[np.ndarray] = None
        self._pose: Optional[Pose] = None
        self._new = threading.Condition(self._lock)
        group = ReentrantCallbackGroup()
        # sensor_qos: sensor_data matches camera drivers (best effort) and bag players (reliable)
        self.sensors = sensors = SensorSubscriptions(node, getattr(node, "health", None), params.sensor_timeout_s)
        qos = params.sensor_qos
        sensors.subscribe(Image, params.depth_topic, self._on_depth, qos, callback_group=group)
        sensors.subscribe(CameraInfo, params.camera_info_topic, self._on_info, qos, callback_group=group)
        sensors.subscribe(CompressedImage, params.image_topic, self._on_image, qos, callback_group=group)
        sensors.subscribe(Odometry, params.pose_topic, self._on_pose, qos, callback_group=group)

    def _on_info(self, msg: CameraInfo) -> None:
        if self.camera is None and msg.k[0] > 0:
            self.camera = CameraModel(msg.k[0], msg.k[4], msg.k[2], msg.k[5], msg.width, msg.height,
                                      math.radians(self.params.camera_pitch_deg))

    def _on_depth(self, msg: Image) -> None:
        try:
            depth = decode_depth(msg.encoding, msg.height, msg.width, msg.step, msg.data)
        except ImageDecodeError as exc:
            self.node.get_logger().error(str(exc), throttle_duration_sec=10.0)
            return
        with self._new:
            self._depth = (from_time_msg(msg.header.stamp), depth)
            self._new.notify_all()

    def _on_image(self, msg: CompressedImage) -> None:
        try:
            image = decode_compressed(msg.data, msg.format)
        except ImageDecodeError as exc:
            self.node.get_logger().error(str(exc), throttle_duration_sec=10.0)
            return
        with self._lock:
            self._image = image

    def _on_pose(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        pose = Pose(p.x, p.y, self.params.camera_height_m, yaw_from_quaternion(q.x, q.y, q.z, q.w))
        if pose.is_finite():
            with self._lock:
                self._pose = pose

    def current_pose(self) -> Pose:
        with self._lock:
            if self._pose is None:
                raise SensorTimeout(f"no pose on {self.params.pose_topic} yet")
            return self._pose

    def observe(self) -> Frame:
        """The next depth image after this call (the robot has settled), with pose and colour.
        "Next" compares header stamps (robot time, the camera's clock); the frame keeps its
        depth image's stamp.  ``sensor_timeout_s`` is a thread wait: wall time."""
        with self._new:
            since = self._depth[0] if self._depth else -1.0
            ok = self._new.wait_for(lambda: self._depth is not None and self._depth[0] > since
                                    and self._pose is not None and self.camera is not None,
                                    timeout=self.params.sensor_timeout_s)
            if not ok:
                missing = [t for t, v in ((self.params.depth_topic, self._depth), (self.params.pose_topic, self._pose),
                                          (self.params.camera_info_topic, self.camera)) if v is None]
                raise SensorTimeout(f"no fresh depth/pose/camera info in {self.params.sensor_timeout_s} s "
                                    f"(never received: {', '.join(missing) or 'none; the depth stream stalled'})")
            stamp, depth = self._depth
            image = self._image if self._image is not None else cv2.cvtColor(
                np.clip(depth * 40, 0, 255).astype(np.uint8), cv2.COLOR_GRAY2BGR)
            return Frame(image, depth, self._pose, stamp)

    def turn_to(self, yaw: float) -> None:
        p = self.current_pose()
        self._go(p.x, p.y, yaw)

    def move_along(self, points: Sequence[tuple[float, float]]) -> float:
        driven = 0.0
        p = self.current_pose()
        here = (p.x, p.y)
        for x, y in points:
            end = self._go(x, y, math.atan2(y - here[1], x - here[0]))
            driven += math.hypot(end[0] - here[0], end[1] - here[1])
            here = end
        return driven

    def _go(self, x: float, y: float, yaw: float) -> tuple[float, float]:
        """Drive there through the bridge; returns where the bridge says the robot ended."""
        result = self.navigate.to_pose(x, y, yaw, self.params.map_frame, cancelled=self.cancelled)
        if not result.get("success"):
            raise RuntimeError(f"navigation to ({x:.2f}, {y:.2f}) failed: {result.get('message', '')}")
        final = result.get("final_position") or (x, y)
        return float(final[0]), float(final[1])
