"""query_agent_node: serves /agent/ask (embodied_memory_interfaces/Ask) and /agent/ask_and_act
(embodied_memory_interfaces/AskAndAct).

The agent's tools reach the memory through the memory node's /memory/query service, so one
process owns the store (and its vector index) while any number of agents ask.

Questions are answered concurrently, ``max_concurrent_questions`` at a time, with at most
``max_queued_questions`` waiting for a slot; a question beyond that is answered at once with
status "error" and an error starting "busy:".  Every question is answered within the agent's
``question_timeout()`` from its arrival (queue wait included) plus a short grace: a question
still waiting for a slot then is answered "busy:", one still running "timeout:".  The Ask
callbacks run in a reentrant group and only wait (the agent runs in a pool of its own), and
the executor has a thread for every admitted question plus spare ones, so the memory
service's replies are always processed while questions wait.

The Ask service never moves the robot: a command ("go to where you saw Alice") is answered
with where the place is (status "ok", the waypoint and position) and a note in ``error``
("not driven: ...") naming the AskAndAct action.  Only AskAndAct goals (``ask_and_act_action``,
nodes/ask_and_act_server.py) get the navigate tool; they share the question pool and its
admission (a goal beyond the queue is aborted at once with a "busy:" answer, counted as
dropped.busy on /diagnostics), give feedback and can be cancelled (the bridge goal with them).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from embodied_memory_interfaces.srv import Ask
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from ..agent.answer import STATUS_ERROR, Answer
from ..agent.query_agent import AgentParams, QueryAgent
from ..agent.tools import QuestionHooks
from ..params import ANSWER_GRACE_S, MAX_ADMITTED_QUESTIONS, QueryAgentNodeParams
from .common import from_time_msg, node_options, node_params, robot_id_of, run_node, service_qos
from .conversions import answer_to_msg
from .health import NodeHealth
from .memory_client import RosMemoryClient

SPARE_THREADS = 8            # executor threads beyond the admitted questions: memory replies, busy answers


class QueryAgentNode(Node):
    def __init__(self, **kwargs):
        super().__init__("query_agent", **node_options(kwargs))
        self.params = node_params(self, QueryAgentNodeParams)
        agent_params = AgentParams(**{k: getattr(self.params, k) for k in AgentParams.__dataclass_fields__})
        if agent_params.robot_id == "auto":           # on a fleet: the robot this stack runs on
            agent_params = dataclasses.replace(agent_params, robot_id=robot_id_of(self.get_namespace()))
        memory = RosMemoryClient(self, self.params.memory_query_service, self.params.memory_timeout_s)
        self.navigator = None
        if self.params.navigation_action:
            from .navigation_client import NavigateClient
            self.navigator = NavigateClient(self, self.params.navigation_action, self.params.navigation_timeout_s)
        self.agent = QueryAgent(memory, agent_params)   # the navigate tool is per question: AskAndAct only
        # before the services exist: a first question must not wait (and a client retry find "busy")
        self._warm_up()
        self.on_params_changed = lambda p: setattr(self.agent, "params", p)   # planner, rules: next question
        act = self.params.ask_and_act_action
        act = self.resolve_topic_name(act) if act else act      # as it resolves here (in the node's namespace)
        self.ask_hooks = QuestionHooks(no_navigate=(
            f"the Ask service never moves the robot; send the question as a goal to the AskAndAct action "
            f"{act} (embodied-memory ask --act)" if act else
            "the Ask service never moves the robot (and the AskAndAct action is off: ask_and_act_action is '')"))
        self.budget_s = agent_params.question_timeout()
        self.capacity = self.params.max_concurrent_questions + self.params.max_queued_questions
        self._lock = threading.Lock()
        self._admitted = 0               # running + waiting for a slot
        self._pool = ThreadPoolExecutor(self.params.max_concurrent_questions, thread_name_prefix="question")
        self.health = NodeHealth(self)
        self.health.gauges["questions_admitted"] = lambda: self._admitted
        self.health.gauges["questions_capacity"] = lambda: self.capacity
        self.create_service(Ask, self.params.ask_service, self.health.guard_service(self._on_ask, "ask"),
                            qos_profile=service_qos(), callback_group=ReentrantCallbackGroup())
        self.act_server = None
        if act:
            from .ask_and_act_server import AskAndActServer
            self.act_server = AskAndActServer(self, act)
        mode = self.params.planner if self.params.planner != "auto" else ("llm" if self.agent.client else "rules")
        drives = f"driving through {self.params.navigation_action}" if self.navigator else "no navigation bridge"
        self.get_logger().info(
            f"answering on {self.params.ask_service}" + (f" and {act} ({drives})" if act else "") +
            f" with the {mode} planner "
            f"({self.params.max_concurrent_questions} at a time, {self.params.max_queued_questions} queued, "
            f"{self.budget_s:.0f} s per question)")

    def _warm_up(self) -> None:
        started = time.monotonic()
        try:
            self.agent.warm_up()
            self.get_logger().info(f"rules planner ready (intent bank, time parser) in {time.monotonic() - started:.1f} s")
        except Exception as exc:  # noqa: BLE001 - the first question then loads it (and reports why not)
            self.get_logger().error(f"rules planner warm-up failed: {type(exc).__name__}: {exc}")

    @property
    def admitted(self) -> int:
        with self._lock:
            return self._admitted

    def _release(self, _future=None) -> None:
        with self._lock:
            self._admitted -= 1

    def admit(self, planner: str, what: str = "a question"):
        """Take a place (slot or queue) for a question: None, or the "busy:" answer (counted)."""
        with self._lock:
            busy = self._admitted >= self.capacity
            if not busy:
                self._admitted += 1
        if not busy:
            return None
        self.health.drop("busy", f"{what} (all slots and queue places taken)")
        return Answer(status=STATUS_ERROR, planner=planner, error=(
            f"busy: {self.capacity} questions are being answered or waiting (max_concurrent_questions "
            f"{self.params.max_concurrent_questions} + max_queued_questions "
            f"{self.params.max_queued_questions}); ask again later"))

    def submit(self, planner: str, fn, *args):
        """Run an admitted question in the pool: (future, None), or (None, the "stopping:" answer);
        its place is given back when it ends."""
        try:
            future = self._pool.submit(fn, *args)
        except RuntimeError as exc:  # the pool is shut down: the node is stopping
            self._release()
            return None, Answer(status=STATUS_ERROR, planner=planner, error=f"stopping: {exc}")
        future.add_done_callback(self._release)
        return future, None

    def no_slot(self, planner: str) -> Answer:
        return Answer(status=STATUS_ERROR, planner=planner, error=(
            f"busy: no free slot within {self.budget_s:.0f} s (max_concurrent_questions "
            f"{self.params.max_concurrent_questions}); ask again later"))

    def _on_ask(self, request, response):
        received = time.monotonic()
        planner = request.planner or self.params.planner
        answer = self.admit(planner)
        if answer is None:
            deadline = received + self.budget_s
            future, answer = self.submit(planner, self._answer, request, deadline)
            if future is not None:
                answer = self._wait(future, deadline, planner)
        self.get_logger().info(f"Q: {request.question[:200]!r} -> [{answer.status}] {answer.text[:80]!r} "
                               f"{answer.error[:120]!r} ({answer.planner}, {answer.tool_calls} calls, "
                               f"{answer.latency_s:.2f} s)")
        self.health.count(f"answers_{answer.status}")
        response.answer = self.to_msg(answer)
        return response

    def _wait(self, future, deadline: float, planner: str) -> Answer:
        """The agent's answer, or by the deadline (plus half the grace, for a fallback to finish)
        an error: "busy:" if the question never got a slot, "timeout:" if it is still running."""
        wait_s = max(0.0, deadline + ANSWER_GRACE_S / 2 - time.monotonic())
        try:
            return future.result(timeout=wait_s)
        except (FutureTimeout, CancelledError):
            pass
        except Exception as exc:  # noqa: BLE001 - agent.ask never raises; belt and braces
            return Answer(status=STATUS_ERROR, planner=planner, error=f"{type(exc).__name__}: {exc}")
        if future.cancel():
            return self.no_slot(planner)
        return Answer(status=STATUS_ERROR, planner=planner, error=(
            f"timeout: no answer within {self.budget_s:.0f} s (question_timeout_s)"))

    def _answer(self, request, deadline: float) -> Answer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Answer(status=STATUS_ERROR, planner=request.planner or self.params.planner, error=(
                f"busy: no free slot within {self.budget_s:.0f} s; ask again later"))
        from .node_clock import NO_CLOCK_YET
        as_of = self.question_time(request.as_of)
        if as_of is None:   # only under use_sim_time before the first /clock: never the wall clock
            return Answer(status=STATUS_ERROR, planner=request.planner or self.params.planner, error=NO_CLOCK_YET)
        return self.agent.ask(request.question, as_of=as_of, planner=request.planner, timeout_s=remaining,
                              hooks=self.ask_hooks)

    def question_time(self, as_of_msg):
        """The time a question is asked at: its ``as_of``, else now (None: no clock yet)."""
        from .node_clock import now_s
        # "now" is the node's clock: with use_sim_time, the /clock of a replayed bag
        return from_time_msg(as_of_msg) or now_s(self) or None

    @staticmethod
    def to_msg(answer: Answer):
        try:
            return answer_to_msg(answer.sanitize())
        except Exception as exc:  # noqa: BLE001 - sanitize makes this unreachable; never fail the reply
            return answer_to_msg(Answer(status=STATUS_ERROR, planner=answer.planner[:100],
                                        error=f"the answer could not be sent: {type(exc).__name__}: {exc}"[:2000]))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def main() -> None:
    # every admitted question holds an executor thread while it waits (threads start on demand)
    run_node(QueryAgentNode, threads=MAX_ADMITTED_QUESTIONS + SPARE_THREADS)


if __name__ == "__main__":
    main()
