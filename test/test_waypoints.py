"""Waypoint table and simulated base (ROS-free)."""
import pytest

from embodied_memory.config import ConfigError
from embodied_memory.nav.sim_base import SimBase, SimBaseParams
from embodied_memory.nav.waypoints import WaypointTable
from embodied_memory.types import Pose


def test_table_from_yaml_names_nearest_and_learning(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("waypoints:\n  wp_1: {x: 1.0, y: 2.0, names: [Kitchen, coffee corner]}\n  wp_2: {x: 10, y: 0}\n")
    table = WaypointTable.from_yaml(path)
    assert table.ids() == ["wp_1", "wp_2"]
    assert table.resolve("kitchen").waypoint_id == "wp_1" and table.resolve("coffee corner").waypoint_id == "wp_1"
    assert table.resolve("attic") is None
    assert table.label_for(1.5, 2.5, 3.0) == "wp_1" and table.label_for(5.5, 9.0, 3.0) == ""
    table.learn("wp_3", Pose(-4.0, -4.0))
    assert table.nearest(-3.0, -3.0).waypoint_id == "wp_3"
    path.write_text("waypoints:\n  wp_1: {x: 1.0, why: 2}\n")
    with pytest.raises(ConfigError, match="wp_1"):
        WaypointTable.from_yaml(path)


def test_sim_base_drives_at_its_speed_and_knows_its_map():
    base = SimBase(SimBaseParams(speed=2.0, x_max=20.0))
    remaining = base.step(Pose(10.0, 0.0), 1.0)
    assert remaining == pytest.approx(8.0) and base.pose.x == pytest.approx(2.0)
    while remaining > 0:
        remaining = base.step(Pose(10.0, 0.0, yaw=1.0), 1.0)
    assert base.pose.x == pytest.approx(10.0) and base.pose.yaw == 1.0
    assert not base.reachable(Pose(30.0, 0.0)) and not base.reachable(Pose(float("nan"), 0.0))
