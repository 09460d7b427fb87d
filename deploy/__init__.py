"""Robot-side runtime of robotrl (shipped as ``robotrl.deploy``): numpy, onnxruntime, cyclonedds, rosbags.

No torch and no mujoco here (``sim_robot`` imports robotrl's sim lazily, for rehearsals only).

* ``msgs``: ROS 2 message structs for Cyclone DDS (wire-compatible with ROS 2).
* ``transport``: the Transport contract; ``dds`` (Cyclone DDS) and ``ros2`` (rclpy) implement it.
* ``spec`` / ``runtime``: the exported policy (JSON spec + ONNX) and its onnxruntime runner.
* ``profile`` / ``params``: robot profiles (``configs/robot/*.yaml``) and the ROS 2 command line.
* ``observation`` / ``safety`` / ``outputs``: inputs to observation, the mode machine and safety
  chain, and the controller adapters.
* ``node``: ``robotrl-deploy``; ``sim_robot``: ``robotrl-sim-robot``; ``recorder``: rosbag2/MCAP episodes.

See deploy/README.md.
"""
