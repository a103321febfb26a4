"""The ROS-free TF buffer (ingest/transforms.py) against tf2's lookup semantics, and the frame
poser (ingest/sync.py) that waits a bounded time for a frame's transform."""
import math

import pytest

from embodied_memory.ingest.sync import FramePoser
from embodied_memory.ingest.transforms import (ConnectivityError, ExtrapolationError, FrameLookupError,
                                               InvalidFrameError, Transform, TransformBuffer, TransformError,
                                               planar_pose, slerp)

T0 = 1_800_000_000.0


def yaw_q(yaw: float) -> tuple[float, float, float, float]:
    return (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))


def tf(x=0.0, y=0.0, z=0.0, yaw=0.0, q=None) -> Transform:
    return Transform((x, y, z), q or yaw_q(yaw))


def close(a, b, tol=1e-9):
    return all(abs(u - v) <= tol for u, v in zip(a, b))


def test_chain_composition_through_the_common_ancestor():
    buf = TransformBuffer()
    buf.set_transform("map", "odom", T0, tf(10.0, 0.0, yaw=math.pi / 2))
    buf.set_transform("odom", "base_link", T0, tf(1.0, 0.0))
    buf.set_transform("base_link", "camera", T0, tf(0.0, 0.0, 1.0), static=True)
    buf.set_transform("odom", "person", T0, tf(0.0, 2.0))
    # map <- base_link: odom is rotated 90 deg in map, so base_link's x=1 in odom is y=1 in map
    found = buf.lookup_transform("map", "base_link", T0)
    assert close(found.transform.translation, (10.0, 1.0, 0.0))
    assert math.isclose(found.transform.yaw, math.pi / 2)
    assert (found.frame_id, found.child_frame_id, found.stamp) == ("map", "base_link", T0)
    assert close(buf.lookup_transform("map", "camera", T0).transform.translation, (10.0, 1.0, 1.0))
    # down and up again: camera in person (both under odom): camera at (1, 0, 1), person at (0, 2, 0) in odom
    rel = buf.lookup_transform("person", "camera", T0)
    assert close(rel.transform.translation, (1.0, -2.0, 1.0))
    # the inverse lookup is the inverse transform
    back = buf.lookup_transform("base_link", "map", T0).transform
    assert close((back * found.transform).translation, (0.0, 0.0, 0.0))
    # a full 3D rotation composes as quaternions: 90 deg about x, then a point on y goes to z
    buf.set_transform("camera", "optical", T0, tf(q=(math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4))),
                      static=True)
    buf.set_transform("optical", "tip", T0, tf(0.0, 1.0, 0.0), static=True)
    assert close(buf.lookup_transform("camera", "tip", T0).transform.translation, (0.0, 0.0, 1.0))
    assert buf.lookup_transform("odom", "odom", 0.0).transform == Transform()


def test_a_leading_slash_is_dropped_as_tf2_does():
    buf = TransformBuffer()
    buf.set_transform("/odom", "/base_link", T0, tf(1.0, 2.0))        # ROS 1 style ids from a driver
    assert close(buf.lookup_transform("odom", "base_link", T0).transform.translation, (1.0, 2.0, 0.0))
    assert close(buf.lookup_transform("/odom", "base_link", T0).transform.translation, (1.0, 2.0, 0.0))
    assert buf.latest_common_time("odom", "/base_link") == T0


def test_planar_pose_is_x_y_z_yaw_in_the_target_frame():
    buf = TransformBuffer()
    buf.set_transform("map", "base_link", T0, tf(1.0, 2.0, 0.5, yaw=-2.5))
    pose = planar_pose(buf.lookup_transform("map", "base_link", T0))
    assert (pose.x, pose.y, pose.z, pose.frame_id) == (1.0, 2.0, 0.5, "map")
    assert math.isclose(pose.yaw, -2.5)


def test_interpolation_is_linear_in_translation_and_slerp_in_rotation():
    buf = TransformBuffer()
    buf.set_transform("odom", "base_link", T0, tf(0.0, 0.0, yaw=0.0))
    buf.set_transform("odom", "base_link", T0 + 1.0, tf(2.0, 4.0, yaw=math.pi / 2))
    found = buf.lookup_transform("odom", "base_link", T0 + 0.25)
    assert close(found.transform.translation, (0.5, 1.0, 0.0))
    assert math.isclose(found.transform.yaw, math.pi / 8)                     # slerp: a quarter of the angle
    # across +-pi the short way round (170 deg -> -170 deg passes 180, not 0)
    buf.set_transform("odom", "wheel", T0, tf(yaw=math.radians(170)))
    buf.set_transform("odom", "wheel", T0 + 1.0, tf(yaw=math.radians(-170)))
    assert math.isclose(abs(buf.lookup_transform("odom", "wheel", T0 + 0.5).transform.yaw), math.pi)
    # slerp keeps unit length and hits both ends
    a, b = yaw_q(0.3), (math.sin(0.5), 0.0, 0.0, math.cos(0.5))
    for f in (0.0, 0.3, 0.7, 1.0):
        assert math.isclose(sum(v * v for v in slerp(a, b, f)), 1.0)
    assert close(slerp(a, b, 0.0), a) and close(slerp(a, b, 1.0), b)
    # each edge interpolated at the same time, then composed
    buf.set_transform("map", "odom", T0, tf(0.0, 0.0))
    buf.set_transform("map", "odom", T0 + 1.0, tf(10.0, 0.0))
    assert close(buf.lookup_transform("map", "base_link", T0 + 0.5).transform.translation[:2], (6.0, 2.0), 1e-9)


def test_no_extrapolation_with_tf2_messages():
    buf = TransformBuffer()
    buf.set_transform("odom", "base_link", T0, tf(0.0))
    with pytest.raises(ExtrapolationError, match="only time") as single:
        buf.lookup_transform("odom", "base_link", T0 + 0.1)
    assert single.value.direction == "single"
    buf.set_transform("odom", "base_link", T0 + 1.0, tf(1.0))
    with pytest.raises(ExtrapolationError, match=r"into the future.  Requested time 1800000001\.500000000 but the "
                                                 r"latest data is at time 1800000001\.000000000, when looking up "
                                                 r"transform from frame \[base_link\] to frame \[odom\]") as future:
        buf.lookup_transform("odom", "base_link", T0 + 1.5)
    assert (future.value.direction, future.value.requested, future.value.available) == ("future", T0 + 1.5, T0 + 1.0)
    with pytest.raises(ExtrapolationError, match="into the past") as past:
        buf.lookup_transform("odom", "base_link", T0 - 0.5)
    assert past.value.direction == "past" and isinstance(past.value, TransformError)
    # an optional tolerance takes the nearest sample that close
    lenient = TransformBuffer(extrapolation_tolerance_s=0.1)
    lenient.set_transform("odom", "base_link", T0, tf(0.0))
    lenient.set_transform("odom", "base_link", T0 + 1.0, tf(1.0))
    assert lenient.lookup_transform("odom", "base_link", T0 + 1.05).transform.translation[0] == 1.0
    with pytest.raises(ExtrapolationError):
        lenient.lookup_transform("odom", "base_link", T0 + 1.2)
    # the whole chain must cover the time: the slowest edge decides
    buf.set_transform("map", "odom", T0 + 0.5, tf(0.0))
    buf.set_transform("map", "odom", T0 + 0.8, tf(0.0))
    assert buf.can_transform("map", "base_link", T0 + 0.6)
    assert not buf.can_transform("map", "base_link", T0 + 0.9)


def test_missing_and_disconnected_frames():
    buf = TransformBuffer()
    buf.set_transform("odom", "base_link", T0, tf())
    buf.set_transform("vision", "body", T0, tf())
    with pytest.raises(FrameLookupError, match='"map" passed to lookupTransform argument target_frame does not '
                                               'exist') as missing:
        buf.lookup_transform("map", "base_link", T0)
    assert isinstance(missing.value, LookupError)
    with pytest.raises(FrameLookupError, match='"gripper" passed to lookupTransform argument source_frame'):
        buf.lookup_transform("odom", "gripper", T0)
    with pytest.raises(ConnectivityError, match="Could not find a connection between 'odom' and 'body' because they "
                                                "are not part of the same tree"):
        buf.lookup_transform("odom", "body", T0)
    with pytest.raises(InvalidFrameError, match="frame_ids cannot be empty"):
        buf.lookup_transform("", "base_link", T0)
    assert buf.frames() == ["base_link", "body", "odom", "vision"]


def test_static_transforms_are_kept_forever_and_dynamic_ones_for_the_cache_time():
    buf = TransformBuffer(cache_time_s=10.0)
    buf.set_transform("base_link", "camera", T0, tf(0.2), static=True)
    for i in range(31):                                    # 30 s of odometry at 1 Hz
        buf.set_transform("odom", "base_link", T0 + i, tf(float(i)))
    assert buf.edge_span("base_link") == (T0 + 20, T0 + 30)   # 10 s behind the newest
    assert buf.edge_span("camera") is None                   # static: no span, valid at any time
    assert buf.lookup_transform("base_link", "camera", T0 - 1e6).transform.translation[0] == 0.2
    assert buf.lookup_transform("base_link", "camera", T0 + 1e6).transform.translation[0] == 0.2
    assert math.isclose(buf.lookup_transform("odom", "camera", T0 + 25.5).transform.translation[0], 25.7)
    with pytest.raises(ExtrapolationError, match="into the past"):
        buf.lookup_transform("odom", "camera", T0 + 15)       # expired
    # data older than the cache behind the newest is ignored (tf2's TF_OLD_DATA), a repeated time too
    assert not buf.set_transform("odom", "base_link", T0 + 5, tf(99.0))
    assert not buf.set_transform("odom", "base_link", T0 + 30, tf(99.0))
    assert buf.set_transform("odom", "base_link", T0 + 29.5, tf(29.5))     # out of order within the cache: kept
    assert buf.lookup_transform("odom", "base_link", T0 + 29.5).transform.translation[0] == 29.5
    buf.clear()
    assert buf.frames() == []


def test_stamp_zero_is_the_latest_common_time():
    buf = TransformBuffer()
    buf.set_transform("base_link", "camera", T0, tf(0.0, 0.0, 1.0), static=True)
    for i in range(11):
        buf.set_transform("odom", "base_link", T0 + 0.1 * i, tf(float(i)))
    buf.set_transform("map", "odom", T0, tf(100.0))
    buf.set_transform("map", "odom", T0 + 0.5, tf(200.0))
    found = buf.lookup_transform("map", "camera", 0.0)
    assert found.stamp == T0 + 0.5                            # map -> odom is the slowest edge
    assert close(found.transform.translation, (205.0, 0.0, 1.0))
    assert buf.latest_common_time("map", "camera") == T0 + 0.5
    assert buf.lookup_transform("base_link", "camera", 0.0).stamp == 0.0   # static only


def test_rejected_input():
    buf = TransformBuffer()
    for bad in (tf(float("nan")), tf(q=(0.0, 0.0, 0.0, float("inf"))), tf(q=(0.0, 0.0, 0.0, 0.0))):
        with pytest.raises(ValueError):
            buf.set_transform("odom", "base_link", T0, bad)
    with pytest.raises(ValueError):
        buf.set_transform("odom", "odom", T0, tf())
    buf.set_transform("odom", "base_link", T0, tf(q=(0.0, 0.0, 0.0, 2.0)))   # normalised, as tf2 does
    assert buf.lookup_transform("odom", "base_link", T0).transform.rotation == (0.0, 0.0, 0.0, 1.0)
    buf.set_transform("map", "base_link", T0, tf())            # a new parent replaces the old one
    assert buf.reparented == [("base_link", "odom", "map")]
    assert buf.can_transform("map", "base_link", T0)


# -- the frame poser ----------------------------------------------------------------------------
def test_frames_wait_for_their_transform_in_order_then_go_on_without_a_pose():
    buf = TransformBuffer()
    poser = FramePoser(buf, "map", "base_link", wait_s=1.0)
    poser.add_transform("map", "odom", T0, tf(5.0), static=True)
    poser.add_transform("odom", "base_link", T0, tf(0.0))
    assert poser.add_frame(T0 + 0.05, "a", now=0.0) == []      # its second sample has not come yet
    assert poser.add_frame(T0 + 0.15, "b", now=0.1) == []
    poser.add_transform("odom", "base_link", T0 + 0.1, tf(1.0))
    done = poser.poll(now=0.2)
    assert [f.payload for f in done] == ["a"] and math.isclose(done[0].pose.x, 5.5)
    assert done[0].pose.frame_id == "map"
    assert poser.poll(now=1.05) == [] and len(poser) == 1        # "b" waits until 0.1 + 1.0
    late = poser.poll(now=1.11)
    assert [(f.payload, f.pose, f.non_finite) for f in late] == [("b", None, False)]
    assert "extrapolation into the future" in late[0].reason
    # older than all the data of an edge: it can never come, so no wait
    early = poser.add_frame(T0 - 1.0, "c", now=2.0)
    assert [(f.payload, f.pose) for f in early] == [("c", None)] and "into the past" in early[0].reason
    # a frame for a frame that never appears waits, then goes on; flush takes everything
    other = FramePoser(TransformBuffer(), "map", "base_link", wait_s=5.0)
    assert other.add_frame(T0, "d", now=0.0) == []
    assert [(f.payload, f.pose) for f in other.flush()] == [("d", None)]


def test_frames_near_a_non_finite_transform_are_marked_and_the_queue_is_bounded():
    buf = TransformBuffer()
    poser = FramePoser(buf, "odom", "base_link", wait_s=10.0, max_pending=3, non_finite_tolerance_s=0.25)
    with pytest.raises(ValueError):
        poser.add_transform("odom", "base_link", T0, tf(float("nan")))
    poser.add_transform("odom", "base_link", T0 + 0.5, tf(0.0))
    poser.add_transform("odom", "base_link", T0 + 0.6, tf(0.0))
    bad = poser.add_frame(T0 + 0.1, "nan", now=0.0)           # before the first valid sample, near the NaN one
    assert [(f.payload, f.pose, f.non_finite) for f in bad] == [("nan", None, True)]
    for i, name in enumerate("wxyz"):
        out = poser.add_frame(T0 + 1.0 + i, name, now=0.0)
    assert [f.payload for f in out] == ["w"] and len(poser) == 3   # the 4th waiting frame pushed the oldest out


# -- the node's adapter: tf2_ros.Buffer on a full install ---------------------------------------
def test_the_buffer_is_ours_without_tf2_ros_and_tf2_errors_map_to_ours():
    from embodied_memory.nodes.tf_buffer import _extrapolation, make_transform_buffer
    try:
        import tf2_ros  # noqa: F401
        expected = "tf2_ros"
    except ImportError:
        expected = "embodied_memory"
    buffer, kind = make_transform_buffer(10.0)
    assert kind == expected and hasattr(buffer, "lookup_transform") and hasattr(buffer, "set_transform")
    ours = TransformBuffer()
    ours.set_transform("odom", "base_link", T0, tf())
    ours.set_transform("odom", "base_link", T0 + 1, tf())
    for stamp, direction in ((T0 + 2, "future"), (T0 - 1, "past")):
        with pytest.raises(ExtrapolationError) as exc:
            ours.lookup_transform("odom", "base_link", stamp)
        mapped = _extrapolation(RuntimeError(str(exc.value)), stamp)   # tf2's text is the same
        assert (mapped.direction, mapped.requested, mapped.available) == (direction, stamp, exc.value.available)


def test_tf2_ros_buffer_gives_the_same_poses():
    pytest.importorskip("tf2_ros", reason="tf2_ros is on full ROS 2 installs only")
    from embodied_memory.nodes.tf_buffer import Tf2Buffer
    ours, theirs = TransformBuffer(), Tf2Buffer(10.0)
    for buf in (ours, theirs):
        buf.set_transform("base_footprint", "base_link", T0, tf(z=0.1), True)
        for i in range(5):
            buf.set_transform("map", "odom", T0 + i, tf(1.0, 0.0, yaw=0.3 + 0.01 * i), False)
            buf.set_transform("odom", "base_footprint", T0 + i, tf(0.5 * i, 0.2, yaw=0.1 * i), False)
    for stamp in (T0 + 0.5, T0 + 2.25, T0 + 4.0, 0.0):
        a, b = (planar_pose(buf.lookup_transform("map", "base_link", stamp)) for buf in (ours, theirs))
        assert close((a.x, a.y, a.z, a.yaw), (b.x, b.y, b.z, b.yaw), 1e-6)
    for bad in (("map", "base_link", T0 + 9), ("map", "base_link", T0 - 9)):
        with pytest.raises(ExtrapolationError):
            theirs.lookup_transform(*bad)
    with pytest.raises(FrameLookupError):
        theirs.lookup_transform("vision", "base_link", T0)
