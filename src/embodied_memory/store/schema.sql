CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes(
  episode_id TEXT PRIMARY KEY, start REAL NOT NULL, end REAL, name TEXT, world TEXT,
  last_stamp REAL NOT NULL, robot_id TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS observations(
  id INTEGER PRIMARY KEY,                      -- vector id in the indexes
  observation_id TEXT NOT NULL UNIQUE,
  t REAL NOT NULL, episode_id TEXT NOT NULL, keyframe_id TEXT, segment_id INTEGER,
  waypoint_id TEXT, x REAL, y REAL, z REAL, yaw REAL, frame_id TEXT,
  description TEXT, description_json TEXT, image_path TEXT,
  persons TEXT,                                -- identity ids seen, comma separated
  text_emb BLOB, image_emb BLOB,
  robot_id TEXT NOT NULL DEFAULT '');           -- the robot that saw it ('' = a one-robot memory)
CREATE INDEX IF NOT EXISTS obs_t ON observations(t);
CREATE INDEX IF NOT EXISTS obs_waypoint ON observations(waypoint_id, t);
CREATE INDEX IF NOT EXISTS obs_episode ON observations(episode_id, t);
CREATE INDEX IF NOT EXISTS obs_robot ON observations(robot_id, t);
CREATE VIRTUAL TABLE IF NOT EXISTS obs_xy USING rtree(id, min_x, max_x, min_y, max_y);
CREATE TABLE IF NOT EXISTS regions(
  id INTEGER PRIMARY KEY, obs INTEGER NOT NULL, label TEXT, score REAL,
  x1 REAL, y1 REAL, x2 REAL, y2 REAL, emb BLOB,
  cx REAL, cy REAL, cz REAL, sx REAL, sy REAL, sz REAL);
CREATE INDEX IF NOT EXISTS regions_obs ON regions(obs);
CREATE TABLE IF NOT EXISTS sightings(
  id INTEGER PRIMARY KEY, obs INTEGER NOT NULL, identity_id TEXT, t REAL NOT NULL,
  confidence REAL, detection_score REAL, x1 REAL, y1 REAL, x2 REAL, y2 REAL,
  face_box TEXT, face_emb BLOB, reid_emb BLOB, activity TEXT, clothing TEXT, crop_path TEXT,
  px REAL, py REAL, pz REAL, waypoint_id TEXT, track INTEGER);
CREATE INDEX IF NOT EXISTS sightings_identity ON sightings(identity_id, t);
CREATE INDEX IF NOT EXISTS sightings_identity_obs ON sightings(identity_id, obs);   -- a person filter reads only the index
CREATE INDEX IF NOT EXISTS sightings_t ON sightings(t);
CREATE INDEX IF NOT EXISTS sightings_obs ON sightings(obs);
CREATE INDEX IF NOT EXISTS sightings_track ON sightings(track, t) WHERE track IS NOT NULL AND identity_id IS NULL;
CREATE INDEX IF NOT EXISTS sightings_place ON sightings(waypoint_id, t);
CREATE TABLE IF NOT EXISTS identities(
  identity_id TEXT PRIMARY KEY, display_name TEXT NOT NULL DEFAULT '', created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS forgotten_identities(identity_id TEXT PRIMARY KEY, forgotten_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS summaries(
  identity_id TEXT NOT NULL, day TEXT NOT NULL, text TEXT NOT NULL, sightings INTEGER NOT NULL,
  created REAL NOT NULL, PRIMARY KEY(identity_id, day));
CREATE TABLE IF NOT EXISTS rules(
  rule_id TEXT PRIMARY KEY, kind TEXT, key TEXT, condition TEXT, action TEXT,
  episode_id TEXT, created REAL, emb BLOB);
CREATE TABLE IF NOT EXISTS occupancy_maps(
  episode_id TEXT PRIMARY KEY, resolution REAL, origin_x REAL, origin_y REAL,
  width INTEGER, height INTEGER, data BLOB, updated REAL);
CREATE TABLE IF NOT EXISTS identity_aliases(alias_id TEXT PRIMARY KEY, identity_id TEXT NOT NULL);
-- consolidation's merges and splits, one row per (source -> target) move: the sighting ids moved (JSON);
-- prior: the names and aliases the move changed (JSON {"names": {id: name}, "aliases": [alias ids]}), for undo
CREATE TABLE IF NOT EXISTS identity_changes(id INTEGER PRIMARY KEY, t REAL NOT NULL, kind TEXT NOT NULL,
  source TEXT NOT NULL, target TEXT NOT NULL, sightings TEXT NOT NULL, undone REAL, prior TEXT);
-- a fleet's server: files (keyframe images, crops) of records an operator deleted, left for the robot holding them
CREATE TABLE IF NOT EXISTS files_to_remove(robot_id TEXT NOT NULL, path TEXT NOT NULL, t REAL NOT NULL,
  PRIMARY KEY(robot_id, path));
-- per-waypoint summary kept by insert (the agent lists waypoints on every question)
CREATE TABLE IF NOT EXISTS waypoint_stats(
  waypoint_id TEXT PRIMARY KEY, n INTEGER NOT NULL, sx REAL NOT NULL, sy REAL NOT NULL, last REAL NOT NULL);
-- rows with a vector (a cheap count: every open checks the vector indexes against it)
CREATE INDEX IF NOT EXISTS obs_text_vec ON observations(id) WHERE text_emb IS NOT NULL;
CREATE INDEX IF NOT EXISTS obs_image_vec ON observations(id) WHERE image_emb IS NOT NULL;
