"""Launch a stack on a full ROS 2 install:

    ros2 launch embodied_memory embodied_memory.launch.py stack:=default

The node list and parameters come from the same stack YAML that ``embodied-memory launch``
reads (config/<stack>.yaml), validated by the same code, so the two cannot drift.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from embodied_memory.stack import load_stack, resolve_stack_path


def _nodes(context):
    stack = load_stack(resolve_stack_path(LaunchConfiguration("stack").perform(context)))
    actions = []
    for spec in stack.nodes:
        actions.append(Node(
            package="embodied_memory", executable=spec.executable, name=spec.name,
            namespace=spec.namespace or None, parameters=[spec.parameters], output="screen",
            respawn=spec.respawn, respawn_delay=spec.respawn_delay_s,
            additional_env=stack.environment,
            on_exit=Shutdown(reason=f"required node {spec.name} exited") if spec.required and not spec.respawn else None,
        ))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("stack", default_value="default",
                              description="stack name under config/ or a path to a stack YAML"),
        OpaqueFunction(function=_nodes),
    ])
