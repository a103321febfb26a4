"""Evaluation: run planners and ablations on simulated episodes, score, report."""
