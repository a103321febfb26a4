"""Stats: what the memory holds (counts per table, vectors per index, rejections) and its size on disk."""
from __future__ import annotations


class StatsMixin:
    """Counts and sizes of :class:`MemoryStore`.

    Relies on: ``params``, ``data_dir``, ``rejections`` and ``_time_table`` (set by
    ``MemoryStore.__init__``); ``_conn``, ``on_server`` and ``location`` (records); ``_index``,
    ``VECTOR_KINDS`` and ``follow_other_writers`` (index_lifecycle)."""

    def observation_count(self) -> int:
        """Stored observations (a fleet's server: as of this process's last catch-up, no query)."""
        return len(self._time_table.ids)

    def bytes_on_disk(self) -> int:
        """The database, its WAL and the vector snapshots (images/ and identities/ not counted)."""
        return sum(p.stat().st_size for p in self.data_dir.iterdir() if p.is_file())

    def stats(self) -> dict:
        self.follow_other_writers()
        conn = self._conn()
        count = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
        t = conn.execute("SELECT MIN(t), MAX(t) FROM observations").fetchone()
        size = self.bytes_on_disk()
        robots = {r[0]: r[1] for r in conn.execute("SELECT robot_id, COUNT(*) FROM observations GROUP BY robot_id")
                  if r[0]}
        return {"backend": self.params.backend, "data_dir": str(self.data_dir.resolve()),
                **({"server": self.location, "robot_id": self.params.robot_id} if self.on_server else {}),
                **({"observations_per_robot": robots} if robots else {}),
                "episodes": count("SELECT COUNT(*) FROM episodes"),
                "observations": count("SELECT COUNT(*) FROM observations"),
                "regions": count("SELECT COUNT(*) FROM regions"),
                "person_sightings": count("SELECT COUNT(*) FROM sightings"),
                "identities": count("SELECT COUNT(*) FROM identities"),
                "rules": count("SELECT COUNT(*) FROM rules"),
                "bytes_on_disk": size, "oldest": t[0], "newest": t[1],
                "rejections": dict(self.rejections),
                "vectors": {k: self._index(k).count() for k in self.VECTOR_KINDS}}
