"""A fleet robot's outbox (store/outbox.py): kept in order on disk, sent once, answered from
while the server is away.  The server here is a real fleet server (the conftest's), stopped
and started again by the test."""
import numpy as np
import pytest

from embodied_memory.store import StoreError, StoreWriteError, open_store
from embodied_memory.store.errors import SERVER_UNREACHABLE
from embodied_memory.store.outbox import Outbox

from store_fixtures import T0, make_params, obs

pytestmark = pytest.mark.integration


def _image_obs(i, person=""):
    o = obs(i, T0 + i * 60, f"view {i} of the lab", x=float(i), people=(person,) if person else ())
    o.observation_id = f"spot1/o{i}"
    o.image_jpeg = b"\xff\xd8fake jpeg %d" % i
    return o


def test_the_outbox_keeps_order_survives_a_restart_and_sends_each_record_once(tmp_path):
    target = open_store(make_params(tmp_path, "sqlite_faiss"))
    box = Outbox(tmp_path / "robot", target.params)
    assert box.put(_image_obs(1)) and box.put(_image_obs(2, "alice")) and box.put(_image_obs(3))
    assert not box.put(_image_obs(2, "alice"))               # resent by perception: kept once
    box.close()
    box = Outbox(tmp_path / "robot", target.params)          # the robot restarted: still there, in order
    assert [o.observation_id for _, o in box._rows()] == ["spot1/o1", "spot1/o2", "spot1/o3"]
    target.insert_batch([_image_obs(1)])                     # the server took it before a crash cut the delete
    assert box.flush(target) == 3 and len(box) == 0
    rows = target._conn().execute("SELECT observation_id, image_path FROM observations ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["spot1/o1", "spot1/o2", "spot1/o3"]
    sent = dict(rows)["spot1/o3"]
    assert sent and open(sent, "rb").read() == b"\xff\xd8fake jpeg 3"    # the image written where the record says
    assert target.person_observations("alice")[0]["id"] == "spot1/o2"
    box.close()
    target.close()


def test_a_server_away_keeps_records_in_the_outbox_answers_from_them_then_sends_them(
        fleet_server, fleet_database, tmp_path):
    from store_fixtures import POSTGRES
    POSTGRES["url"] = fleet_database
    store = open_store(make_params(tmp_path, "postgres", robot_id="spot1"))
    box = Outbox(tmp_path / "robot", store.params)
    store.insert_batch([_image_obs(1)])
    fleet_server.kill()
    try:
        with pytest.raises(StoreWriteError):
            store.insert_batch([_image_obs(2, "alice")])
        box.put(_image_obs(2, "alice"))
        box.put(_image_obs(3))
        with pytest.raises(StoreWriteError):
            box.flush(store)                                  # still away: everything stays
        with pytest.raises(StoreError) as away:
            store.call_tool("person_observations", {"person": "alice"})
        assert away.value.kind == SERVER_UNREACHABLE         # what the memory node answers from the outbox on
        assert len(box) == 2
        # questions meanwhile: this robot's unsent records
        assert [r["id"] for r in box.answer("person_observations", {"person": "alice"})] == ["spot1/o2"]
        box.put(_image_obs(4, "alice"))
        assert sorted(r["id"] for r in box.answer("person_observations", {"person": "alice"})) == \
            ["spot1/o2", "spot1/o4"]                          # the view follows the outbox
    finally:
        fleet_server.start()
    assert box.flush(store) == 3 and len(box) == 0
    counts = dict(store._conn().execute("SELECT observation_id, COUNT(*) FROM observations GROUP BY observation_id"
                                        ).fetchall())
    assert counts == {"spot1/o1": 1, "spot1/o2": 1, "spot1/o3": 1, "spot1/o4": 1}
    assert {r["robot"] for r in store.person_observations("alice")} == {"spot1"}
    assert not (tmp_path / "robot" / "outbox_view").exists()
    np.testing.assert_equal(len(store.observation_times()), 4)
    box.close()
    store.close()


def test_a_record_the_server_refuses_is_set_aside_and_never_blocks_the_others(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    target = open_store(make_params(tmp_path, "sqlite_faiss"))
    box = Outbox("~/robot", target.params)                  # as config/fleet.yaml writes data_dir
    assert box.folder == tmp_path / "home" / "robot" and (box.folder / "outbox.sqlite3").exists()
    bad = _image_obs(2)
    bad.global_embedding = np.ones(3, dtype=np.float32)    # a wrong dimension: the store refuses it
    assert target.rejection(bad) is not None and target.rejection(_image_obs(1)) is None
    for o in (_image_obs(1), bad, _image_obs(3)):
        box.put(o)
    assert box.flush(target) == 2 and len(box) == 0
    assert list(box.refused()) == ["spot1/o2"] and "bad_embedding_dim" in box.refused()["spot1/o2"]
    assert sorted(r[0] for r in target._conn().execute("SELECT observation_id FROM observations")) == \
        ["spot1/o1", "spot1/o3"]
    box.close()
    target.close()
