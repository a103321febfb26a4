"""The store's errors and the result of a batch insert.

Every failure of a store call comes out as a :class:`StoreError` (never ``sqlite3.*``,
numpy or FAISS errors); ``kind`` names what went wrong for an error answer
(``success=false``, kind, message).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Optional


SERVER_UNREACHABLE = "ServerUnreachable"   # a StoreError's kind: a fleet's server away (a query may be retried)


class StoreError(RuntimeError):
    """The store cannot do what was asked (bad arguments, unavailable backend)."""

    def __init__(self, message: str = "", *, kind: Optional[str] = None):
        super().__init__(message)
        self.kind = kind or type(self).__name__


class InvalidRecordError(StoreError, ValueError):
    """A record was rejected before anything was written; nothing stored changed."""


class InvalidArgumentError(StoreError, ValueError):
    """A tool call's arguments do not match the tool's schema (store/tool_args.py); nothing
    reached SQLite or the vector indexes.  The message names the tool and the argument."""


class StoreWriteError(StoreError):
    """The data directory cannot be written (disk full, read-only, file-size limit).

    Transient: nothing was written by the failed call, what was stored before is intact and
    reads keep working; the caller should keep the record and retry later."""


class UnknownPersonError(StoreError, KeyError):
    """No identity with that id (or display name) is stored."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else "unknown person"


@dataclass
class InsertResult:
    """What :meth:`MemoryStore.insert_batch` did with each observation of a batch."""

    stored: list[str] = field(default_factory=list)        # observation ids written now
    duplicates: list[str] = field(default_factory=list)    # already stored (a re-send): not an error
    rejected: dict[str, str] = field(default_factory=dict)  # observation id -> reason ("kind: detail")
    sightings_dropped: int = 0                             # sightings of forgotten identities not stored

    @property
    def rejection_kinds(self) -> collections.Counter:
        return collections.Counter(reason.split(":", 1)[0] for reason in self.rejected.values())


class StoreConfigError(StoreError, ValueError):
    """The store cannot work as configured (a fleet login that is not the robot's, a password
    the server refuses): retrying will not help; fix the configuration."""
