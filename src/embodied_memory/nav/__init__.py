"""Navigation: waypoints, a simulated base, and the bridge backends (graphnav | nav2 | sim)."""
