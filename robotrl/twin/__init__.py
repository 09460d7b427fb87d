"""Digital twin: real episodes back into simulation, and what fails back into training.

robot bag -> ``episode.load_episode`` -> ``replay.Twin`` (open loop, teacher forced, closed
loop; episodes x candidate physics as worlds of one BatchSim) -> ``metrics`` and ``report``
-> ``calibrate`` (mujoco.sysid) -> ``mine`` (failure regions over a task's scenario
parameters) -> a scenario file that training mixes into its resets. See README.md here.
"""
