"""Images for vision-language models: a data URL, longest side <= 768 px, JPEG quality 80
(LVMem's visual answering settings; also what the VLM describer sends)."""
from __future__ import annotations

import base64

import cv2
import numpy as np

MAX_SIDE = 768
JPEG_QUALITY = 80


def image_data_url(image: np.ndarray, max_side: int = MAX_SIDE, quality: int = JPEG_QUALITY) -> str:
    h, w = image.shape[:2]
    scale = max_side / max(h, w)
    if scale < 1.0:
        image = cv2.resize(image, (max(1, int(w * scale)), max(1, int(h * scale))), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("image does not encode as JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(np.asarray(buf).tobytes()).decode()


def image_part(image: np.ndarray, max_side: int = MAX_SIDE) -> dict:
    """One image as a chat message content part (OpenAI-compatible, detail "low")."""
    return {"type": "image_url", "image_url": {"url": image_data_url(image, max_side), "detail": "low"}}
