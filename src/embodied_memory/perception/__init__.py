"""Perception backends (embedders, detectors, faces, re-ID, describer), chosen by config name."""
