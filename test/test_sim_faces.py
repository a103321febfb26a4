"""Simulated people wearing real face photos (../shared/data/faces): after a simulated day is
ingested, a DIFFERENT photo of each person (held out) matches the identity the memory built
for that person from the simulator's renders (SFace, cosine threshold 0.363)."""
import cv2
import numpy as np
import pytest

from conftest import shared_data
from embodied_memory.ingest.offline import ingest_bag
from embodied_memory.ingest.selection import SelectionParams
from embodied_memory.params import StoreParams
from embodied_memory.perception.faces import YuNetSFace
from embodied_memory.perception.pipeline import Perception, PerceptionParams
from embodied_memory.sim.episode import EpisodeConfig, generate_episode
from embodied_memory.sim.naming import label_identities
from embodied_memory.store import open_store

pytestmark = pytest.mark.integration


def test_held_out_photos_match_the_identities_built_from_the_simulation(tmp_path):
    faces_dir = shared_data("faces", "face_recognition_knn", "train")
    cfg = EpisodeConfig(seed=2, days=1, people=3, faces_dir=str(faces_dir), patrol_hours=(10.0, 15.0))
    truth = generate_episode(cfg, tmp_path / "episode", progress=False)
    assert {f["person"] for f in truth.faces.values()} and all(f["photo"] != f["held_out"]
                                                               for f in truth.faces.values())
    store = open_store(StoreParams(data_dir=str(tmp_path / "memory")))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path / "memory")))
    ingest_bag(str(tmp_path / "episode" / "bag"), store, perception, progress=False,
               selection=SelectionParams(policy="psfr", segment_s=10.0, frames_per_segment=6))
    perception.close()
    label_identities(lambda tool, args: store.call_tool(tool, args),
                     lambda ident, display: store.name_identity(ident, display), truth)
    # naming two identities alike merges them: read the surviving identities and their names; the
    # operator leaves fragments (too few sightings) unnamed, so recognition is against named ones
    names_of = {p["person"]: p["name"].lower() for p in store.people() if p.get("name")}
    faces_of = {}
    for identity in names_of:
        vecs = [s["face_emb"] for s in store.export_identity(identity, include_embeddings=True)["sightings"]
                if s.get("face_emb")]
        if vecs:
            faces_of[identity] = np.array(vecs, np.float32)
    detector = YuNetSFace()
    recognised = 0
    for name, face in truth.faces.items():
        found = [f for f in detector.detect(cv2.imread(face["held_out"])) if f.score >= 0.8]
        assert found, f"no face in the held-out photo {face['held_out']}"
        probe = max(found, key=lambda f: f.score).embedding
        scores = {ident: float(np.max(vecs @ probe)) for ident, vecs in faces_of.items()}
        best = max(scores, key=scores.get)
        if scores[best] >= 0.363:
            assert names_of[best] == name, f"{face['person']}'s held-out photo matched {names_of[best]}'s identity"
            recognised += 1
    store.close()
    assert recognised >= 2, f"only {recognised} of {len(truth.faces)} people recognised from a held-out photo"
