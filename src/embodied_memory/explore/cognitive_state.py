"""Meta memory (HIMM): the explorer's discrete cognitive states, the transitions allowed between
them, and the per-step log of every change with its reason."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import Enum

log = logging.getLogger(__name__)


class CognitiveState(str, Enum):
    EXPLORATION = "exploration"
    TARGET_VERIFICATION = "target_verification"
    TARGET_APPROACHING = "target_approaching"
    CHECK_READY_TO_ANSWER = "check_ready_to_answer"


S = CognitiveState
TRANSITIONS: dict[CognitiveState, frozenset[CognitiveState]] = {
    # memory may say where the target is: exploration can go straight to approaching
    S.EXPLORATION: frozenset({S.TARGET_VERIFICATION, S.TARGET_APPROACHING, S.CHECK_READY_TO_ANSWER}),
    S.TARGET_VERIFICATION: frozenset({S.TARGET_APPROACHING, S.EXPLORATION}),
    S.TARGET_APPROACHING: frozenset({S.TARGET_VERIFICATION, S.CHECK_READY_TO_ANSWER, S.EXPLORATION}),
    S.CHECK_READY_TO_ANSWER: frozenset({S.EXPLORATION, S.TARGET_APPROACHING}),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class StateChange:
    step: int
    source: CognitiveState
    target: CognitiveState
    reason: str


@dataclass
class MetaMemory:
    state: CognitiveState = S.EXPLORATION
    changes: list[StateChange] = field(default_factory=list)

    def switch(self, target: CognitiveState, step: int, reason: str) -> None:
        if target == self.state:
            return
        if target not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self.state.value} -> {target.value} is not a transition of the meta memory")
        self.changes.append(StateChange(step, self.state, target, reason))
        log.debug("step %d: %s -> %s (%s)", step, self.state.value, target.value, reason)
        self.state = target
