"""Launch a stack on a full ROS 2 install:

    ros2 launch embodied_memory embodied_memory.launch.py stack:=default

The node list and parameters come from the same stack YAML that ``embodied-memory launch``
reads (config/<stack>.yaml), validated by the same code, so the two cannot drift.

Supervision follows the same keys as far as launch_ros can express them: ``respawn``,
``respawn_delay_s`` (a fixed delay here: launch_ros has no backoff) and ``max_respawns`` (here
counted over the whole run, not within ``crash_window_s``); a required node that is not
restarted any more shuts the launch down.

The managed nodes (memory, perception: ``stack.LIFECYCLE_EXECUTABLES``) are
``launch_ros.actions.LifecycleNode`` actions with ``autostart`` from the stack (default true:
configure, then activate; launch_ros >= 0.26.7, i.e. Jazzy and later). launch_ros does that
once, when it starts the process, so a respawned process would stay unconfigured: every later
start of one is configured and activated again here. A required node whose configure fails
(its log says why) shuts the launch down, as ``embodied-memory launch`` stops the stack. The
order of activation does not matter for the data: perception keeps every observation until the
memory acknowledges it and sends them all again when the memory's subscription appears.
With ``autostart: false`` the node stays unconfigured for the robot's lifecycle manager.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessStart
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition

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


def _change(action, transition_id):
    return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(action), transition_id=transition_id))


def _lifecycle_handlers(spec, action):
    """Configure + activate a respawned process again (the first start is autostart's), and
    shut the launch down when a required node cannot be configured."""
    handlers = []
    if spec.autostart and spec.respawn:
        starts, redriving = [0], [False]

        def on_start(_event, _context):
            starts[0] += 1
            if starts[0] == 1:
                return None
            redriving[0] = True
            return [_change(action, Transition.TRANSITION_CONFIGURE)]

        def on_configured(_context):
            if not redriving[0]:
                return None
            redriving[0] = False
            return [_change(action, Transition.TRANSITION_ACTIVATE)]
        handlers += [RegisterEventHandler(event_handler=OnProcessStart(target_action=action, on_start=on_start)),
                     RegisterEventHandler(event_handler=OnStateTransition(
                         target_lifecycle_node=action, start_state="configuring", goal_state="inactive",
                         entities=[OpaqueFunction(function=on_configured)]))]
    if spec.required and spec.autostart:   # (a lifecycle manager handles its own failures)
        handlers.append(RegisterEventHandler(event_handler=OnStateTransition(
            target_lifecycle_node=action, start_state="configuring", goal_state="unconfigured",
            entities=[Shutdown(reason=f"required node {spec.name} failed to configure (a configuration error: "
                                      "its log says why)")])))
    return handlers


def _nodes(context):
    stack = load_stack(resolve_stack_path(LaunchConfiguration("stack").perform(context)))
    actions = []
    for spec in stack.nodes:
        common = dict(
            package="embodied_memory", executable=spec.executable, name=spec.name,
            parameters=[spec.parameters], remappings=list(spec.remappings), output="screen",
            respawn=spec.respawn, respawn_delay=spec.respawn_delay_s,
            respawn_max_retries=spec.max_respawns if spec.respawn else -1,
            additional_env=stack.environment,
            on_exit=_shutdown_when_given_up(spec) if spec.required else None,
        )
        if spec.lifecycle:   # namespace is a required argument of LifecycleNode ("" = none)
            node = LifecycleNode(namespace=spec.namespace, autostart=spec.autostart, **common)
            actions += [*_lifecycle_handlers(spec, node), node]   # handlers first: they see its first start
        else:
            actions.append(Node(namespace=spec.namespace or None, **common))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("stack", default_value="default",
                              description="stack name under config/ or a path to a stack YAML"),
        OpaqueFunction(function=_nodes),
    ])
