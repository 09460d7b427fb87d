"""Digital twin: real episodes back into simulation, and what fails back into training.

robot bag -> ``episode.load_episode`` -> ``replay.Twin`` (open loop, teacher forced, closed
loop; episodes x candidate physics as worlds of one BatchSim) -> ``metrics`` and ``report``
-> ``calibrate`` (mujoco.sysid) -> ``mine`` (failure regions over a task's scenario
parameters; ``regions`` and ``retest`` hold its region sets and fresh-draw re-test) -> a scenario
file that training mixes into its resets -> ``select`` (the retraining's checkpoint to ship, chosen on
fresh validation draws). See README.md here.
"""
