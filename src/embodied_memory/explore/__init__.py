"""Exploration with episodic and semantic memory (HIMM): occupancy maps, frontiers, planning,
map rendering, episodic recall, frontier pruning, rule extraction, cognitive states, the explorer."""
