"""Is the exploration target in view, and where? A multimodal model (OpenAI-compatible
endpoint) points at it in the image; the depth image places it on the map. No open-vocabulary
detector ships offline, so without ``llm_base_url`` this detector cannot run (clear error)."""
from __future__ import annotations

import logging
import math
from typing import Optional

import numpy as np

from ..agent.answer import extract_json_objects
from ..llm.chat_client import LLMError
from ..llm.images import image_part

log = logging.getLogger(__name__)

PROMPT = ("You are the eyes of a mobile robot looking for: {target}.\nIs it visible in this image "
          "({w} x {h} pixels)? If it is, give the pixel at its centre. Reply with JSON only: "
          '{{"visible": true|false, "u": <column>, "v": <row>}}')


class VlmTargetDetector:
    def __init__(self, client, camera):
        self.client, self.camera = client, camera

    def detect(self, frame, target: str) -> Optional[tuple[float, float]]:
        h, w = frame.image.shape[:2]
        messages = [{"role": "user", "content": [
            {"type": "text", "text": PROMPT.format(target=target, w=w, h=h)},
            image_part(frame.image, max_side=max(w, h))]}]
        try:
            reply = self.client.chat(messages).content
        except LLMError as exc:
            log.warning("target detection: endpoint error (%s); treated as not in view", exc)
            return None
        for value in extract_json_objects(reply):
            if not (isinstance(value, dict) and isinstance(value.get("visible"), bool)):
                continue
            if not value["visible"]:
                return None
            u, v = value.get("u"), value.get("v")
            if not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in (u, v)):
                break
            return self._place(frame, float(u), float(v))
        log.warning("target detection: malformed reply %r; treated as not in view", reply[:200])
        return None

    def _place(self, frame, u: float, v: float) -> Optional[tuple[float, float]]:
        """Pixel (in the colour image) -> map position through the depth image (same view)."""
        dh, dw = frame.depth.shape[:2]
        ih, iw = frame.image.shape[:2]
        du, dv = int(u * dw / iw), int(v * dh / ih)
        if not (0 <= du < dw and 0 <= dv < dh):
            return None
        patch = frame.depth[max(0, dv - 3):dv + 4, max(0, du - 3):du + 4]
        patch = patch[np.isfinite(patch) & (patch > 0.05)]
        if patch.size == 0:
            return None
        fwd, left, _ = self.camera.to_body(du * self.camera.width / dw, dv * self.camera.height / dh,
                                           float(np.median(patch)))
        p = frame.pose
        c, s = math.cos(p.yaw), math.sin(p.yaw)
        return float(p.x + c * fwd - s * left), float(p.y + s * fwd + c * left)
