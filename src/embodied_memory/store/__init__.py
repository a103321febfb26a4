"""The memory store: records in SQLite (WAL) or on a fleet's PostgreSQL server, vectors in FAISS
(or Milvus).

``open_store(params)`` is the one way in; see :class:`MemoryStore` for the retrieval
functions the agent calls as tools (``call_tool`` checks their arguments against
``tool_args`` first) and ``insert_batch`` for writing.
"""
from .errors import (InsertResult, InvalidArgumentError, InvalidRecordError, StoreConfigError, StoreError,
                     StoreWriteError, UnknownPersonError)
from .memory_store import MemoryStore, open_store
from .params import StoreParams

__all__ = ["MemoryStore", "open_store", "StoreParams", "StoreError", "InvalidRecordError", "InvalidArgumentError",
           "StoreWriteError", "StoreConfigError", "UnknownPersonError", "InsertResult"]
