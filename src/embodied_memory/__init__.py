"""embodied_memory: robot-side long-term memory (ROS-free core; ROS nodes in nodes/)."""
__version__ = "0.1.0"
