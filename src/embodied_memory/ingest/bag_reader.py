"""Reading rosbag2 files (sqlite3 or MCAP) with the pure-Python ``rosbags``: topic checks and
clear errors for corrupt, truncated or unknown input."""
from __future__ import annotations

import logging
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

    def messages(self, topics: Optional[list[str]] = None) -> Iterator[BagMessage]:
        conns = [c for c in self._reader.connections if topics is None or c.topic in topics]
        try:
            for conn, stamp, raw in self._reader.messages(connections=conns):
                yield BagMessage(conn.topic, conn.msgtype, stamp, raw, conn)
        except Exception as exc:  # noqa: BLE001 - truncated chunk, bad CRC, ...
            raise BagError(f"{self.path}: the bag is corrupt or truncated ({type(exc).__name__}: {exc})") from exc

    def deserialize(self, msg: BagMessage):
        try:
            return self._reader.deserialize(msg.rawdata, msg.msgtype)
        except Exception as exc:  # noqa: BLE001
            raise BagError(f"{self.path}: cannot decode a {msg.msgtype} on {msg.topic} ({exc})") from exc
