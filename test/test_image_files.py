"""Keyframe images are written only for stored observations, and a crash between the insert
and the rename is repaired by the sender's resend (store/image_files.py)."""
import math
from pathlib import Path

import pytest

from embodied_memory.store import StoreWriteError, open_store
from embodied_memory.store.image_files import PARTIAL, image_path_for, insert_with_images, sweep_partial_images

from store_fixtures import T0, make_params, obs

JPEG = b"\xff\xd8\xff\xe0" + b"jpeg" * 100


@pytest.fixture
def store(tmp_path):
    s = open_store(make_params(tmp_path, "sqlite_faiss"))
    yield s
    s.close()


def _with_image(i, x=0.0):
    o = obs(i, T0 + i, f"a plant {i}", x=x)
    o.image_jpeg = JPEG
    return o


def _files(store) -> list[Path]:
    return sorted(p for p in store.images_dir.rglob("*") if p.is_file())


def test_only_stored_observations_leave_an_image(store):
    result = insert_with_images(store, [_with_image(1), _with_image(2, x=math.nan), _with_image(3)])
    assert result.stored == ["o1", "o3"] and list(result.rejected) == ["o2"]
    assert [p.name for p in _files(store)] == ["o1.jpg", "o3.jpg"]
    assert Path(store.get_observation("o1")["image_path"]).read_bytes() == JPEG
    # a resend of a stored observation writes nothing more
    again = insert_with_images(store, [_with_image(1)])
    assert again.duplicates == ["o1"] and [p.name for p in _files(store)] == ["o1.jpg", "o3.jpg"]


def test_a_crash_before_the_rename_is_repaired_by_the_resend(store, monkeypatch):
    real_replace = Path.replace

    def crash(self, target):   # the process dies after the commit, before the rename
        raise KeyboardInterrupt("killed")
    monkeypatch.setattr(Path, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        insert_with_images(store, [_with_image(4)])
    monkeypatch.setattr(Path, "replace", real_replace)
    assert store.get_observation("o4") is not None and _files(store) == []   # stored, image missing
    assert sweep_partial_images(store.images_dir) == 0                      # the partial went with the crash
    result = insert_with_images(store, [_with_image(4)])                    # the sender's copy comes again
    assert result.duplicates == ["o4"]
    assert image_path_for(store.images_dir, obs(4, T0, "")).read_bytes() == JPEG


def test_an_image_deleted_by_forget_is_not_written_again(store):
    o = _with_image(5)
    o.people = obs(5, T0, "", people=["dana"]).people
    insert_with_images(store, [o])
    store.forget_identity("dana")
    assert _files(store) == [] and store.get_observation("o5").get("image_path") is None
    again = _with_image(5)
    insert_with_images(store, [again])                                       # a late resend
    assert _files(store) == []


def test_partial_images_are_swept_and_write_faults_are_store_write_errors(store, monkeypatch):
    stale = store.images_dir / "day1" / f"o9.jpg{PARTIAL}"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(JPEG)
    assert sweep_partial_images(store.images_dir) == 1 and not stale.exists()

    def full(self, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(StoreWriteError, match="No space left"):
        insert_with_images(store, [_with_image(6)])
    assert store.get_observation("o6") is None


def test_a_memory_copied_elsewhere_forgets_its_own_images_and_never_the_originals(tmp_path):
    import shutil
    from embodied_memory.store.image_files import file_in
    original = open_store(make_params(tmp_path / "robot", "sqlite_faiss"))
    seen = obs(1, T0, "Alice at her desk", people=["alice"])
    seen.image_jpeg = JPEG
    insert_with_images(original, [seen])
    stored = Path(original.get_observation("o1")["image_path"])
    original.close()
    copy_dir = tmp_path / "copy" / "store"
    shutil.copytree(tmp_path / "robot" / "store", copy_dir)
    copied_image = file_in(copy_dir, str(stored))           # the stored path still names the robot's directory
    assert copied_image is not None and copied_image.parent.parent.parent == copy_dir.resolve()
    assert file_in(copy_dir, "/etc/passwd") is None and file_in(copy_dir, str(copy_dir / "../../robot")) is None
    copy = open_store(make_params(tmp_path / "copy", "sqlite_faiss"))
    try:
        result = copy.forget_identity("alice")
        assert result["images_removed"] == 1 and result["files_removed"] == 1
        assert not copied_image.exists() and stored.exists()   # the copy's file went, the robot's stayed
    finally:
        copy.close()
