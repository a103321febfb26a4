"""Configuration is validated at start-up; messages name the file and the key."""
import pytest

from embodied_memory.config import ConfigError, parse_params
from embodied_memory.params import MemoryNodeParams, StoreParams
from embodied_memory.stack import load_stack, resolve_stack_path


def write(tmp_path, text, name="stack.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_stacks_are_valid():
    for name in ("default", "fleet", "fleet_milvus", "spot", "gpu", "nav2"):
        stack = load_stack(resolve_stack_path(name))
        assert stack.nodes, name


def test_unknown_parameter_names_key_and_file(tmp_path):
    path = write(tmp_path, "nodes:\n  memory:\n    executable: memory_node\n    parameters: {data_dri: /x}\n")
    with pytest.raises(ConfigError) as err:
        load_stack(path)
    assert str(path) in str(err.value) and "data_dri" in str(err.value)
    assert "nodes.memory.parameters" in str(err.value)


def test_wrong_type_names_key(tmp_path):
    path = write(tmp_path, "nodes:\n  memory:\n    executable: memory_node\n    parameters: {text_dim: '384'}\n")
    with pytest.raises(ConfigError, match=r"nodes\.memory\.parameters\.text_dim: expected an integer"):
        load_stack(path)


def test_bool_is_not_a_number(tmp_path):
    with pytest.raises(ConfigError, match="recency_weight_cos"):
        parse_params(StoreParams, {"recency_weight_cos": True}, "x")


def test_invalid_value_is_rejected_by_validate():
    with pytest.raises(ConfigError, match="backend: unknown 'mongodb'"):
        parse_params(StoreParams, {"backend": "mongodb"}, "x")


@pytest.mark.parametrize("values,problem", [
    ({"answerer": "oracle"}, "answerer: unknown 'oracle'"),
    ({"answerer": "vlm"}, "answerer: vlm needs llm_base_url"),
    ({"waypoints_file": "rooms.yaml"}, "set it only with environment: robot"),
    ({"waypoint_radius_m": 0.0}, "waypoint_radius_m: must be > 0")])
def test_explore_answerer_and_places_are_validated(values, problem):
    from embodied_memory.params import ExploreNodeParams
    with pytest.raises(ConfigError, match=problem):
        parse_params(ExploreNodeParams, values, "explore")


def test_unknown_node_key_and_executable(tmp_path):
    path = write(tmp_path, "nodes:\n  memory:\n    executable: memory_node\n    respwan: true\n")
    with pytest.raises(ConfigError, match="respwan"):
        load_stack(path)
    path = write(tmp_path, "nodes:\n  memory:\n    executable: no_such_node\n")
    with pytest.raises(ConfigError, match="no_such_node"):
        load_stack(path)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_stack(tmp_path / "absent.yaml")
    path = write(tmp_path, "nodes: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_stack(path)


def test_overrides_are_validated(tmp_path):
    path = write(tmp_path, "nodes:\n  memory:\n    executable: memory_node\n")
    stack = load_stack(path, {"memory": {"text_dim": 512}})
    assert stack.nodes[0].parameters == {"text_dim": 512}
    with pytest.raises(ConfigError, match="unknown node 'perception'"):
        load_stack(path, {"perception": {"x": 1}})


def test_ros_params_file_uses_fully_qualified_name(tmp_path):
    path = write(tmp_path, "nodes:\n  memory:\n    executable: memory_node\n    namespace: spot\n"
                           "    parameters: {timezone: Europe/Zurich}\n")
    node = load_stack(path).nodes[0]
    assert node.fully_qualified_name == "/spot/memory"
    assert "/spot/memory:" in node.ros_params_yaml() and "Europe/Zurich" in node.ros_params_yaml()
    assert node.ros_arguments("p.yaml")[-2:] == ["--params-file", "p.yaml"]


def test_node_params_defaults_are_valid():
    params = parse_params(MemoryNodeParams, {}, "defaults")
    assert params.backend == "sqlite_faiss" and params.text_dim == 384


def test_memory_and_agent_must_share_one_time_zone():
    """A day asked of the agent ("yesterday") is a day the store counts ("persons per day")."""
    with pytest.raises(ConfigError, match="timezone parameters differ.*memory: Europe/Zurich.*query_agent: UTC"):
        load_stack(resolve_stack_path("default"), {"memory": {"timezone": "Europe/Zurich"}})
    both = {"memory": {"timezone": "Europe/Zurich"}, "query_agent": {"timezone": "Europe/Zurich"}}
    assert len(load_stack(resolve_stack_path("default"), both).nodes) == 4


def test_a_fleet_backend_needs_a_server_url_without_a_password():
    with pytest.raises(ConfigError, match="postgres_url"):
        parse_params(StoreParams, {"backend": "postgres"}, "x")
    with pytest.raises(ConfigError, match="postgres_password_env"):
        parse_params(StoreParams, {"backend": "postgres", "postgres_url": "postgresql://a:b@h/db"}, "x")
    assert parse_params(StoreParams, {"backend": "postgres", "postgres_url": "postgresql://spot1@fleet:5432/fleet",
                                      "robot_id": "spot1"}, "x").robot_id == "spot1"
