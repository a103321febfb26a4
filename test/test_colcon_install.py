"""A colcon workspace install of this repository, as on a robot with a full ROS 2 install.

colcon (colcon-common-extensions from PyPI) builds embodied_memory_interfaces and
embodied_memory into a temporary build/install base, with the venv's Kilted wheels as the
underlay (what /opt/ros/<distro> is on a robot). Checked: every node executable is where
``ros2 run`` / ``ros2 launch`` look (``lib/embodied_memory/``), the launch file, configs and
package.xml are in ``share/embodied_memory/``, the package is in the ament index, and a node
started from the installed tree (its setup file sourced, not the source checkout nor the venv's
editable install) answers its service over DDS.

Slow: the interface package's rosidl build takes one to two minutes; it runs in CI all the same.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rosutil import VENV_BIN, call

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[1]
VENV = VENV_BIN.parent
PACKAGES = ("embodied_memory_interfaces", "embodied_memory")
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
BUILD_TIMEOUT_S = 1200


def _nodes() -> list[str]:
    """The NODES table of setup.py (node name -> entry point), read without running setup()."""
    text = (REPO / "setup.py").read_text()
    table = re.search(r"^NODES = \{(.*?)^\}", text, re.S | re.M)
    assert table, "setup.py has no NODES table"
    names = re.findall(r'^\s*"(\w+)":', table.group(1), re.M)
    assert names, "setup.py NODES is empty"
    return names


def _underlay_env(**extra: str) -> dict[str, str]:
    """The environment of a shell that sourced the underlay (the venv's ROS wheels) only."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "COLCON_PREFIX_PATH")}
    env.update(PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", AMENT_PREFIX_PATH=str(VENV),
               CMAKE_PREFIX_PATH=str(VENV), PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _repo_outputs() -> set[str]:
    """Top-level colcon outputs in the repo (build/ holds scripts/setup.sh's cmake trees)."""
    found = {name for name in ("install", "log") if (REPO / name).exists()}
    build = REPO / "build"
    return found | ({f"build/{p.name}" for p in build.iterdir()} if build.is_dir() else set())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    colcon = VENV_BIN / "colcon"
    assert colcon.is_file(), f"{colcon} missing: run scripts/setup.sh (requirements-test.txt has colcon)"
    base = tmp_path_factory.mktemp("colcon_ws")
    before = _repo_outputs()
    cmd = [str(colcon), "build",
           # the repo root is the ament_python package; colcon does not look for packages below
           # a package, so the interface package is a base path of its own (msg/'s tf2_msgs and
           # nav2_msgs stand-ins carry COLCON_IGNORE; spot_msgs comes from the underlay here)
           "--base-paths", str(REPO), str(REPO / "msg" / "embodied_memory_interfaces"),
           "--packages-select", *PACKAGES,
           "--build-base", str(base / "build"), "--install-base", str(base / "install"),
           "--event-handlers", "console_direct-", "console_cohesion-", "console_start_end-",
           "--cmake-args", f"-DPython3_EXECUTABLE={VENV_BIN / 'python'}", "-DBUILD_TESTING=OFF"]
    env = _underlay_env(COLCON_LOG_PATH=str(base / "log"), COLCON_HOME=str(base / "colcon_home"))
    t0 = time.monotonic()
    result = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    print(f"\ncolcon build of {', '.join(PACKAGES)}: {elapsed:.1f} s wall")
    assert result.returncode == 0, f"colcon build failed\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert _repo_outputs() == before, "colcon wrote build/, install/ or log/ into the repo"
    return base / "install"


def test_install_layout(workspace):
    pkg = workspace / "embodied_memory"
    lib = pkg / "lib" / "embodied_memory"
    missing = [n for n in [*_nodes(), "embodied-memory"] if not os.access(lib / n, os.X_OK)]
    assert not missing, f"not executable in {lib}: {missing}"
    assert not (pkg / "bin").exists(), "console scripts went to bin/, where ros2 run does not look"
    share = pkg / "share" / "embodied_memory"
    assert (share / "package.xml").read_text() == (REPO / "package.xml").read_text()
    assert (share / "launch" / "embodied_memory.launch.py").is_file()
    configs = sorted(p.name for p in (REPO / "config").glob("*.yaml"))
    assert configs and sorted(p.name for p in (share / "config").glob("*.yaml")) == configs
    assert (pkg / "share/ament_index/resource_index/packages/embodied_memory").is_file()
    assert (pkg / SITE / "embodied_memory/store/schema.sql").is_file(), "schema.sql not installed"
    interfaces = workspace / "embodied_memory_interfaces"
    assert (interfaces / "share/ament_index/resource_index/rosidl_interfaces/embodied_memory_interfaces").is_file()
    assert list((interfaces / "lib").glob("libembodied_memory_interfaces__rosidl_typesupport_c.so"))


def _sourced(workspace: Path, *cmd: str) -> list[str]:
    """``cmd`` run in a shell that sourced the install's local_setup.bash over the underlay."""
    return ["bash", "-c", 'source "$0/local_setup.bash" && exec "$@"', str(workspace), *cmd]


def test_installed_node_answers_its_service(workspace, ros_context, tmp_path):
    from embodied_memory_interfaces.srv import GetMemoryStats
    from rclpy.node import Node

    env = _underlay_env(PYTHONUNBUFFERED="1", ROS_LOG_DIR=str(tmp_path / "ros_log"))
    # what the installed tree imports: the install base, not src/ nor the venv's copies
    probe = ("import embodied_memory, embodied_memory_interfaces\n"
             "from embodied_memory import launcher, stack\n"
             "print(embodied_memory.__file__); print(embodied_memory_interfaces.__file__)\n"
             "print(launcher._package_lib_dir())\n"
             "print(stack.config_dir())\n")
    out = subprocess.run(_sourced(workspace, str(VENV_BIN / "python"), "-c", probe), env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    em_file, ifc_file, lib_dir, config = out.stdout.split()
    assert Path(em_file).is_relative_to(workspace / "embodied_memory" / SITE), em_file
    assert Path(ifc_file).is_relative_to(workspace / "embodied_memory_interfaces" / SITE), ifc_file
    assert Path(lib_dir) == workspace / "embodied_memory/lib/embodied_memory"   # launcher looks there
    assert Path(config) == workspace / "embodied_memory/share/embodied_memory/config"

    exe = workspace / "embodied_memory/lib/embodied_memory/memory_node"
    log_path = tmp_path / "memory_node.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(_sourced(workspace, str(exe), "--ros-args",
                                         "-p", f"data_dir:={tmp_path / 'store'}", "-p", "text_embedder:=hash",
                                         "-p", "autostart:=true"),   # a managed node: configure + activate
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    node = Node("colcon_install_probe", context=ros_context)
    try:
        try:
            stats = call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request(), timeout=120).stats
        except AssertionError as exc:
            raise AssertionError(f"{exc}; memory_node exit {proc.poll()}, log:\n{log_path.read_text()}") from None
        assert stats.observations == 0, log_path.read_text()
        assert proc.poll() is None, log_path.read_text()
        # the running node loaded the interface libraries of the install base, not the venv's
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        loaded = set(re.findall(r"(/\S*libembodied_memory_interfaces__\S+\.so)", maps))
        assert loaded, "memory_node did not load the interface libraries"
        assert all(Path(p).is_relative_to(workspace) for p in loaded), loaded
        assert (tmp_path / "store").is_dir(), "the store is not in the data_dir given with --ros-args"
    finally:
        node.destroy_node()
        proc.terminate()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(timeout=10)
    assert code in (0, -15), f"memory_node exit {code}\n{log_path.read_text()}"
