"""The store package stands alone: importing it, opening a memory, writing and querying it load
nothing above it (no parameters of the nodes, agent, perception, ingest, nodes, simulator,
OpenCV), only the leaf modules ``embodied_memory.types``, ``calendar_windows``,
``text_embedding``, ``progress`` and ``records_io`` (the outbox's JSON form) and its own modules."""
from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN_PACKAGES = ("embodied_memory.agent", "embodied_memory.perception", "embodied_memory.ingest",
                      "embodied_memory.nodes", "embodied_memory.sim", "cv2")
FORBIDDEN_MODULES = ("embodied_memory.params",)
ALLOWED = ("embodied_memory", "embodied_memory.types", "embodied_memory.calendar_windows",
           "embodied_memory.text_embedding", "embodied_memory.progress", "embodied_memory.records_io")

CODE = """
import json, pkgutil, importlib, sys
import embodied_memory.store.memory_store
import embodied_memory.store
for info in pkgutil.iter_modules(embodied_memory.store.__path__, "embodied_memory.store."):
    importlib.import_module(info.name)
import tempfile
from embodied_memory.store import StoreParams, open_store
from embodied_memory.types import Observation, Pose
store = open_store(StoreParams(data_dir=tempfile.mkdtemp(), text_embedder="hash", image_dim=4))
store.insert([Observation("o1", 1.0e9, "e", Pose(0.0, 0.0), description="a red mug", global_embedding=[1, 0, 0, 0])])
assert store.semantic_observations("mug", now=1.0e9 + 60)[0]["id"] == "o1"
store.close()
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_modules() -> list[str]:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_store_loads_nothing_above_it():
    modules = _loaded_modules()
    assert "embodied_memory.store.memory_store" in modules
    above = [m for m in modules
             if m in FORBIDDEN_MODULES or any(m == p or m.startswith(p + ".") for p in FORBIDDEN_PACKAGES)]
    assert above == [], f"the store imports modules above it: {above}"
    ours = [m for m in modules if m == "embodied_memory" or m.startswith("embodied_memory.")]
    outside = [m for m in ours if m not in ALLOWED and m != "embodied_memory.store"
               and not m.startswith("embodied_memory.store.")]
    assert outside == [], f"the store imports embodied_memory modules other than its leaves: {outside}"
