"""Launch a stack on a full ROS 2 install:

    ros2 launch embodied_memory embodied_memory.launch.py stack:=default

The node list and parameters come from the same stack YAML that ``embodied-memory launch``
reads (config/<stack>.yaml), validated by the same code, so the two cannot drift.

Supervision follows the same keys as far as launch_ros can express them: ``respawn``,
``respawn_delay_s`` (a fixed delay here: launch_ros has no backoff) and ``max_respawns`` (here
counted over the whole run, not within ``crash_window_s``); a required node that is not
restarted any more shuts the launch down.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from embodied_memory.stack import load_stack, resolve_stack_path


def _shutdown_when_given_up(spec):
    """on_exit runs after every exit of the process, respawned or not: shut the launch down
    once launch_ros stops restarting a required node (respawn off, or max_respawns used up)."""
    exits = [0]

    def on_exit(event, _context):
        exits[0] += 1
        if not spec.respawn or exits[0] > spec.max_respawns:
            return [Shutdown(reason=f"required node {spec.name} exited ({event.returncode}) "
                                    f"and is not restarted")]
        return None
    return on_exit


def _nodes(context):
    stack = load_stack(resolve_stack_path(LaunchConfiguration("stack").perform(context)))
    actions = []
    for spec in stack.nodes:
        actions.append(Node(
            package="embodied_memory", executable=spec.executable, name=spec.name,
            namespace=spec.namespace or None, parameters=[spec.parameters], output="screen",
            respawn=spec.respawn, respawn_delay=spec.respawn_delay_s,
            respawn_max_retries=spec.max_respawns if spec.respawn else -1,
            additional_env=stack.environment,
            on_exit=_shutdown_when_given_up(spec) if spec.required else None,
        ))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("stack", default_value="default",
                              description="stack name under config/ or a path to a stack YAML"),
        OpaqueFunction(function=_nodes),
    ])
