"""HUMEMBR's relevance score: s = a * cosine_distance + b * (1 - exp(-lambda * hours_ago)).

Lower is better.  lambda is chosen so the time penalty reaches 0.95 at ``horizon_hours``
(HUMEMBR: 120 h, a = 3.0, b = 1.0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RecencyScore:
    weight_cos: float = 3.0
    weight_time: float = 1.0
    horizon_hours: float = 120.0

    @property
    def decay_per_hour(self) -> float:
        return -math.log(0.05) / self.horizon_hours

    def penalty(self, hours_ago: np.ndarray | float) -> np.ndarray:
        hours = np.maximum(np.asarray(hours_ago, dtype=np.float64), 0.0)
        return 1.0 - np.exp(-self.decay_per_hour * hours)

    def hours_for_penalty(self, weighted_penalty: float) -> float:
        """The age (hours) at which ``weight_time * penalty`` reaches ``weighted_penalty``
        (0 at or below 0; inf where it is never reached)."""
        fraction = weighted_penalty / self.weight_time if self.weight_time > 0 else math.inf
        if fraction <= 0.0:
            return 0.0
        return math.inf if fraction >= 1.0 else -math.log(1.0 - fraction) / self.decay_per_hour

    def score(self, cosine_similarity: np.ndarray, hours_ago: np.ndarray) -> np.ndarray:
        distance = 1.0 - np.asarray(cosine_similarity, dtype=np.float64)
        return self.weight_cos * distance + self.weight_time * self.penalty(hours_ago)
