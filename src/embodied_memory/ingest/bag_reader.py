"""Reading rosbag2 files (sqlite3 or MCAP) with the pure-Python ``rosbags``: topic checks and
clear errors for corrupt, truncated or unknown input.

MCAP files are read chunk by chunk here (on rosbags' parsed summary), so that damage in the
middle of a file is found, reported and skipped instead of silently dropping the rest of a
chunk: every message is looked up through its chunk's message index and checked (record
header, channel, time, CDR header) before it is yielded, and every chunk's recovered message
count is compared with the count its index promises.  Each damaged chunk becomes a
:class:`CorruptChunk` in :attr:`Bag.corrupt_chunks` (file, byte position, messages lost).
Limits: a file whose summary or footer is damaged cannot be opened (a clear
:class:`BagError`); damage confined to a message's payload in an uncompressed chunk without a
CRC (rosbags writes none) cannot be seen at this level.
"""
from __future__ import annotations

import heapq
import logging
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

log = logging.getLogger(__name__)


class BagError(RuntimeError):
    """The bag cannot be read; the message says why."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    msgtype: str
    count: int


@dataclass(frozen=True)
class CorruptChunk:
    """An unreadable part of a bag file."""
    file: str                       # the storage file (.mcap) it is in
    offset: int                     # byte position in that file of the first damage found
    chunk_offset: int               # byte position of the chunk record (-1: not in a chunk)
    kind: str                       # "chunk" (all of it unreadable) | "records" (some records) | "file"
    damaged_records: int            # records found damaged (a whole chunk counts as 1)
    messages_lost: Optional[int]    # of the topics read; None where it cannot be known
    reason: str

    def describe(self) -> str:
        lost = "an unknown number of messages" if self.messages_lost is None else f"{self.messages_lost} message(s)"
        where = f"byte {self.offset}" + (f" (chunk at byte {self.chunk_offset})" if self.chunk_offset >= 0
                                         and self.chunk_offset != self.offset else "")
        what = {"chunk": "unreadable chunk", "records": f"{self.damaged_records} damaged record(s)",
                "file": "unreadable data"}.get(self.kind, self.kind)
        return f"{self.file} @ {where}: {what}, {lost} lost ({self.reason})"


@dataclass
class BagMessage:
    topic: str
    msgtype: str
    stamp_ns: int          # recording time
    rawdata: bytes         # CDR as stored
    connection: object


class Bag:
    """``with Bag(path) as bag: for msg in bag.messages([...])``"""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f"{self.path}: no such bag (a rosbag2 directory, or an .mcap / .db3 file)")
        self._reader = None
        self.corrupt_chunks: list[CorruptChunk] = []   # filled while messages() reads

    def __enter__(self) -> "Bag":
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
        try:
            self._reader = AnyReader([self.path], default_typestore=get_typestore(Stores.ROS2_KILTED))
            self._reader.open()
        except Exception as exc:  # noqa: BLE001 - rosbags raises several kinds
            raise BagError(f"{self.path}: cannot open as rosbag2 ({type(exc).__name__}: {exc})") from exc
        return self

    def __exit__(self, *exc) -> None:
        if self._reader is not None:
            self._reader.close()

    @property
    def topics(self) -> dict[str, TopicInfo]:
        out: dict[str, TopicInfo] = {}
        for c in self._reader.connections:
            prev = out.get(c.topic)
            out[c.topic] = TopicInfo(c.topic, c.msgtype, (prev.count if prev else 0) + (c.msgcount or 0))
        return out

    @property
    def duration_s(self) -> float:
        return max(0.0, (self._reader.end_time - self._reader.start_time) / 1e9)

    @property
    def start_ns(self) -> int:
        return self._reader.start_time

    def check_topics(self, wanted: list[str], required: list[str]) -> list[str]:
        """The wanted topics present in the bag; a missing required one is an error."""
        topics = self.topics
        missing = [t for t in required if t and t not in topics]
        if missing:
            raise BagError(f"{self.path}: topic(s) {', '.join(missing)} not in the bag; it has: "
                           + ", ".join(f"{t.name} ({t.msgtype}, {t.count})" for t in topics.values()))
        absent = [t for t in wanted if t and t not in topics and t not in required]
        for t in absent:
            log.warning("%s: optional topic %s is not in the bag", self.path.name, t)
        return [t for t in wanted if t in topics]

    @property
    def messages_lost(self) -> Optional[int]:
        """Messages lost to damage so far (None: some loss cannot be counted)."""
        counts = [c.messages_lost for c in self.corrupt_chunks]
        return None if any(n is None for n in counts) else sum(counts)

    def messages(self, topics: Optional[list[str]] = None) -> Iterator[BagMessage]:
        """The messages of ``topics`` (all: None) in time order.  Damaged parts of an MCAP file
        are skipped and recorded in :attr:`corrupt_chunks`; other read errors raise
        :class:`BagError`."""
        conns = [c for c in self._reader.connections if topics is None or c.topic in topics]
        storages = self._mcap_storages()
        try:
            if storages is None:
                for conn, stamp, raw in self._reader.messages(connections=conns):
                    yield BagMessage(conn.topic, conn.msgtype, stamp, raw, conn)
                return
            sources = []
            for storage in storages:
                channels = {}
                for sc in storage.connections:
                    match = next((c for c in conns if c.topic == sc.topic and c.msgtype == sc.msgtype), None)
                    if match is not None:
                        channels[sc.id] = match
                if channels:
                    sources.append(_checked_mcap(storage, channels, self._damaged))
            for stamp, _seq, conn, raw in heapq.merge(*sources, key=lambda m: (m[0], m[1])):
                yield BagMessage(conn.topic, conn.msgtype, stamp, raw, conn)
        except BagError:
            raise
        except Exception as exc:  # noqa: BLE001 - truncated chunk, bad CRC, ...
            raise BagError(f"{self.path}: the bag is corrupt or truncated ({type(exc).__name__}: {exc})") from exc

    def _damaged(self, corrupt: CorruptChunk) -> None:
        self.corrupt_chunks.append(corrupt)
        log.error("%s: corrupt bag data: %s", self.path.name, corrupt.describe())

    def _mcap_storages(self) -> Optional[list]:
        """rosbags' MCAP storage readers of this bag, when every file is MCAP without
        per-message compression (else None: rosbags reads it)."""
        try:
            from rosbags.rosbag2.storage_mcap import McapReader
        except ImportError:  # pragma: no cover - another rosbags layout
            return None
        out = []
        for reader in getattr(self._reader, "readers", []):
            storage = getattr(reader, "storage", None)
            inner = getattr(storage, "storages", None)
            if inner is not None:
                if getattr(storage.metadata, "compression_mode", None) == "message":
                    return None
                out.extend(inner)
            else:
                out.append(storage)
        if not out or not all(isinstance(s, McapReader) and getattr(s, "bio", None) is not None for s in out):
            return None
        return out

    def deserialize(self, msg: BagMessage):
        try:
            return self._reader.deserialize(msg.rawdata, msg.msgtype)
        except Exception as exc:  # noqa: BLE001
            raise BagError(f"{self.path}: cannot decode a {msg.msgtype} on {msg.topic} ({exc})") from exc


# -- MCAP, read defensively ------------------------------------------------------------------
# record layouts: https://mcap.dev/spec (opcodes: 0x03 schema, 0x04 channel, 0x05 message,
# 0x06 chunk, 0x07 message index)
_CHUNK_HEAD = struct.Struct("<BQQQQI")      # opcode, record length, start, end, uncompressed size, crc
_MESSAGE_HEAD = struct.Struct("<BQHIQQ")    # opcode, record length, channel, sequence, log, publish time
_INDEX_HEAD = struct.Struct("<BQHI")        # opcode, record length, channel, entries length
_CDR_KINDS = {0x00, 0x01, 0x02, 0x03, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B}  # encapsulation ids


class _Damage(Exception):
    def __init__(self, offset: int, reason: str):
        super().__init__(reason)
        self.offset, self.reason = offset, reason


def _decompress(data: bytes, compression: str, size: int) -> bytes:
    if compression == "":
        return data
    if compression == "zstd":
        try:
            from compression import zstd  # Python >= 3.14
        except ImportError:
            from backports import zstd
        return zstd.decompress(data)
    if compression == "lz4":
        from lz4.frame import decompress
        return decompress(data)
    raise ValueError(f"unsupported chunk compression {compression!r}")


def _read_chunk(bio, chunk) -> tuple[bytes, int, list[_Damage]]:
    """The uncompressed records of a chunk, the file offset of its data, and the damage seen
    on the way that still let the data be read (header, CRC)."""
    problems: list[_Damage] = []
    start = chunk.chunk_start_offset
    bio.seek(start)
    head = bio.read(_CHUNK_HEAD.size)
    if len(head) < _CHUNK_HEAD.size:
        raise _Damage(start, "the file ends inside the chunk")
    op, length, t0, t1, usize, crc = _CHUNK_HEAD.unpack(head)
    header_ok = (op == 0x06 and length == chunk.chunk_length - 9 and usize == chunk.uncompressed_size
                 and t0 == chunk.message_start_time and t1 == chunk.message_end_time)
    if not header_ok:
        problems.append(_Damage(start, "chunk header does not match the chunk index"))
    data_offset = start + _CHUNK_HEAD.size + 4 + len(chunk.compression.encode()) + 8
    bio.seek(data_offset)
    stored = bio.read(chunk.compressed_size)
    if len(stored) != chunk.compressed_size:
        raise _Damage(start, "the file ends inside the chunk")
    try:
        data = _decompress(stored, chunk.compression, chunk.uncompressed_size)
    except Exception as exc:  # noqa: BLE001 - zstd/lz4 raise their own kinds
        raise _Damage(start, f"cannot decompress the {chunk.compression} chunk ({type(exc).__name__}: {exc})") from exc
    if len(data) != chunk.uncompressed_size:
        raise _Damage(start, f"chunk decompresses to {len(data)} bytes, its index says {chunk.uncompressed_size}")
    if header_ok and crc and zlib.crc32(data) != crc:
        problems.append(_Damage(start, "chunk CRC mismatch"))
    return data, data_offset, problems


def _read_message_index(bio, chunk, channel: int, size: int) -> list[tuple[int, int]]:
    """(log time, offset in the chunk) of a channel's messages, from its message index record."""
    offset = chunk.message_index_offsets.get(channel)
    count = chunk.channel_count.get(channel, 0)
    if offset is None:
        raise _Damage(chunk.chunk_start_offset, f"no message index for channel {channel}")
    bio.seek(offset)
    head = bio.read(_INDEX_HEAD.size)
    if len(head) < _INDEX_HEAD.size:
        raise _Damage(offset, "the file ends inside a message index")
    op, length, ch, n = _INDEX_HEAD.unpack(head)
    if op != 0x07 or ch != channel or n != 16 * count or length != 6 + n:
        raise _Damage(offset, "damaged message index")
    body = bio.read(n)
    if len(body) != n:
        raise _Damage(offset, "the file ends inside a message index")
    entries = list(struct.iter_unpack("<QQ", body))
    if any(off >= size or not chunk.message_start_time <= t <= chunk.message_end_time for t, off in entries):
        raise _Damage(offset, "damaged message index")
    return entries


def _message_at(data: bytes, off: int, channel: Optional[int] = None, stamp: Optional[int] = None):
    """(channel, log time, payload, end) of the message record at ``off``, or a reason string."""
    if off + _MESSAGE_HEAD.size > len(data):
        return "record runs past the end of its chunk"
    op, length, ch, _seq, log_time, _pub = _MESSAGE_HEAD.unpack_from(data, off)
    if op != 0x05:
        return f"expected a message record, found opcode 0x{op:02x}"
    end = off + 9 + length
    if length < 22 + 4 or end > len(data):
        return f"message record length {length} does not fit its chunk"
    if (channel is not None and ch != channel) or (stamp is not None and log_time != stamp):
        return "message record does not match the message index"
    payload = data[off + _MESSAGE_HEAD.size:end]
    if payload[0] != 0 or payload[1] not in _CDR_KINDS:
        return "message payload has no CDR header"
    return ch, log_time, payload, end


def _scan_chunk(data: bytes, channels, chunk) -> tuple[list[tuple[int, int, int, bytes]], Optional[_Damage]]:
    """Walk a chunk's records from the start (no usable index): the messages up to the first
    damaged record, and that damage."""
    out, off = [], 0
    while off < len(data):
        op = data[off]
        if op == 0x05:
            got = _message_at(data, off)
            if isinstance(got, str):
                return out, _Damage(off, got)
            ch, log_time, payload, end = got
            if not chunk.message_start_time <= log_time <= chunk.message_end_time:
                return out, _Damage(off, "message time outside its chunk's range")
            if ch in channels:
                out.append((log_time, off, ch, payload))
            off = end
        elif op in (0x03, 0x04) and off + 9 <= len(data):
            (length,) = struct.unpack_from("<Q", data, off + 1)
            if off + 9 + length > len(data):
                return out, _Damage(off, f"record length {length} does not fit its chunk")
            off += 9 + length
        else:
            return out, _Damage(off, f"unexpected opcode 0x{op:02x} in a chunk")
    return out, None


def _chunk_messages(storage, chunk, order: int, channels: dict, report) -> Iterator[tuple]:
    """One chunk's messages of ``channels`` in time order; damage goes to ``report``."""
    yield (chunk.message_start_time, (order, -1), None, None)  # read the chunk when the merge gets here
    name = Path(str(storage.path)).name
    wanted = [cid for cid in channels if chunk.channel_count.get(cid)]
    expected = sum(chunk.channel_count[cid] for cid in wanted)
    bio = storage.bio
    try:
        data, data_offset, problems = _read_chunk(bio, chunk)
    except _Damage as damage:
        report(CorruptChunk(name, damage.offset, chunk.chunk_start_offset, "chunk", 1, expected, damage.reason))
        return
    uncompressed = chunk.compression == ""

    def at(off: int) -> int:  # a chunk-relative offset as a byte position in the file
        return data_offset + off if uncompressed else chunk.chunk_start_offset

    found: list[tuple[int, int, int, bytes]] = []
    unindexed = []
    for cid in wanted:
        try:
            entries = _read_message_index(bio, chunk, cid, len(data))
        except _Damage as damage:
            problems.append(damage)
            unindexed.append(cid)
            continue
        for stamp, off in entries:
            got = _message_at(data, off, cid, stamp)
            if isinstance(got, str):
                problems.append(_Damage(at(off), got))
            else:
                found.append((stamp, off, cid, got[2]))
    if unindexed:
        scanned, damage = _scan_chunk(data, set(unindexed), chunk)
        found += scanned
        if damage is not None:
            problems.append(_Damage(at(damage.offset), damage.reason))
    lost = max(0, expected - len(found))
    if problems or lost:
        first = min(problems, key=lambda d: d.offset) if problems else _Damage(chunk.chunk_start_offset,
                                                                               "fewer messages than indexed")
        report(CorruptChunk(name, first.offset, chunk.chunk_start_offset, "records", max(1, len(problems)),
                            lost, first.reason))
    found.sort(key=lambda m: (m[0], m[1]))
    for stamp, off, cid, payload in found:
        yield (stamp, (order, off), channels[cid], payload)


def _checked_mcap(storage, channels: dict, report) -> Iterator[tuple]:
    """(log time, order key, connection, raw) of one MCAP file's messages of ``channels``
    (storage channel id -> connection), in time order."""
    if not storage.chunks:  # an unchunked file: rosbags scans it; damage ends the scan
        conns = [c for c in storage.connections if c.id in channels]
        seq = 0
        try:
            for conn, stamp, raw in storage.messages(conns):
                seq += 1
                yield (stamp, (0, seq), channels[conn.id], raw)
        except Exception as exc:  # noqa: BLE001
            report(CorruptChunk(Path(str(storage.path)).name, storage.bio.tell(), -1, "file", 1, None,
                                f"{type(exc).__name__}: {exc}; the rest of the file is not read"))
        return
    sources = [_chunk_messages(storage, chunk, i, channels, report)
               for i, chunk in enumerate(storage.chunks)
               if any(chunk.channel_count.get(cid) for cid in channels)]
    for item in heapq.merge(*sources, key=lambda m: (m[0], m[1])):
        if item[2] is not None:
            yield item
