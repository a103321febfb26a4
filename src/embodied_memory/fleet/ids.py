"""A robot's own ids and the fleet's: what one robot names locally, qualified by its robot_id.

A robot's frame selector, perception and explorer name keyframes, episodes and people without
knowing of other robots (``run_20261207T0900/1765098000.000000000``, ``person_0003``); two
robots can mint the same.  On a fleet's server the memory node qualifies every id it stores:
observations and episodes as ``<robot_id>/<id>``, identities as ``<robot_id>.<id>`` (the prefix
row-level security checks), and strips its own prefix from what it tells its perception
(forgotten identities).  An id that is already qualified (it carries a robot's prefix: an
identity another robot enrolled, merged into by ``fleet reconcile``) passes unchanged.  With no
robot_id (a memory of its own) every id passes unchanged: the node uses one mechanism either way.
"""
from __future__ import annotations

from dataclasses import dataclass

EPISODE_ARGUMENTS = ("episode", "exclude_episode", "episode_id")   # query arguments naming an episode


@dataclass(frozen=True)
class FleetIds:
    robot_id: str

    def record(self, local_id: str) -> str:
        """An observation, keyframe or episode id in the fleet's memory."""
        if not self.robot_id or not local_id or local_id.startswith(f"{self.robot_id}/"):
            return local_id
        return f"{self.robot_id}/{local_id}"

    def identity(self, local_id: str) -> str:
        """A person's id in the fleet's memory ("" stays "": no identity)."""
        if not self.robot_id or not local_id or "." in local_id:   # qualified already (robot ids hold no '.')
            return local_id
        return f"{self.robot_id}.{local_id}"

    def qualify(self, obs) -> None:
        """An observation's ids (its own, keyframe, episode, its sightings' identities) in the
        fleet's memory, in place."""
        obs.observation_id, obs.keyframe_id, obs.episode_id = (self.record(obs.observation_id),
                                                               self.record(obs.keyframe_id), self.record(obs.episode_id))
        for sighting in obs.people:
            sighting.identity_id = self.identity(sighting.identity_id)

    def qualify_arguments(self, arguments: dict) -> None:
        """A query's episode arguments as the fleet's memory stores them, in place: a robot's peers
        (its explorer) name their own episodes (local: no '/'); one already qualified passes."""
        for key in EPISODE_ARGUMENTS:
            value = arguments.get(key)
            if isinstance(value, str) and value and "/" not in value:
                arguments[key] = self.record(value)

    def local_identity(self, fleet_id: str) -> str | None:
        """This robot's own name for a fleet identity id; None for another robot's."""
        if not self.robot_id:
            return fleet_id
        prefix = f"{self.robot_id}."
        return fleet_id[len(prefix):] if fleet_id.startswith(prefix) else None
