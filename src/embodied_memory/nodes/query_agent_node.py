"""query_agent_node: serves /agent/ask (embodied_memory_interfaces/Ask).

The agent's tools reach the memory through the memory node's /memory/query service, so one
process owns the store (and its vector index) while any number of agents ask.
"""
from __future__ import annotations

from embodied_memory_interfaces.srv import Ask
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from ..agent.query_agent import AgentParams, QueryAgent
from ..params import QueryAgentNodeParams
from .common import from_time_msg, node_params, run_node
from .conversions import answer_to_msg
from .memory_client import RosMemoryClient


class QueryAgentNode(Node):
    def __init__(self, **kwargs):
        super().__init__("query_agent", **kwargs)
        self.params = node_params(self, QueryAgentNodeParams)
        agent_params = AgentParams(**{k: getattr(self.params, k) for k in AgentParams.__dataclass_fields__})
        memory = RosMemoryClient(self, self.params.memory_query_service, self.params.memory_timeout_s)
        navigate = None
        if self.params.navigation_action:
            from .navigation_client import NavigateClient
            navigate = NavigateClient(self, self.params.navigation_action)
        self.agent = QueryAgent(memory, agent_params, navigate=navigate)
        self.create_service(Ask, self.params.ask_service, self._on_ask,
                            callback_group=MutuallyExclusiveCallbackGroup())
        mode = self.params.planner if self.params.planner != "auto" else ("llm" if self.agent.client else "rules")
        self.get_logger().info(f"answering on {self.params.ask_service} with the {mode} planner")

    def _on_ask(self, request, response):
        as_of = from_time_msg(request.as_of) or None
        answer = self.agent.ask(request.question, as_of=as_of, planner=request.planner)
        self.get_logger().info(f"Q: {request.question!r} -> [{answer.status}] {answer.text[:80]!r} "
                               f"({answer.planner}, {answer.tool_calls} calls, {answer.latency_s:.2f} s)")
        response.answer = answer_to_msg(answer)
        return response


def main() -> None:
    run_node(QueryAgentNode, threads=4)


if __name__ == "__main__":
    main()
