"""The store's SQLite statements as the fleet backend sends them to PostgreSQL (no server needed)."""
import pytest

from embodied_memory.store.postgres import Schema, schema_statements, translate
from embodied_memory.store.records import _SCHEMA

SCHEMA = Schema(_SCHEMA)


@pytest.mark.parametrize("sqlite,postgres", [
    ("SELECT id FROM observations WHERE t >= ? AND waypoint_id=?",
     "SELECT id FROM observations WHERE t >= %s AND waypoint_id=%s"),
    ("SELECT 1 WHERE a=?1 AND b=?2 AND c=?1", "SELECT 1 WHERE a=%(p1)s AND b=%(p2)s AND c=%(p1)s"),
    ("SELECT id FROM observations WHERE description LIKE ? ESCAPE '\\'",
     "SELECT id FROM observations WHERE description ILIKE %s ESCAPE '\\'"),
    ("SELECT x FROM t WHERE d LIKE '%a?%' AND y=?", "SELECT x FROM t WHERE d ILIKE '%%a?%%' AND y=%s"),
    ("UPDATE episodes SET end=MAX(COALESCE(end, 0), ?), start=MIN(start, ?) WHERE episode_id=?",
     'UPDATE episodes SET "end"=GREATEST(COALESCE("end", 0), %s), start=LEAST(start, %s) WHERE episode_id=%s'),
    ("SELECT MAX(t), MIN(t) FROM observations", "SELECT MAX(t), MIN(t) FROM observations"),
    ("SELECT CASE WHEN a THEN 'end' ELSE b END, end FROM episodes",
     "SELECT CASE WHEN a THEN 'end' ELSE b END, \"end\" FROM episodes"),
    ("SELECT group_concat(obs) FROM sightings", "SELECT string_agg(CAST(obs AS TEXT), ',') FROM sightings"),
    ("SELECT id, t FROM observations INDEXED BY obs_t", "SELECT id, t FROM observations"),
    ("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
     "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING"),
    ("INSERT OR REPLACE INTO identity_aliases(alias_id, identity_id) VALUES (?, ?)",
     "INSERT INTO identity_aliases(alias_id, identity_id) VALUES (%s, %s) ON CONFLICT (alias_id) DO UPDATE SET "
     "identity_id=EXCLUDED.identity_id"),
    ("INSERT OR REPLACE INTO summaries(identity_id, day, text, sightings, created) VALUES (?,?,?,?,?)",
     "INSERT INTO summaries(identity_id, day, text, sightings, created) VALUES (%s,%s,%s,%s,%s) ON CONFLICT "
     "(identity_id, day) DO UPDATE SET text=EXCLUDED.text, sightings=EXCLUDED.sightings, created=EXCLUDED.created"),
])
def test_statements(sqlite, postgres):
    assert translate(sqlite, SCHEMA, "?" in sqlite)[0] == postgres


def test_an_insert_returns_its_new_row_id_and_pragmas_go():
    sql, returns_id = translate("INSERT INTO sightings(obs, t) VALUES (?, ?)", SCHEMA, True)
    assert sql.endswith(" RETURNING id") and returns_id
    assert translate("INSERT INTO meta(key, value) VALUES (?, ?)", SCHEMA, True)[1] is False
    assert translate("PRAGMA journal_mode=WAL", SCHEMA, False)[0] == ""
    assert "pg_advisory_xact_lock" in translate("BEGIN IMMEDIATE", SCHEMA, False)[0]


def test_the_schema_in_postgresql_types():
    ddl = "\n".join(schema_statements(_SCHEMA))
    assert "BLOB" not in ddl and " REAL" not in ddl and "VIRTUAL" not in ddl
    assert "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY" in ddl      # ids from the server only
    assert '"end" DOUBLE PRECISION' in ddl and "CREATE TABLE IF NOT EXISTS obs_xy(id BIGINT PRIMARY KEY" in ddl
