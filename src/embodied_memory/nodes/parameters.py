"""A node's parameters: its params dataclass declared as ROS parameters, with descriptors.

Every node is built with :func:`node_options` (parameter overrides from ``--params-file``,
``-p`` or ``parameter_overrides=`` are declared when the node is built) and calls
:func:`node_params` once, which

- rejects an override that is no field of the dataclass (rclpy's own parameters aside) with the
  same :class:`~embodied_memory.config.ConfigError` the launcher gives for a stack file,
- validates them all with :func:`~embodied_memory.config.parse_params` (an integer is a valid
  float, ``validate()`` runs),
- declares every field with a ``ParameterDescriptor``: its type, a description made from the
  field's comment in the dataclass, and ``read_only`` unless the field is in the dataclass's
  ``DYNAMIC`` set.

``ros2 param set`` (``/<node>/set_parameters``) then either takes effect or is refused with
the reason: a read-only parameter needs a restart; a dynamic one is validated with the whole
dataclass (``validate()``'s message is the reason), then ``node.params`` is replaced and the
node's ``on_params_changed(params)`` is called if it has one (for values the node copied).
Nodes read dynamic values from ``self.params`` where they use them. ``use_sim_time`` stays
settable; rclpy handles it.
"""
from __future__ import annotations

import array
import dataclasses
import typing
from typing import Any, TypeVar

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from ..config import ConfigError, dynamic_fields, field_descriptions, parse_params, replace_params

T = TypeVar("T")

# declared by rclpy itself (time source, type description service, QoS overrides): never ours
RCLPY_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
RCLPY_PREFIXES = ("qos_overrides.",)

_SCALARS = {bool: Parameter.Type.BOOL, int: Parameter.Type.INTEGER, float: Parameter.Type.DOUBLE,
            str: Parameter.Type.STRING}
_ARRAYS = {bool: Parameter.Type.BOOL_ARRAY, int: Parameter.Type.INTEGER_ARRAY, float: Parameter.Type.DOUBLE_ARRAY,
           str: Parameter.Type.STRING_ARRAY}


def node_options(kwargs: dict | None = None) -> dict:
    """The ``Node.__init__`` keyword arguments of every node of this package, given the caller's
    (``super().__init__("name", **node_options(kwargs))``): parameter overrides are declared as
    the node is built, so :func:`node_params` sees each one through rclpy's public API."""
    return {**(kwargs or {}), "automatically_declare_parameters_from_overrides": True}


def is_rclpy_parameter(name: str) -> bool:
    return name in RCLPY_PARAMETERS or name.startswith(RCLPY_PREFIXES)


def parameter_type(annotation: Any) -> Parameter.Type | None:
    """The ROS parameter type of a params field (None: not one of the flat types)."""
    if typing.get_origin(annotation) in (list, tuple):
        (item, *_rest) = typing.get_args(annotation) or (None,)
        return _ARRAYS.get(item)
    return _SCALARS.get(annotation)


def from_ros(value: Any) -> Any:
    """A parameter value as the params dataclass takes it (arrays arrive as array.array)."""
    return list(value) if isinstance(value, (array.array, tuple)) else value


def node_params(node: Node, cls: type[T]) -> T:
    """Validate the node's parameter overrides against ``cls`` (unknown keys are errors), declare
    every field with its descriptor, serve ``ros2 param set``; the typed params."""
    return ParameterBinding(node, cls).params


class ParameterBinding:
    """The params dataclass of one node, bound to its ROS parameters."""

    def __init__(self, node: Node, cls: type):
        self.node, self.cls = node, cls
        self.source = f"node {node.get_fully_qualified_name()} parameters"
        self.fields = [f.name for f in dataclasses.fields(cls)]
        hints = typing.get_type_hints(cls)
        self.hints = {name: hints[name] for name in self.fields}     # the fields only (no ClassVar)
        self.dynamic = dynamic_fields(cls)
        self.params = parse_params(cls, self._overrides(), self.source)
        self._declare()
        # rclpy refuses a read-only parameter ("Trying to set a read-only parameter") or a wrong
        # type itself; a dynamic one is validated with the whole dataclass here, then applied
        node.add_on_set_parameters_callback(self._validate)
        node.add_post_set_parameters_callback(self._apply)

    def _overrides(self) -> dict[str, Any]:
        """Every override, declared by rclpy as the node was built (node_options)."""
        names = [n for n in self.node.list_parameters([], 0).names if not is_rclpy_parameter(n)]
        return {n: from_ros(self.node.get_parameter(n).value) for n in names}

    def _declare(self) -> None:
        descriptions = field_descriptions(self.cls)
        for name in self.fields:
            kind = parameter_type(self.hints[name])
            value = getattr(self.params, name)
            read_only = name not in self.dynamic
            descriptor = ParameterDescriptor(
                name=name, description=descriptions[name] + (
                    " (read-only: a change needs a restart)" if read_only else " (dynamic: ros2 param set applies it)"),
                read_only=read_only, type=kind.value if kind else 0, dynamic_typing=kind is None)
            if not self.node.has_parameter(name):
                declared = self.node.declare_parameter(name, value, ParameterDescriptor(dynamic_typing=True))
                if from_ros(declared.value) != value:   # an override nobody declared: never silently ignored
                    raise RuntimeError(f"{type(self.node).__name__} must be built with node_options(kwargs) "
                                       f"(parameter {name} was not validated)")
            # the validated value (3 -> 3.0 for a float) where the override's type differs
            typed = Parameter(name, kind, value) if kind else Parameter(name, value=value)
            self.node.set_descriptor(name, descriptor, typed.get_parameter_value())

    # -- ros2 param set -------------------------------------------------------------------------
    def _validate(self, parameters: list[Parameter]) -> SetParametersResult:
        """Refused when the params dataclass rejects the new values (``validate()``'s reason)."""
        changes = self._changes(parameters)
        if changes:
            try:
                replace_params(self.params, changes, self.source)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _changes(self, parameters: list[Parameter]) -> dict[str, Any]:
        return {p.name: from_ros(p.value) for p in parameters if p.name in self.hints}

    def _apply(self, parameters: list[Parameter]) -> None:
        changes = self._changes(parameters)
        if not changes:
            return
        self.params = replace_params(self.params, changes, self.source)
        self.node.params = self.params
        hook = getattr(self.node, "on_params_changed", None)
        if hook is not None:
            try:
                hook(self.params)
            except Exception as exc:  # noqa: BLE001 - the value is set; say what did not follow it
                self.node.get_logger().error(f"on_params_changed raised: {type(exc).__name__}: {exc}")
        self.node.get_logger().info("parameters set: " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))
