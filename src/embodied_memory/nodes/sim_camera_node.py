"""sim_camera_node: a simulated RGB-D camera (the simulated office, MiniWorld) on a simulated
base. It renders the view at the pose on /odom (the navigation bridge's sim backend publishes
it) and publishes a colour image (JPEG), a depth image (32FC1, metres, REP 118) and the depth
camera's CameraInfo: what a robot's camera driver would. Camera 1.5 m up, tilted 25 degrees
down (``camera_height_m: 1.5``, ``camera_pitch_deg: -25`` on the explore node)."""
from __future__ import annotations

import math

import cv2
import numpy as np
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from ..ingest.sync import yaw_from_quaternion
from ..params import SimCameraNodeParams
from .common import node_options, node_params, run_node, to_time_msg
from .sensor_qos import sensor_qos


class SimCameraNode(Node):
    def __init__(self, **kwargs):
        super().__init__("sim_camera", **node_options(kwargs))
        p = self.params = node_params(self, SimCameraNodeParams)
        from dataclasses import replace

        from ..sim.exploration import SimExplorationEnv, make_task
        task = make_task(p.sim_seed, p.sim_layout)
        if p.sim_target_room:
            task = replace(task, target_room=p.sim_target_room)
        self.env = SimExplorationEnv(task, (0.0, 0.0, 0.0), p.width, p.height)
        self._pose = None
        # best effort in, best effort out: like a camera driver (the robot side must cope with both)
        self.create_subscription(Odometry, p.odom_topic, self._on_odom, sensor_qos("sensor_data"))
        self._image_pub = self.create_publisher(CompressedImage, p.image_topic, qos_profile_sensor_data)
        self._depth_pub = self.create_publisher(Image, p.depth_topic, qos_profile_sensor_data)
        self._info_pub = self.create_publisher(CameraInfo, p.camera_info_topic, qos_profile_sensor_data)
        self.create_timer(1.0 / p.rate_hz, self._render)
        self.get_logger().info(f"simulated camera ({p.sim_layout} seed {p.sim_seed}, {task.target} in the "
                               f"{task.target_room}) following {p.odom_topic}")

    def _on_odom(self, msg: Odometry) -> None:
        q = msg.pose.pose.orientation
        self._pose = (msg.pose.pose.position.x, msg.pose.pose.position.y, yaw_from_quaternion(q.x, q.y, q.z, q.w))

    def _render(self) -> None:
        if self._pose is None or not all(math.isfinite(v) for v in self._pose):
            return
        self.env.teleport(*self._pose)
        frame = self.env.observe()
        stamp = to_time_msg(frame.stamp)
        cam = self.env.camera
        info = CameraInfo(width=cam.width, height=cam.height, distortion_model="plumb_bob")
        info.header.stamp, info.header.frame_id = stamp, "camera_depth_optical_frame"
        info.k = [cam.fx, 0.0, cam.cx, 0.0, cam.fy, cam.cy, 0.0, 0.0, 1.0]
        info.p = [cam.fx, 0.0, cam.cx, 0.0, 0.0, cam.fy, cam.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        self._info_pub.publish(info)
        ok, jpeg = cv2.imencode(".jpg", frame.image, [cv2.IMWRITE_JPEG_QUALITY, 85])
        image = CompressedImage(format="jpeg", data=jpeg.tobytes())
        image.header.stamp, image.header.frame_id = stamp, "camera_color_optical_frame"
        self._image_pub.publish(image)
        depth = np.ascontiguousarray(frame.depth, np.float32)
        msg = Image(height=depth.shape[0], width=depth.shape[1], encoding="32FC1", step=4 * depth.shape[1],
                    data=depth.tobytes())
        msg.header.stamp, msg.header.frame_id = stamp, "camera_depth_optical_frame"
        self._depth_pub.publish(msg)

    def close(self) -> None:
        self.env.close()


def main() -> None:
    run_node(SimCameraNode, threads=1)


if __name__ == "__main__":
    main()
