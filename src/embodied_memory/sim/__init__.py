"""Simulated long-horizon episodes (MiniWorld): worlds, people with routines, bags, ground truth, questions."""
