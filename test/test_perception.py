"""Perception on real images, describers, and clear errors for missing weights."""
import json

import cv2
import numpy as np
import pytest

from embodied_memory.perception.describer import DetectorDescriber, VLMDescriber, flatten_object_centric
from embodied_memory.perception.pipeline import Perception, PerceptionParams
from embodied_memory.perception.weights import MissingWeightsError
from embodied_memory.types import Keyframe, Pose

from conftest import shared_data
from scripted_llm import ScriptedLLM, content


def test_hog_finds_the_pedestrians_of_vtest():
    from embodied_memory.perception.person_detection import HogPersonDetector
    capture = cv2.VideoCapture(str(shared_data("video", "vtest.avi")))
    detector = HogPersonDetector()
    counts = []
    for i in range(0, 200, 40):
        capture.set(cv2.CAP_PROP_POS_FRAMES, i)
        ok, frame = capture.read()
        counts.append(len(detector.detect(frame)))
    print("people per vtest frame:", counts)
    assert min(counts) >= 2 and np.mean(counts) >= 4  # ~8 people walk in view; HOG finds most


def test_pipeline_on_a_face_photo(tmp_path):
    image = cv2.imread(str(shared_data("faces", "face_recognition_knn", "test", "obama_and_biden.jpg")))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path), text_embedder="hash"))
    kf = Keyframe("ep/1", 1_800_000_000.0, "ep", Pose(1.0, 2.0), cv2.resize(image, (1000, 714)),
                  waypoint_id="stage")
    [obs] = perception.process([kf])
    identities = [s.identity_id for s in obs.people if s.face_box]
    assert len(identities) == 3 and len(set(identities)) == 3  # Obama, Biden, a child at the edge
    assert obs.global_embedding.shape == (1280,) and abs(np.linalg.norm(obs.global_embedding) - 1) < 1e-4
    assert all(s.reid_embedding is not None for s in obs.people)
    assert "identified: person_0001" in obs.description and obs.description.endswith("at stage.")
    # the JPEG travels with the observation; the store writes it once it accepts it
    assert obs.image_path == "" and cv2.imdecode(np.frombuffer(obs.image_jpeg, np.uint8), cv2.IMREAD_COLOR).shape == (714, 1000, 3)
    assert obs.text_embedding.shape == (384,)


def test_detector_description_is_positive_only():
    text, _ = DetectorDescriber().describe([], {"people": 0, "faces": 0, "identities": [], "waypoint": "kitchen"})
    assert text == "Robot camera view at kitchen." and "no" not in text.lower().split()
    from embodied_memory.detector_sentences import names_no_things
    assert names_no_things(text) and not names_no_things("I see a red box about 2.0 m ahead.")
    busy, _ = DetectorDescriber().describe([], {"people": 3, "faces": 1, "identities": ["person_0001", "alice"]})
    assert busy == "3 people visible; 1 face seen; identified: person_0001, alice." and names_no_things(busy)


def test_object_centric_flattening():
    data = {"scene": "office, indoor", "objects": [{"noun": "mug", "color": "red", "count": 2},
                                                   {"noun": "object", "color": "blue", "count": 1},
                                                   {"noun": "laptop", "color": "magenta", "count": 1}],
            "people": [{"activity": "typing", "clothing": "a green sweater"}], "text": ["EXIT"], "weather": None}
    prose = flatten_object_centric(data)
    assert prose == ('office, indoor. 2 red mugs, a laptop. A person in a green sweater typing. Text: "EXIT".')
    long = flatten_object_centric({"objects": [{"noun": f"thing{i}", "count": 1} for i in range(200)]})
    assert len(long.split()) <= 111


def test_vlm_describer_over_an_openai_compatible_endpoint():
    reply = '```json\n{"scene": "kitchen", "objects": [{"noun": "kettle", "color": "silver", "count": 1}]}\n```'
    with ScriptedLLM([content(reply)]) as llm:
        describer = VLMDescriber(llm.base_url, "vlm")
        text, structured = describer.describe([np.zeros((960, 1280, 3), np.uint8)], {})
    assert text == "kitchen. A silver kettle." and json.loads(structured)["scene"] == "kitchen"
    parts = llm.requests[0]["messages"][0]["content"]
    assert parts[0]["type"] == "text" and "palette" not in parts[0]["text"] and "silver" in parts[0]["text"]
    assert parts[1]["image_url"]["detail"] == "low"


@pytest.mark.parametrize("params, parameter", [
    (dict(image_embedder="clip"), "clip_weights"),
    (dict(person_detector="yolo", image_embedder="none", reid="none"), "yolo_weights"),
    (dict(face_backend="insightface", image_embedder="none", reid="none", person_detector="none"), "insightface_root"),
])
def test_gpu_backends_without_weights_name_the_parameter(params, parameter, tmp_path):
    with pytest.raises(MissingWeightsError, match=parameter):
        Perception(PerceptionParams(data_dir=str(tmp_path), text_embedder="hash", **params))


def test_vlm_describer_requires_an_endpoint():
    with pytest.raises(ValueError, match="vlm_base_url"):
        PerceptionParams(describer="vlm").validate()


@pytest.mark.parametrize("params, parameter", [
    (dict(region_proposer="sam"), "sam_weights"),
    (dict(reid="torchscript"), "reid_weights"),
])
def test_region_and_reid_backends_without_weights_name_the_parameter(params, parameter, tmp_path):
    with pytest.raises(MissingWeightsError, match=parameter):
        Perception(PerceptionParams(data_dir=str(tmp_path), text_embedder="hash", person_detector="none",
                                    face_backend="none", **params))


def test_region_3d_box_from_depth():
    """A region 2 m straight ahead of a robot at (1, 1) facing +y lands at about (1, 3)."""
    import math
    from embodied_memory.perception.regions import box_3d
    depth = np.zeros((100, 100), np.float32)
    depth[40:60, 45:55] = 2.0
    mask = depth > 0
    centre, size = box_3d(mask, depth, (100.0, 100.0, 50.0, 50.0), Pose(1.0, 1.0, 0.5, math.pi / 2))
    assert np.allclose(centre, (1.0, 3.0, 0.5), atol=0.06) and 0.1 < size[2] < 0.5
    assert box_3d(np.zeros_like(mask), depth, (100.0, 100.0, 50.0, 50.0), Pose(0, 0)) is None
    half = depth[::2, ::2].copy()                 # the same view at half the size
    centre_half, _ = box_3d(mask, half, (100.0, 100.0, 50.0, 50.0), Pose(1.0, 1.0, 0.5, math.pi / 2))
    assert np.allclose(centre_half, centre, atol=0.06)


def test_a_person_is_placed_at_their_torso_depth_not_the_wall_behind():
    """A 160x120 colour camera, its depth at half size: a person 2 m away in front of a wall 5 m
    away, right of the image centre, seen by a robot at (1, 2) facing +y."""
    import math
    from embodied_memory.perception.projection import person_position
    depth = np.full((60, 80), 5.0, np.float32)
    depth[10:55, 58:72] = 2.0                    # the person: colour columns 116..144, centre 130
    intrinsics, pose = (100.0, 100.0, 80.0, 60.0), Pose(1.0, 2.0, 0.0, math.pi / 2)
    box = (110.0, 20.0, 150.0, 110.0)            # HOG's box is wider than the body: wall at its sides
    x, y, z = person_position(box, depth, (160, 120), intrinsics, pose)
    # 2 m ahead (+y), 1 m to the right of the optical axis ((130 - 80) * 2 / 100) = +x in the map
    assert abs(x - 2.0) < 0.05 and abs(y - 4.0) < 0.05 and abs(z) < 0.3
    assert person_position(box, np.zeros((60, 80), np.float32), (160, 120), intrinsics, pose) is None
    far = np.full((60, 80), 12.0, np.float32)     # beyond the depth camera's useful range
    assert person_position(box, far, (160, 120), intrinsics, pose) is None


def test_the_upscaled_pass_finds_faces_too_small_for_one_pass():
    """A face of about 11 px (a person 6 m from a 640x480 camera): YuNet at full size misses it,
    the second pass at 2x finds it, in original pixels, and embeds it; a face both passes see is
    kept once."""
    from embodied_memory.perception.faces import YuNetSFace
    from embodied_memory.sim.world import face_crop, usable_portraits
    one_pass, two_pass = YuNetSFace(min_size=8), YuNetSFace(min_size=8, upscale=2.0)
    crop = face_crop(cv2.imread(str(usable_portraits(limit=1)[0])), one_pass)
    image = np.full((480, 640, 3), 150, np.uint8)
    small = cv2.resize(crop, (17, 17), interpolation=cv2.INTER_AREA)     # the face itself ~11 px of the crop
    image[200:217, 400:417] = small
    large = cv2.resize(crop, (90, 90), interpolation=cv2.INTER_AREA)
    image[100:190, 100:190] = large
    found_once = one_pass.detect(image)
    assert [f for f in found_once if f.box[0] < 190] and not [f for f in found_once if f.box[0] > 390]
    found = two_pass.detect(image)
    assert len([f for f in found if f.box[0] < 190]) == 1                    # the large face: once
    [far] = [f for f in found if f.box[0] > 390]
    assert 396 <= far.box[0] and far.box[2] <= 421 and 196 <= far.box[1] and far.box[3] <= 221
    assert far.embedding.shape == (128,) and abs(float(np.linalg.norm(far.embedding)) - 1.0) < 1e-4
    with pytest.raises(ValueError, match="upscale"):
        YuNetSFace(upscale=0.5)
    with pytest.raises(ValueError, match="face_upscale"):
        PerceptionParams(face_upscale=8.0).validate()
    with pytest.raises(ValueError, match="face_score_threshold"):
        PerceptionParams(face_score_threshold=1.5).validate()
    with pytest.raises(ValueError, match="face_small_score_threshold"):
        PerceptionParams(face_small_score_threshold=0.7).validate()


def test_the_small_face_score_keeps_a_dim_face_the_old_threshold_missed():
    """A face in deep shadow (12 % brightness, 40 px drawn: its box under 40 px) scores under 0.6
    but over the small faces' threshold.  (Large low-scoring boxes, false faces, are held to 0.6:
    test_pipeline_on_a_face_photo finds no fourth face beside Obama and Biden.)"""
    from embodied_memory.perception.faces import YuNetSFace
    from embodied_memory.sim.world import face_crop, usable_portraits
    crop = face_crop(cv2.imread(str(usable_portraits(limit=1)[0])), YuNetSFace(min_size=8))
    image = np.full((480, 640, 3), 40, np.uint8)
    image[200:240, 300:340] = cv2.resize((crop * 0.12).astype(np.uint8), (40, 40), interpolation=cv2.INTER_AREA)
    assert YuNetSFace(0.6, min_size=8).detect(image) == []
    defaults = PerceptionParams()
    [face] = YuNetSFace(defaults.face_score_threshold, min_size=8,
                        small_score_threshold=defaults.face_small_score_threshold).detect(image)
    assert 290 <= face.box[0] and face.box[2] <= 350 and 190 <= face.box[1] and face.box[3] <= 250
