"""Typed configs of the ``reward`` Hydra group (``configs/reward/``) and of the encoders.

``reward=none`` (default) adds nothing. ``reward=vlm_rm reward.goal="a humanoid robot kneeling"
reward.baseline="a humanoid robot"`` adds the VLM-RM term; ``reward=clg`` adds VLM-RL's
contrasting-language-goal term. The term joins the task's named reward dict under ``term``
with weight ``scale``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

REWARD_KINDS = ("none", "vlm_rm", "clg")
MODES = ("async", "sync")


@dataclass
class EncoderConfig:
    """Which image-text encoder scores frames (``robotrl.rewards.encoders``).

    Attributes:
        backend: ``lit`` (offline, trained on this project's renders) or ``open_clip``.
        checkpoint: ``lit``: the ``.safetensors`` head artefact (empty: ``<encoder dir>/lit_<task>.safetensors``);
            ``open_clip``: a local checkpoint file of ``arch`` (required).
        arch: ``open_clip`` architecture name (``ViT-B-32``, ...); ignored when ``model_config`` is set.
        model_config: optional JSON file of a custom open_clip architecture; its file stem names it.
        task: the task whose ``lit`` artefact to load when ``checkpoint`` is empty.
        device: torch device of the encoder.
        batch_size: frames per forward pass.

    """

    backend: str = "lit"
    checkpoint: str = ""
    arch: str = "ViT-B-32"
    model_config: str = ""
    task: str = ""
    device: str = "cpu"
    batch_size: int = 64


@dataclass
class VLMRewardConfig:
    """A VLM reward term scored from rendered frames.

    Attributes:
        name: ``none``, ``vlm_rm`` or ``clg``.
        term: its name in the task's reward dict (empty: ``name``).
        scale: its weight.
        goal: VLM-RM goal prompt, or CLG positive goal ("the road is clear").
        baseline: VLM-RM baseline prompt ("a humanoid robot").
        negative: CLG negative goal ("two cars have collided").
        negatives: further CLG negative goals ("an obstacle is ahead"); each frame is scored against
            the closest of ``negative`` and these (``robotrl.rewards.vlm.clg_reward``).
        alpha: VLM-RM partial-projection strength (0: cosine similarity).
        threshold: CLG clip bound.
        v_max: CLG speed gating: ``> 0`` turns the term into VLM-RL's ``(1 - |v - r_clg v_max| / v_max) x``
            the task's soft factors (needs a task with ``v_fwd`` and ``factors``, e.g. driving).
        mode: ``async`` (the scorer thread runs beside the simulation; late rewards are written back
            before the update) or ``sync`` (each step waits for its scores).
        batch_size: frames per scoring batch (async).
        max_wait_s: score a partial batch after this wait (async).
        every: render and score every ``every`` control steps (the others get 0).
        camera: camera to render (empty: the task's ``eval_camera``).
        image_size: ``[height, width]`` of the scored renders.
        encoder: the image-text encoder.

    """

    name: str = "none"
    term: str = ""
    scale: float = 1.0
    goal: str = ""
    baseline: str = ""
    negative: str = ""
    negatives: list[str] = field(default_factory=list)
    alpha: float = 0.5
    threshold: float = 0.03
    v_max: float = 0.0
    mode: str = "async"
    batch_size: int = 64
    max_wait_s: float = 0.02
    every: int = 1
    camera: str = ""
    image_size: list[int] = field(default_factory=lambda: [96, 96])
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
