"""What the inspector's search box, ask box and operator writes run on.

``StoreBackend`` opens the memory directory's store itself (the stack must not hold it);
``RosBackend`` (ros_backend.py, ``inspect --ros``) sends each of them to the running stack's
services. Both answer the same calls and raise ``BackendError`` with an HTTP status.
"""
from __future__ import annotations

import threading
from typing import Optional, Protocol

from ..agent.query_agent import AgentParams
from ..params import StoreParams


class BackendError(RuntimeError):
    def __init__(self, message: str, status: int = 503):
        super().__init__(message)
        self.status = status


class Backend(Protocol):
    describes: str          # shown on the health page: where searches, questions and writes go
    live: bool              # a running stack (questions as of its clock), not a directory at rest

    def search(self, query: str, person: Optional[str], n: int, now: float) -> list[dict]:
        """Semantic search with the recency score: [{"id", "score", ...}], best first."""

    def name(self, person: str, name: str) -> Optional[str]:
        """Name an identity; returns the identity kept (a name another identity has merges them),
        or None when the backend cannot tell (the caller reads it from the memory)."""

    def merge(self, person: str, into: str) -> str:
        """Merge ``person`` into ``into``; returns what was done, in words."""

    def forget(self, person: str, dry_run: bool) -> dict:
        """sightings_removed, files_removed, images_removed, identity_id, aliases."""

    def undo_identity_change(self, change: int) -> str:
        """Move a journalled merge's or split's sightings back; returns what was done, in words."""

    def consolidate(self, dry_run: bool):
        """Consolidation of the memory's identities (``consolidate_memory.ConsolidationReport``):
        the proposals (dry run) or applied."""

    def ask(self, question: str, planner: str, as_of: Optional[float]) -> dict:
        """The agent's answer (Answer.to_dict(), its memory calls in ``trace``) as if asked at ``as_of``."""

    def close(self) -> None: ...


class StoreBackend:
    """The memory directory's own store and a query agent over it (opened lazily: the pages
    that only list need neither)."""

    def __init__(self, store_params: StoreParams, agent_params: AgentParams):
        self.store_params, self.agent_params = store_params, agent_params
        self.live = False
        self.describes = f"the store in {store_params.data_dir} ({store_params.backend}), opened by the inspector"
        self._lock = threading.Lock()          # lazy opening
        self._ask_lock = threading.Lock()
        self._store = None
        self._agent = None

    def store(self):
        with self._lock:
            if self._store is None:
                from ..store import open_store
                self._store = open_store(self.store_params)
            return self._store

    def search(self, query: str, person: Optional[str], n: int, now: float) -> list[dict]:
        return self.store().semantic_observations(query, person=person, n=n, now=now)

    def name(self, person: str, name: str) -> str:
        from ..store.errors import UnknownPersonError
        try:
            return self.store().name_identity(person, name)
        except UnknownPersonError as exc:
            raise BackendError(str(exc), 404) from exc

    def merge(self, person: str, into: str) -> str:
        moved = self.store().merge_identities(person, into, reviewed=True)
        return f"{moved} sightings moved"

    def forget(self, person: str, dry_run: bool) -> dict:
        return self.store().forget_identity(person, dry_run=dry_run)

    def undo_identity_change(self, change: int) -> str:
        from pathlib import Path

        from ..consolidate_memory import undo_at_rest
        from ..people.identity import IdentityStateBusy
        from ..store.errors import StoreError
        try:
            moved = undo_at_rest(self.store(), Path(self.store_params.data_dir).expanduser() / "identities", change)
        except IdentityStateBusy as exc:
            raise BackendError(f"{exc}: perception is running on this memory; stop it to undo", 409) from exc
        except StoreError as exc:
            raise BackendError(str(exc), 400) from exc
        return f"{moved} sightings moved back" if moved else "already undone"

    def consolidate(self, dry_run: bool):
        from pathlib import Path

        from ..consolidate_memory import consolidate_memory
        from ..people.identity import IdentityStateBusy
        try:
            return consolidate_memory(self.store(), Path(self.store_params.data_dir).expanduser() / "identities",
                                      dry_run=dry_run)
        except IdentityStateBusy as exc:
            raise BackendError(f"{exc}: perception is running on this memory; stop it to apply", 409) from exc

    def ask(self, question: str, planner: str, as_of: Optional[float]) -> dict:
        from ..agent.query_agent import QueryAgent
        from ..agent.tools import StoreMemoryClient
        store = self.store()
        with self._ask_lock:                   # one question at a time (a planner keeps per-question state)
            if self._agent is None:
                self._agent = QueryAgent(StoreMemoryClient(store), self.agent_params)
            return self._agent.ask(question, as_of=as_of, planner=planner or "").to_dict()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
