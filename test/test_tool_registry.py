"""One tool registry (store/tool_registry.py): a query tool is declared once, on the store method
that implements it, and its name, typed and ranged arguments, description and result shape reach
the memory service's validation, the agent's tool specs, the ROS client and the rules planner."""
from typing import Optional

import pytest

from embodied_memory.agent import tool_views
from embodied_memory.store.errors import InvalidArgumentError
from embodied_memory.store.memory_store import MemoryStore
from embodied_memory.store.tool_args import validate_arguments
from embodied_memory.store.tool_registry import ARGUMENT_DOCS, query_tool

from store_fixtures import T0, filled_store


def test_every_tool_is_declared_with_described_arguments_and_a_result():
    assert MemoryStore.QUERY_TOOLS == tuple(MemoryStore.TOOLS) and len(MemoryStore.TOOLS) >= 19
    for name, tool in MemoryStore.TOOLS.items():
        assert tool.description and tool.result, name
        schema = MemoryStore.tool_schema(name)
        assert all(p["description"] for p in schema["properties"].values()), name
    before = MemoryStore.tool_schema("semantic_observations")["properties"]["before"]
    assert before["description"] == ARGUMENT_DOCS["before"] + " (UNIX seconds)"


def test_adding_a_tool_is_one_decorated_method(tmp_path):
    from embodied_memory.store.tool_args import Limit

    class WithOneMore(MemoryStore):
        @query_tool("Observations whose description has a word.", result="ids", word="the word",
                    limits={"word": Limit(max_length=64)})
        def observations_with_word(self, word: str, before: Optional[float] = None) -> list[str]:
            rows = self._conn().execute("SELECT observation_id FROM observations WHERE description LIKE ? "
                                        "AND t <= ?", (f"%{word}%", before if before is not None else 1e18))
            return [r[0] for r in rows]

    assert set(WithOneMore.TOOLS) == set(MemoryStore.TOOLS) | {"observations_with_word"}
    assert "observations_with_word" not in MemoryStore.TOOLS          # the base class is unchanged
    schema = WithOneMore.tool_schema("observations_with_word")
    assert schema["required"] == ["word"] and schema["properties"]["word"]["maxLength"] == 64
    assert schema["properties"]["before"]["maximum"] == 1e11       # its range from the shared limits
    filled = filled_store(tmp_path, "sqlite_faiss")
    filled.close()
    store = WithOneMore(filled.params)
    try:
        assert store.call_tool("observations_with_word", {"word": "bicycle"}) == ["o1"]
        with pytest.raises(InvalidArgumentError, match="observations_with_word: word has 65 characters"):
            store.call_tool("observations_with_word", {"word": "x" * 65})
        with pytest.raises(InvalidArgumentError, match="observations_with_word: before"):
            validate_arguments(WithOneMore.tool_table(), "observations_with_word", {"word": "a", "before": "noon"})
    finally:
        store.close()


def test_a_tool_without_a_description_of_an_argument_is_refused():
    from embodied_memory.store.tool_args import Limit
    with pytest.raises(TypeError, match="mystery.colour: no description"):
        class Undocumented(MemoryStore):
            @query_tool("Something.", result="something", limits={"colour": Limit(max_length=20)})
            def mystery(self, colour: str) -> str:
                return colour


def test_a_tool_argument_without_limits_or_type_is_refused():
    with pytest.raises(TypeError, match="unlimited.colour: no limits"):
        class Unlimited(MemoryStore):
            @query_tool("Something.", result="something", colour="a colour")
            def unlimited(self, colour: str) -> str:
                return colour
    with pytest.raises(TypeError, match="untyped.query: no type annotation"):
        class Untyped(MemoryStore):
            @query_tool("Something.", result="something")
            def untyped(self, query) -> str:
                return query


def test_the_agent_tools_are_views_of_the_memory_tools():
    specs = tool_views.SPECS
    semantic = specs["semantic_observations"]
    assert semantic["description"] == MemoryStore.TOOLS["semantic_observations"].description
    props = semantic["parameters"]["properties"]
    assert set(props) == {"query", "person", "before", "n"}       # "now" is the question's, never the model's
    assert props["before"]["type"] == "string" and tool_views.TIME_HELP in props["before"]["description"]
    assert "max 30" in props["n"]["description"]
    assert set(specs["retrieve_from_time"]["parameters"]["properties"]) == {"time"}
    assert specs["waypoint_observations"]["parameters"]["required"] == ["waypoint"]
    assert "robot's time zone" in specs["persons_per_day"]["parameters"]["properties"]["date"]["description"]


def test_a_view_turns_model_arguments_into_memory_arguments(tmp_path):
    from zoneinfo import ZoneInfo

    from embodied_memory.agent.tools import StoreMemoryClient, ToolBox
    store = filled_store(tmp_path, "sqlite_faiss")
    try:
        now = T0 + 3 * 3600
        box = ToolBox(StoreMemoryClient(store), now, ZoneInfo("UTC"))
        args = box._store_arguments(tool_views.VIEWS["semantic_observations"],
                                    {"query": "red mug", "n": 500, "before": "2030-01-01T00:00:00"})
        assert args == {"query": "red mug", "n": 30, "before": now, "now": now}   # capped, never after now
        args = box._store_arguments(tool_views.VIEWS["retrieve_from_time"], {"time": "09:00"})
        assert args == {"k": 8, "t": T0 + 3600}                   # the model's "time" is the memory's t
        result = box.run("retrieve_from_position", {"x": 1, "y": 1, "radius": 0})   # 0: not given
        assert [r["id"] for r in result][:1] == ["o0"] and "before" in box.trace[-1]
        args = box._store_arguments(tool_views.VIEWS["image_retrieval"], {"query": "mug", "m": 0})
        assert "m" not in args                           # 0 images asked: the memory's default (3)
        args = box._store_arguments(tool_views.VIEWS["semantic_observations"], {"query": "mug", "n": 0})
        assert args["n"] == 10                           # the model's default
    finally:
        store.close()


@pytest.mark.integration
def test_the_ros_client_checks_arguments_before_it_sends(ros_context):
    from rclpy.node import Node

    from embodied_memory.nodes.memory_client import RosMemoryClient
    node = Node("registry_client_test", context=ros_context)
    try:
        client = RosMemoryClient(node, "/nobody/query", timeout_s=30.0)
        with pytest.raises(InvalidArgumentError, match="person_observations: limit must be <= 1000"):
            client.call("person_observations", {"person": "alice", "limit": 5000})   # at once, not after 30 s
        with pytest.raises(InvalidArgumentError, match="unknown tool"):
            client.call("drop_table", {})
    finally:
        node.destroy_node()
