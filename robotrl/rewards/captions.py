"""Captions derived from simulator state, with paraphrased templates, for training the ``lit`` heads.

A task's caption source has three parts:

* ``sample_states(n, rng)``: draws ``n`` states and returns their rendered frames
  ``(n, H, W, 3)`` uint8 and the *measured* attributes of each state (read back from the
  simulator after placing it: heights, hand positions, ...), never the sampling intent.
* ``attributes -> class key``: a discrete description (``("kneeling", "raised")``).
* ``caption(key, rng, split)``: a sentence for the key, drawn from ``split="seen"``
  wordings (used in training) or ``split="unseen"`` wordings (held out to test paraphrase
  generalisation). Subjects, phrases and templates are all varied, so the text side is not
  a lookup table.

Sources (``SOURCES``): ``humanoid`` (posture x arms, posed in one MjData) and ``driving``
(lane position x what is ahead or hit, measured in the running driving env; see
``robotrl.rewards.captions_driving``). ``WORDINGS`` and ``CLASSES`` hold each task's paraphrase
pools and class keys.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

log = logging.getLogger(__name__)

Key = tuple[str, ...]


@dataclass(frozen=True)
class Wordings:
    """Paraphrase pools per attribute value, split into seen (training) and unseen (held-out) wordings."""

    subjects: dict[str, tuple[str, ...]]
    templates: dict[str, tuple[str, ...]]
    phrases: dict[str, dict[str, tuple[str, ...]]]  # attribute value -> split -> phrases


HUMANOID_WORDINGS = Wordings(
    subjects={"seen": ("a humanoid robot", "a robot", "the humanoid", "a bipedal robot"),
              "unseen": ("a two-legged machine", "an android")},
    templates={"seen": ("{s} {p}, {a}", "{s} that is {p} {a}", "a rendering of {s} {p} {a}", "{s} {p} {a}"),
               "unseen": ("a picture showing {s} {p} {a}", "here {s} is {p} {a}")},
    phrases={
        "standing": {"seen": ("standing", "standing upright", "on its feet"), "unseen": ("upright on two legs",)},
        "crouching": {"seen": ("crouching", "squatting", "bending its knees low"), "unseen": ("in a deep squat",)},
        "kneeling": {"seen": ("kneeling", "kneeling on the ground", "on its knees"),
                     "unseen": ("resting on both knees",)},
        "raised": {"seen": ("with both arms raised", "with both arms up", "arms lifted above its head"),
                   "unseen": ("hands held high over the head",)},
        "one_raised": {"seen": ("with one arm raised", "raising a single arm"), "unseen": ("one hand up in the air",)},
        "down": {"seen": ("with its arms down", "arms hanging by its sides"), "unseen": ("hands lowered",)},
        "out": {"seen": ("with its arms stretched out", "arms held out"), "unseen": ("arms extended sideways",)},
    },
)

DRIVING_WORDINGS = Wordings(
    subjects={"seen": ("the car", "a small robot car", "the RC car", "the vehicle"),
              "unseen": ("the little automobile", "a toy car")},
    # "{a}" alone comes first: the CLG prompts ("the road is clear", "two cars have collided") are
    # seen sentences; class_prompt uses the last template, which names the lane too
    templates={"seen": ("{a}", "{s} {p}, {a}", "a chase-camera view of {s} {p}: {a}", "{s} {p} and {a}"),
               "unseen": ("{a}, seen from behind {s} {p}", "a picture from behind {s} {p}; {a}")},
    phrases={
        "left": {"seen": ("on the left side of the lane", "driving near the left edge", "keeping left"),
                 "unseen": ("hugging the left kerb",)},
        "centre": {"seen": ("in the middle of the lane", "driving on the centre line", "centred in its lane"),
                   "unseen": ("squarely between the kerbs",)},
        "right": {"seen": ("on the right side of the lane", "driving near the right edge", "keeping right"),
                  "unseen": ("hugging the right kerb",)},
        "any": {"seen": ("on the road", "on the track"), "unseen": ("out on the course",)},
        "clear": {"seen": ("the road is clear", "nothing is ahead on the road", "with an empty road in front"),
                  "unseen": ("no traffic in front of it",)},
        "car_ahead": {"seen": ("another car is ahead", "a car is driving in front", "with a vehicle ahead"),
                      "unseen": ("following a slower car",)},
        "obstacle_ahead": {"seen": ("an obstacle is ahead", "a barrel blocks the road ahead",
                                    "with an obstacle in front"), "unseen": ("something is in the way",)},
        "collided_car": {"seen": ("two cars have collided", "it has crashed into another car", "a car crash"),
                         "unseen": ("the vehicles have hit each other",)},
        "collided_obstacle": {"seen": ("it has hit an obstacle", "it crashed into an obstacle"),
                              "unseen": ("it ran into a barrier",)},
    },
)
LANES = ("left", "centre", "right")
AHEAD = ("clear", "car_ahead", "obstacle_ahead")
COLLISIONS = ("collided_car", "collided_obstacle")

POSTURES = ("standing", "crouching", "kneeling")
ARMS = ("raised", "one_raised", "down", "out")


def caption(key: Key, rng: np.random.Generator, split: str = "seen", wordings: Wordings = HUMANOID_WORDINGS) -> str:
    """A paraphrased sentence for ``key`` (humanoid: ``(posture, arms)``; driving: ``(lane, scene)``) from a split."""
    posture, arms = key
    pick = lambda pool: pool[int(rng.integers(len(pool)))]  # noqa: E731
    return pick(wordings.templates[split]).format(
        s=pick(wordings.subjects[split]), p=pick(wordings.phrases[posture][split]),
        a=pick(wordings.phrases[arms][split]))


def class_prompt(key: Key, split: str = "seen", wordings: Wordings = HUMANOID_WORDINGS) -> str:
    """The canonical prompt of a class (the split's first subject and phrases in its last template)."""
    posture, arms = key
    return wordings.templates[split][-1].format(s=wordings.subjects[split][0],
                                                p=wordings.phrases[posture][split][0],
                                                a=wordings.phrases[arms][split][0])


# --- humanoid ------------------------------------------------------------------------------------
def humanoid_key(torso_z: float, knee_z: float, hand_rel_z: tuple[float, float]) -> Key | None:
    """``(posture, arms)`` from measured heights (m); ``None`` for ambiguous states (not used).

    ``hand_rel_z``: each hand's height above its shoulder.
    """
    if knee_z < 0.12 and torso_z < 1.05:
        posture = "kneeling"
    elif torso_z > 1.25 and knee_z > 0.35:
        posture = "standing"
    elif 0.75 < torso_z < 1.1 and knee_z > 0.2:
        posture = "crouching"
    else:
        return None
    raised = [h > 0.15 for h in hand_rel_z]
    if all(raised):
        arms = "raised"
    elif any(raised):
        arms = "one_raised"
    elif all(h < -0.3 for h in hand_rel_z):
        arms = "down"
    elif all(-0.15 < h < 0.1 for h in hand_rel_z):
        arms = "out"
    else:
        return None
    return posture, arms


def humanoid_pose_truth(sim: object) -> dict[str, torch.Tensor]:
    """Ground-truth pose of every world of a humanoid ``BatchSim``, by the thresholds of ``humanoid_key``.

    Returns ``(nsim,)`` tensors: ``kneeling`` and ``arms_raised`` (bool), ``arms_height`` (the
    lower hand's height above its shoulder, m). A metric for evaluation: no reward reads it.
    """
    m = sim.model  # type: ignore[attr-defined]
    xpos, gxpos = sim.bind("xpos"), sim.bind("geom_xpos")  # type: ignore[attr-defined]
    body = lambda name: m.body(name).id  # noqa: E731
    torso_z = xpos[:, body("torso"), 2]
    knee_z = torch.minimum(xpos[:, body("right_shin"), 2], xpos[:, body("left_shin"), 2])
    hands = torch.stack([gxpos[:, m.geom(f"{s}_hand").id, 2] - xpos[:, body(f"{s}_upper_arm"), 2]
                         for s in ("right", "left")], 1)
    return {"kneeling": (knee_z < 0.12) & (torso_z < 1.05), "arms_raised": (hands > 0.15).all(1),
            "arms_height": hands.amin(1).float()}


_LEG_MODES = {  # (hip_y range, knee range): sampling priors only; captions come from measured heights
    "stand": ((-0.15, 0.1), (-0.3, -0.04)),
    "crouch": ((-1.5, -0.8), (-2.2, -1.4)),
    "kneel": ((-0.3, 0.2), (-2.6, -1.9)),
}
_LOW_GEOMS = ("right_foot", "left_foot", "right_shin1", "left_shin1", "right_thigh1", "left_thigh1", "butt")


def humanoid_pose(model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
    """Write a random pose into ``data``, dropped so that its lowest geom touches the floor."""
    from robotrl.tasks.humanoid import constants as C

    data.qpos[:] = model.qpos0
    data.qvel[:] = 0.0
    yaw = rng.uniform(-np.pi, np.pi)
    data.qpos[3:7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
    hip, knee = _LEG_MODES[("stand", "crouch", "kneel")[int(rng.integers(3))]]
    setv = lambda name, v: data.qpos.__setitem__(model.jnt_qposadr[model.joint(name).id], v)  # noqa: E731
    for j in C.JOINTS:
        jid = model.joint(j).id
        lo, hi = model.jnt_range[jid]
        if j.startswith(("right_shoulder", "left_shoulder", "right_elbow", "left_elbow")):
            setv(j, rng.uniform(lo, hi))
        elif j.startswith("abdomen"):
            setv(j, rng.uniform(0.2 * lo, 0.2 * hi))
    for side in ("right", "left"):
        setv(f"{side}_hip_y", rng.uniform(*hip) + rng.normal(0, 0.05))
        setv(f"{side}_knee", np.clip(rng.uniform(*knee), -2.79, -0.04))
        setv(f"{side}_hip_x", rng.uniform(-0.2, 0.05))
    mujoco.mj_kinematics(model, data)
    low = min(data.geom(g).xpos[2] - model.geom_size[model.geom(g).id, 0] for g in _LOW_GEOMS)
    data.qpos[2] -= low
    mujoco.mj_forward(model, data)


def humanoid_measure(data: mujoco.MjData) -> tuple[float, float, tuple[float, float]]:
    """Measured ``(torso_z, lowest knee z, (right, left) hand height above shoulder)``."""
    knee = min(data.body("right_shin").xpos[2], data.body("left_shin").xpos[2])
    hands = tuple(float(data.geom(f"{s}_hand").xpos[2] - data.body(f"{s}_upper_arm").xpos[2])
                  for s in ("right", "left"))
    return float(data.body("torso").xpos[2]), float(knee), hands  # type: ignore[return-value]


def humanoid_samples(n: int, rng: np.random.Generator, size: tuple[int, int] = (96, 96)
                     ) -> tuple[np.ndarray, list[Key]]:
    """``n`` rendered humanoid frames ``(n, H, W, 3)`` uint8 from the ``track`` camera and their class keys.

    Poses whose measured state is ambiguous (``humanoid_key`` is ``None``) are redrawn, and so are
    poses of a class that already has its share ``ceil(n / classes)``, so classes are balanced.
    """
    from robotrl.sim.render import BatchRenderer
    from robotrl.tasks.humanoid import constants as C

    model = mujoco.MjModel.from_xml_path(C.model_path())
    data = mujoco.MjData(model)
    renderer = BatchRenderer(model, size=size, lean=True)
    frames: list[np.ndarray] = []
    keys: list[Key] = []
    quota = -(-n // len(CLASSES["humanoid"]))  # balanced classes: rare poses (both arms up) are redrawn for
    counts: dict[Key, int] = {}
    draws = 0
    try:
        while len(frames) < n:
            draws += 1
            humanoid_pose(model, data, rng)
            key = humanoid_key(*humanoid_measure(data))
            if key is None or (counts.get(key, 0) >= quota and draws < 200 * n):
                continue
            counts[key] = counts.get(key, 0) + 1
            frames.append(renderer.render_data(model, data, "track"))
            keys.append(key)
    finally:
        renderer.close()
    return np.stack(frames), keys


def driving_samples(n: int, rng: np.random.Generator, size: tuple[int, int] = (96, 96)
                    ) -> tuple[np.ndarray, list[Key]]:
    """``n`` chase-camera driving frames and their ``(lane, scene)`` keys (``captions_driving``)."""
    from robotrl.rewards.captions_driving import driving_samples as sample

    return sample(n, rng, size)


SOURCES: dict[str, Callable[..., tuple[np.ndarray, list[Key]]]] = {"humanoid": humanoid_samples,
                                                                    "driving": driving_samples}
CLASSES: dict[str, list[Key]] = {"humanoid": [(p, a) for p in POSTURES for a in ARMS],
                                 "driving": [*[(lane, a) for lane in LANES for a in AHEAD],
                                             *[("any", c) for c in COLLISIONS]]}
WORDINGS: dict[str, Wordings] = {"humanoid": HUMANOID_WORDINGS, "driving": DRIVING_WORDINGS}
