"""Ingest: bag replay, sensor synchronisation, keyframe selection."""
