"""Policy export: ONNX plus a JSON spec for the robot-side runtime (``robotrl.deploy``)."""
