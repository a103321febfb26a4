"""observation_importer: publishes observations from a JSON-lines export to the memory node
(another robot's memory, an older store), then exits."""
from __future__ import annotations

import json
import time

import rclpy.duration
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ..config import ConfigError
from ..params import ObservationImporterParams
from ..records_io import observation_from_dict
from .common import node_options, node_params, run_node
from .conversions import observation_to_msg
from .node_clock import steady_clock


class ObservationImporter(Node):
    def __init__(self, **kwargs):
        super().__init__("observation_importer", **node_options(kwargs))
        self.params = node_params(self, ObservationImporterParams)
        self.records = self._read(self.params.input_path)
        self._pub = self.create_publisher(ObservationMsg, self.params.observations_topic,
                                          QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE))
        self._next = 0
        self.exit_code = None
        self._waited_since = time.monotonic()
        self._timer = self.create_timer(1.0 / self.params.rate_hz, self._tick, clock=steady_clock())   # wall rate, sim time or not

    @staticmethod
    def _read(path: str) -> list:
        records = []
        try:
            with open(path, encoding="utf-8") as handle:
                for lineno, line in enumerate(handle, 1):
                    if line.strip():
                        try:
                            records.append(observation_from_dict(json.loads(line)))
                        except ValueError as exc:
                            raise ConfigError(f"{path}:{lineno}: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"input_path: cannot read {path}: {exc}") from exc
        return records

    def _tick(self) -> None:
        if self._pub.get_subscription_count() == 0:
            if time.monotonic() - self._waited_since > self.params.wait_for_subscriber_s:
                self.get_logger().error(f"no subscriber on {self.params.observations_topic} after "
                                        f"{self.params.wait_for_subscriber_s:.0f} s")
                self.exit_code = 1
            return
        if self._next < len(self.records):
            self._pub.publish(observation_to_msg(self.records[self._next]))
            self._next += 1
            return
        if not self._pub.wait_for_all_acked(timeout=rclpy.duration.Duration(seconds=10.0)):
            self.get_logger().warning("not every observation was acknowledged by the subscribers")
        self.get_logger().info(f"published {len(self.records)} observations")
        self._timer.cancel()
        self.exit_code = 0


def main() -> None:
    run_node(ObservationImporter, threads=1)


if __name__ == "__main__":
    main()
