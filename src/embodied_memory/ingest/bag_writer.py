"""Writing rosbag2 files (MCAP or sqlite3) with ``rosbags``: the robot's sensor streams as
a real robot records them (compressed RGB, depth, camera info, odometry, /tf, /clock and the
GraphNav waypoint).  Used by the simulator and by tests that need a bag."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import cv2
import numpy as np


DEPTH_TOPIC = "/camera/depth/image_raw"            # registered to the colour image, its own size
CAMERA_INFO_TOPIC = "/camera/color/camera_info"     # the colour camera's


class BagWriter:
    def __init__(self, path: str | Path, storage: str = "mcap", odom_frame: str = "odom",
                 base_frame: str = "base_link", camera_frame: str = "camera_link"):
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore
        self.ts = get_typestore(Stores.ROS2_KILTED)
        self.t = self.ts.types
        self.path = Path(path)
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=9, storage_plugin=plugin)
        self._conns: dict[str, object] = {}
        self.odom_frame, self.base_frame, self.camera_frame = odom_frame, base_frame, camera_frame

    def __enter__(self) -> "BagWriter":
        self._writer.open()
        return self

    def __exit__(self, *exc) -> None:
        self._writer.close()

    def _write(self, topic: str, msgtype: str, stamp: float, msg) -> None:
        if topic not in self._conns:
            self._conns[topic] = self._writer.add_connection(topic, msgtype, typestore=self.ts)
        self._writer.write(self._conns[topic], int(round(stamp * 1e9)), self.ts.serialize_cdr(msg, msgtype))

    # -- message builders -----------------------------------------------------------------
    def _header(self, stamp: float, frame: str):
        sec = int(stamp)
        return self.t["std_msgs/msg/Header"](stamp=self.t["builtin_interfaces/msg/Time"](
            sec=sec, nanosec=int(round((stamp - sec) * 1e9)) % 1_000_000_000), frame_id=frame)

    def _pose(self, x: float, y: float, yaw: float, z: float = 0.0):
        t = self.t
        return t["geometry_msgs/msg/Pose"](position=t["geometry_msgs/msg/Point"](x=x, y=y, z=z),
                                           orientation=t["geometry_msgs/msg/Quaternion"](
                                               x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2)))

    def image(self, stamp: float, bgr: np.ndarray, topic: str = "/camera/color/image_raw/compressed",
              quality: int = 85) -> None:
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
        msg = self.t["sensor_msgs/msg/CompressedImage"](header=self._header(stamp, self.camera_frame), format="jpeg",
                                                        data=np.asarray(buf, dtype=np.uint8).reshape(-1))
        self._write(topic, "sensor_msgs/msg/CompressedImage", stamp, msg)

    def raw_image(self, stamp: float, bgr: np.ndarray, topic: str = "/camera/color/image_raw") -> None:
        h, w = bgr.shape[:2]
        msg = self.t["sensor_msgs/msg/Image"](header=self._header(stamp, self.camera_frame), height=h, width=w,
                                              encoding="bgr8", is_bigendian=0, step=w * 3,
                                              data=np.ascontiguousarray(bgr).reshape(-1))
        self._write(topic, "sensor_msgs/msg/Image", stamp, msg)

    def depth(self, stamp: float, metres: np.ndarray, topic: str = DEPTH_TOPIC) -> None:
        mm = np.clip(np.nan_to_num(metres) * 1000.0, 0, 65535).astype(np.uint16)
        h, w = mm.shape
        msg = self.t["sensor_msgs/msg/Image"](header=self._header(stamp, self.camera_frame), height=h, width=w,
                                              encoding="16UC1", is_bigendian=0, step=w * 2,
                                              data=np.frombuffer(mm.tobytes(), dtype=np.uint8))
        self._write(topic, "sensor_msgs/msg/Image", stamp, msg)

    def camera_info(self, stamp: float, width: int, height: int, fx: float, fy: float,
                    topic: str = CAMERA_INFO_TOPIC) -> None:
        t = self.t
        k = np.array([fx, 0, width / 2, 0, fy, height / 2, 0, 0, 1], dtype=np.float64)
        p = np.array([fx, 0, width / 2, 0, 0, fy, height / 2, 0, 0, 0, 1, 0], dtype=np.float64)
        msg = t["sensor_msgs/msg/CameraInfo"](
            header=self._header(stamp, self.camera_frame), height=height, width=width, distortion_model="plumb_bob",
            d=np.zeros(5), k=k, r=np.eye(3).reshape(-1), p=p, binning_x=0, binning_y=0,
            roi=t["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
        self._write(topic, "sensor_msgs/msg/CameraInfo", stamp, msg)

    def odometry(self, stamp: float, x: float, y: float, yaw: float, topic: str = "/odom") -> None:
        t = self.t
        msg = t["nav_msgs/msg/Odometry"](
            header=self._header(stamp, self.odom_frame), child_frame_id=self.base_frame,
            pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=self._pose(x, y, yaw), covariance=np.zeros(36)),
            twist=t["geometry_msgs/msg/TwistWithCovariance"](
                twist=t["geometry_msgs/msg/Twist"](linear=t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
                                                   angular=t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0)),
                covariance=np.zeros(36)))
        self._write(topic, "nav_msgs/msg/Odometry", stamp, msg)

    def tf(self, stamp: float, x: float, y: float, yaw: float, topic: str = "/tf") -> None:
        t = self.t
        transform = t["geometry_msgs/msg/TransformStamped"](
            header=self._header(stamp, self.odom_frame), child_frame_id=self.base_frame,
            transform=t["geometry_msgs/msg/Transform"](
                translation=t["geometry_msgs/msg/Vector3"](x=x, y=y, z=0.0),
                rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2))))
        self._write(topic, "tf2_msgs/msg/TFMessage", stamp, t["tf2_msgs/msg/TFMessage"](transforms=[transform]))

    def clock(self, stamp: float) -> None:
        sec = int(stamp)
        msg = self.t["rosgraph_msgs/msg/Clock"](clock=self.t["builtin_interfaces/msg/Time"](
            sec=sec, nanosec=int(round((stamp - sec) * 1e9)) % 1_000_000_000))
        self._write("/clock", "rosgraph_msgs/msg/Clock", stamp, msg)

    def waypoint(self, stamp: float, waypoint_id: str, topic: str = "/waypoint") -> None:
        self._write(topic, "std_msgs/msg/String", stamp, self.t["std_msgs/msg/String"](data=waypoint_id))

    def frame(self, stamp: float, bgr: np.ndarray, x: float, y: float, yaw: float, *,
              depth: Optional[np.ndarray] = None, waypoint: str = "", fx: Optional[float] = None) -> None:
        """Everything a robot records for one camera frame; a depth image (metres) may have its
        own resolution (same field of view): it gets its own camera info."""
        self.clock(stamp)
        if waypoint:  # before the image: the robot knows where it is when the frame arrives
            self.waypoint(stamp, waypoint)
        self.odometry(stamp, x, y, yaw)
        self.tf(stamp, x, y, yaw)
        h, w = bgr.shape[:2]
        self.camera_info(stamp, w, h, fx or w / (2 * math.tan(math.radians(30))), fx or w / (2 * math.tan(math.radians(30))))
        self.image(stamp, bgr)
        if depth is not None:
            dh, dw = depth.shape[:2]
            dfx = (fx or w / (2 * math.tan(math.radians(30)))) * dw / w
            self.camera_info(stamp, dw, dh, dfx, dfx, topic="/camera/depth/camera_info")
            self.depth(stamp, depth)
