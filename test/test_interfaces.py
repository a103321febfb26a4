"""The interface packages built into the venv: importable, complete, wire-compatible."""
import json
import sys
from pathlib import Path

import pytest


def test_contract_types_import():
    from embodied_memory_interfaces.action import Explore, NavigateToWaypoint
    from embodied_memory_interfaces.msg import Answer, Keyframe, Observation
    from embodied_memory_interfaces.srv import Ask, Forget, GetMemoryStats, NameIdentity, QueryMemory

    assert hasattr(Keyframe(), "compressed_image") and hasattr(Keyframe(), "segment_id")
    assert {"regions", "people", "global_embedding"} <= set(Observation.get_fields_and_field_types())
    answer_fields = set(Answer.get_fields_and_field_types())
    assert {"binary", "position", "time_iso", "duration_minutes", "persons", "evidence_ids",
            "tokens_in", "tokens_out", "count", "days"} <= answer_fields
    assert Ask.Request().question == "" and Answer.STATUS_NO_ANSWER == "no_answer"
    assert NavigateToWaypoint.Goal().verify_person_id == ""
    assert hasattr(NavigateToWaypoint.Result(), "success") and hasattr(Explore.Feedback(), "cognitive_state")
    assert Forget.Request.MODE_IDENTITY == "identity"
    for srv in (GetMemoryStats, NameIdentity, QueryMemory):
        assert srv.Request and srv.Response


def test_answer_to_msg_carries_count_and_days():
    from embodied_memory.agent.answer import Answer
    from embodied_memory.nodes.conversions import answer_to_msg

    msg = answer_to_msg(Answer(type="count", count=3, persons=["alice", "bob", "carol"]).sanitize())
    assert (msg.type, msg.count, list(msg.days)) == ("count", 3, [])
    msg = answer_to_msg(Answer(type="days", days=["2026-03-25", "2026-03-28"]).sanitize())
    assert (msg.count, list(msg.days)) == (-1, ["2026-03-25", "2026-03-28"])   # -1: no count
    assert json.loads(msg.json)["days"] == ["2026-03-25", "2026-03-28"] and json.loads(msg.json)["count"] is None
    assert answer_to_msg(Answer(type="count", count=0)).count == 0   # nobody is a count, not "no count"


def test_where_a_person_stood_survives_the_observation_message():
    from embodied_memory.nodes.conversions import observation_from_msg, observation_to_msg
    from embodied_memory.types import Observation, PersonSighting, Pose

    obs = Observation("o1", 1_773_050_000.0, "ep", Pose(1.0, 2.0, 0.0, 0.5, "map"),
                      people=[PersonSighting((1, 2, 30, 80), "person_0001", 0.9, position=(1.5, -2.0, 0.9)),
                              PersonSighting((40, 2, 60, 80), "", 0.4, track_id=2 ** 40 + 7)])
    msg = observation_to_msg(obs)
    assert msg.header.frame_id == "map" and [s.has_position for s in msg.people] == [True, False]
    back = observation_from_msg(msg)
    assert back.people[0].position == pytest.approx((1.5, -2.0, 0.9)) and back.people[1].position is None
    assert [s.track_id for s in back.people] == [0, 2 ** 40 + 7]
    msg.people[0].position.x = float("nan")          # a broken sender: the sighting stays, without a position
    assert observation_from_msg(msg).people[0].position is None


def test_local_tf2_msgs_hash_matches_upstream():
    """rosbags' Kilted type store computes RIHS01 from the upstream definition."""
    from rosbags.typesys import Stores, get_typestore
    share = Path(sys.prefix) / "share" / "tf2_msgs" / "msg" / "TFMessage.json"
    if not share.exists():
        pytest.skip(f"{share} not found (interfaces not built into this prefix)")
    data = json.loads(share.read_text())
    hashes = [h["hash_string"] for h in data["type_hashes"] if h["type_name"] == "tf2_msgs/msg/TFMessage"]
    upstream = get_typestore(Stores.ROS2_KILTED).hash_rihs01("tf2_msgs/msg/TFMessage")
    assert hashes == [upstream]


def _rosidl_hashes(package: str, kind: str, name: str) -> dict[str, str]:
    path = Path(sys.prefix) / "share" / package / kind / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} not found (interfaces not built into this prefix)")
    return {h["type_name"]: h["hash_string"] for h in json.loads(path.read_text())["type_hashes"]}


@pytest.mark.parametrize("package, kind, name, parts", [
    ("nav2_msgs", "action", "NavigateToPose", ("Goal", "Result", "Feedback")),
    ("spot_msgs", "action", "NavigateTo", ("Goal", "Result", "Feedback")),
    ("spot_msgs", "srv", "ListGraph", ("Request", "Response")),
    ("spot_msgs", "srv", "GraphNavGetLocalizationPose", ("Request", "Response")),
    ("spot_msgs", "srv", "GraphNavSetLocalization", ("Request", "Response")),
])
def test_local_nav2_and_spot_interfaces_hash_like_their_definitions(package, kind, name, parts):
    """The locally built subsets are field-for-field copies of upstream: rosbags' independent
    RIHS01 computation from the definition text gives the hashes rosidl generated here."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    built = _rosidl_hashes(package, kind, name)
    source = (Path(__file__).resolve().parents[1] / "msg" / package / kind / f"{name}.{kind}").read_text()
    sections = source.split("\n---")
    store = get_typestore(Stores.ROS2_KILTED)
    for part, text in zip(parts, sections):
        full = f"{package}/{kind}/{name}_{part}"
        (definition,) = get_types_from_msg(text, full).values()  # (rosbags files srv types under srv/msg/)
        store.register({full: definition})
        assert built[full] == store.hash_rihs01(full), full
