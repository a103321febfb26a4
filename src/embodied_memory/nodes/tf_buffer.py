"""The frame selector's TF buffer: tf2_ros.Buffer on a full ROS 2 install, else the ROS-free
buffer with the same lookup semantics (ingest/transforms.py), behind one small interface:
``set_transform(parent, child, stamp, transform, static) -> bool``,
``lookup_transform(target, source, stamp) -> StampedTransform`` raising ingest.transforms'
errors, ``clear()``."""
from __future__ import annotations

import math
import re

from ..ingest.transforms import (ConnectivityError, ExtrapolationError, FrameLookupError, InvalidFrameError,
                                 StampedTransform, Transform, TransformBuffer, TransformError)

AUTHORITY = "embodied_memory_frame_selector"


def make_transform_buffer(cache_time_s: float):
    """(buffer, name): tf2_ros.Buffer when importable, else ours."""
    try:
        import tf2_ros  # noqa: F401 - a full ROS 2 install
    except ImportError:
        return TransformBuffer(cache_time_s), "embodied_memory"
    return Tf2Buffer(cache_time_s), "tf2_ros"


def _extrapolation(exc: Exception, stamp: float) -> ExtrapolationError:
    text = str(exc)
    numbers = [float(v) for v in re.findall(r"time (\d+(?:\.\d+)?)", text)]
    available = numbers[1] if len(numbers) > 1 else math.nan
    if "into the past" in text:
        direction = "past"
    elif "into the future" in text:
        direction = "future"
    else:
        direction = "single"
    return ExtrapolationError(text, direction, stamp, available)


class Tf2Buffer:
    """tf2_ros.Buffer (filled by this node's own /tf and /tf_static subscriptions and its
    odometry) with ingest.transforms' interface and errors."""

    def __init__(self, cache_time_s: float):
        import tf2_ros
        from rclpy.duration import Duration
        self._tf2 = tf2_ros
        self.buffer = tf2_ros.Buffer(cache_time=Duration(seconds=cache_time_s))

    def set_transform(self, parent: str, child: str, stamp: float, transform: Transform,
                      static: bool = False) -> bool:
        from geometry_msgs.msg import TransformStamped

        from .common import to_time_msg
        if not parent or not child or parent == child:
            raise ValueError(f"invalid frame ids {parent!r} <- {child!r}")
        if not (transform.is_finite() and math.isfinite(stamp)):
            raise ValueError(f"NaN/inf in the transform {parent} <- {child} at {stamp}")
        transform = transform.normalized()
        msg = TransformStamped()
        msg.header.frame_id, msg.child_frame_id = parent, child
        msg.header.stamp = to_time_msg(stamp)
        tr, q = msg.transform.translation, msg.transform.rotation
        tr.x, tr.y, tr.z = (float(v) for v in transform.translation)
        q.x, q.y, q.z, q.w = (float(v) for v in transform.rotation)
        if static:
            self.buffer.set_transform_static(msg, AUTHORITY)
        else:
            self.buffer.set_transform(msg, AUTHORITY)
        return True

    def lookup_transform(self, target_frame: str, source_frame: str, stamp: float = 0.0) -> StampedTransform:
        from rclpy.time import Time
        tf2 = self._tf2
        try:
            found = self.buffer.lookup_transform(target_frame, source_frame, Time(nanoseconds=int(round(stamp * 1e9))))
        except tf2.ExtrapolationException as exc:
            raise _extrapolation(exc, stamp) from None
        except tf2.LookupException as exc:
            raise FrameLookupError(str(exc)) from None
        except tf2.ConnectivityException as exc:
            raise ConnectivityError(str(exc)) from None
        except tf2.InvalidArgumentException as exc:
            raise InvalidFrameError(str(exc)) from None
        except tf2.TransformException as exc:
            raise TransformError(str(exc)) from None
        tr, q = found.transform.translation, found.transform.rotation
        s = found.header.stamp
        return StampedTransform(target_frame, source_frame, s.sec + s.nanosec * 1e-9,
                                Transform((tr.x, tr.y, tr.z), (q.x, q.y, q.z, q.w)))

    def clear(self) -> None:
        self.buffer.clear()
