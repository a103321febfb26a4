"""embodied_memory: ament_python package (src layout). Dependencies: requirements.txt."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "embodied_memory"

# Every node is a console script (ros2 run embodied_memory <name> on a full ROS install).
NODES = {
    "memory_node": "embodied_memory.nodes.memory_node:main",
    "observation_importer": "embodied_memory.nodes.observation_importer:main",
    "query_agent_node": "embodied_memory.nodes.query_agent_node:main",
    "frame_selector_node": "embodied_memory.nodes.frame_selector_node:main",
    "perception_node": "embodied_memory.nodes.perception_node:main",
    "nav_bridge_node": "embodied_memory.nodes.nav_bridge_node:main",
    "explore_node": "embodied_memory.nodes.explore_node:main",
    "sim_camera_node": "embodied_memory.nodes.sim_camera_node:main",
}

setup(
    name=PACKAGE,
    version="0.1.0",
    package_dir={"": "src"},
    packages=find_packages("src"),
    package_data={"embodied_memory.store": ["schema.sql"], "embodied_memory.sim": ["phrasings/*.yaml"],
                  "embodied_memory.agent": ["intents.yaml"],
                  "embodied_memory.inspector": ["templates/*.html", "static/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
    ],
    python_requires=">=3.10",
    install_requires=["PyYAML", "numpy"],
    extras_require={
        # GPU robot: heavy models loaded from configured weight paths. Never in the default.
        "gpu": ["open_clip_torch", "segment-anything", "ultralytics", "insightface", "onnxruntime-gpu"],
    },
    zip_safe=False,   # schema.sql, phrasings, config and launch files are read from the file system
    maintainer="embodied_memory maintainers",
    description="Robot-side long-term memory for mobile robots (ROS 2).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [f"{name} = {target}" for name, target in NODES.items()]
        + ["embodied-memory = embodied_memory.cli:main"],
    },
)
