"""At-least-once delivery (nodes/delivery.py) over real DDS: records are kept until acknowledged,
sent again with backoff while nobody accepts them, only after the longest wait once accepted,
and all of them again to a receiver that restarts."""
import time

import pytest
from embodied_memory_interfaces.msg import Ack
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from embodied_memory.nodes.delivery import MAX_BACKOFF_STEPS, AckPublisher, AcknowledgedPublisher, _Pending
from embodied_memory.nodes.health import NodeHealth

pytestmark = pytest.mark.integration
QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


def test_timed_resends_back_off_and_stop_once_accepted():
    entry = _Pending("msg", now=0.0)
    due_times, t = [], 0.0
    while len(due_times) < 6 and t < 1000:
        t += 0.5
        if entry.due(t, resend_after_s=2.0):
            due_times.append(t)
            entry.attempts, entry.sent = entry.attempts + 1, t
    gaps = [b - a for a, b in zip([0.0] + due_times, due_times)]
    assert gaps[:4] == [2.0, 4.0, 8.0, 16.0] and max(gaps) == 2.0 * 2 ** MAX_BACKOFF_STEPS
    entry.accepted, entry.attempts, entry.sent = True, 0, 100.0   # accepted: only the longest wait
    longest = 2.0 * 2 ** MAX_BACKOFF_STEPS
    assert not entry.due(100.0 + longest - 0.5, resend_after_s=2.0) and entry.due(100.0 + longest, resend_after_s=2.0)


def _spin(executor, seconds, until=lambda: False):
    end = time.monotonic() + seconds
    while time.monotonic() < end and not until():
        executor.spin_once(timeout_sec=0.02)


def test_kept_until_acknowledged_and_resent_to_a_restarted_receiver(ros_context):
    sender = Node("delivery_sender", context=ros_context)
    receiver = Node("delivery_receiver", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(sender)
    executor.add_node(receiver)
    try:
        health = NodeHealth(sender)
        pub = AcknowledgedPublisher(sender, String, "/delivery_test/records", QOS, acks_topic="/delivery_test/acks",
                                    health=health, id_of=lambda m: m.data, what="record", resend_after_s=1.0)
        acks = AckPublisher(receiver, "/delivery_test/acks")
        got: list[str] = []

        def receive(msg):
            got.append(msg.data)
            if msg.data == "a":
                acks.send("a", Ack.STORED)          # final: forgotten by the sender
            elif msg.data == "b":
                acks.send("b", Ack.ACCEPTED)        # held by the receiver: no timed resend
            # "c": no answer at all -> sent again after 1 s, 2 s, ...
        sub = receiver.create_subscription(String, "/delivery_test/records", receive, QOS)
        _spin(executor, 10, lambda: pub.get_subscription_count() > 0 and receiver.count_publishers("/delivery_test/records") > 0)
        _spin(executor, 1.0)
        for key in ("a", "b", "c"):
            pub.publish(String(data=key))
        _spin(executor, 4.0)
        assert got.count("a") == 1 and got.count("b") == 1
        assert 2 <= got.count("c") <= 3                    # t=0, ~1 s, ~3 s (backoff)
        assert pub.unacknowledged == 2                     # b (accepted) and c are still kept
        assert health.counts["records_resent"] >= 1

        # the receiver restarts: everything not final is sent again, accepted records included
        receiver.destroy_subscription(sub)
        _spin(executor, 1.0)
        got.clear()
        sub = receiver.create_subscription(String, "/delivery_test/records", receive, QOS)
        _spin(executor, 5.0, lambda: "b" in got and "c" in got)
        assert "b" in got and "c" in got and "a" not in got

        # replaced between two looks at the subscriber count (a respawned receiver matched while
        # the dead one's lease runs): the count stays 1, the matched event still sends "b" again
        pub.publish(String(data="d"))
        acks.send("d", Ack.ACCEPTED)
        _spin(executor, 1.0, lambda: pub._unacked["d"].accepted)
        receiver.create_subscription(String, "/delivery_test/records", receive, QOS)
        end = time.monotonic() + 5
        while pub.get_subscription_count() < 2 and time.monotonic() < end:
            time.sleep(0.01)                         # no spinning: the resend timer does not run
        receiver.destroy_subscription(sub)
        while pub.get_subscription_count() != 1 and time.monotonic() < end:
            time.sleep(0.01)
        got.clear()
        _spin(executor, 3.0, lambda: "b" in got and "d" in got)
        assert "b" in got and "d" in got
    finally:
        executor.shutdown()
        sender.destroy_node()
        receiver.destroy_node()
