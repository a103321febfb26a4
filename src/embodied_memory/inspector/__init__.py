"""The memory inspector: a local web app to see, search, correct and forget what the robot
remembers (``embodied-memory inspect``)."""
