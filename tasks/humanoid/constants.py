"""Humanoid robot constants.

The model is gymnasium's humanoid MJCF, loaded from the installed ``gymnasium`` package at
run time (never copied into this repository).
"""

from __future__ import annotations

import importlib.util
import os

ROOT_BODY = "torso"
HEALTHY_Z = (0.8, 2.1)
INIT_Z = 1.4
JOINTS = (
    "abdomen_y", "abdomen_z", "abdomen_x",
    "right_hip_x", "right_hip_z", "right_hip_y", "right_knee",
    "left_hip_x", "left_hip_z", "left_hip_y", "left_knee",
    "right_shoulder1", "right_shoulder2", "right_elbow",
    "left_shoulder1", "left_shoulder2", "left_elbow",
)


def model_path() -> str:
    """Path of ``humanoid.xml`` inside the installed gymnasium package."""
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or spec.origin is None:
        raise ImportError("task=humanoid loads its MJCF from gymnasium: pip install gymnasium")
    path = os.path.join(os.path.dirname(spec.origin), "envs", "mujoco", "assets", "humanoid.xml")
    if not os.path.exists(path):
        raise FileNotFoundError(f"gymnasium is installed but has no humanoid model at {path}")
    return path
