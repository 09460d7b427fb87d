"""Task contract: what a task folder (``tasks/<name>/``) provides to the generic VecEnv.

A task sees batched torch tensors only (first dimension = world, ``N = num_envs``), on
``sim.device``. It never checks for CUDA or for a backend: the sim decides that.

The env calls the hooks in this fixed order each control step, passing data explicitly::

    task.apply_action(action)                 # (N, A) in [-1, 1] -> ctrl / targets
    invalid = sim.step(task.cfg.frame_skip)   # physics
    task.update(gen)                          # task clocks, command/goal resampling, pushes
    terms = task.reward_terms(action)         # dict name -> (N,) float32 (unscaled)
    terminated = task.terminated()            # (N,) bool: falls, drops, infractions
    obs = task.observe()                      # dict: "policy" (N, P), optional "critic" (N, C)
    # then for finished worlds ids (k,):
    task.reset(ids, gen)                      # initial state distribution + task state
    task.randomize(ids, gen)                  # per-world domain randomization (if enabled)

Every random draw a task makes uses the ``gen`` it is handed: the env's one generator,
seeded from ``cfg.seed`` and saved in checkpoints. A task owns no generator of its own.
State that outlives an episode (a curriculum stage, smoothed rates) goes through
``state_dict``/``load_state_dict`` so that a resumed run and ``robotrl eval`` see it.

Reward = sum over terms of ``cfg.reward_scales[name] * term``; a term without a scale is
an error, so a typo in a config cannot silently zero a term.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

if TYPE_CHECKING:
    import mujoco

    from robotrl.sim.backend import BatchSim
    from robotrl.twin.episode import Episode


@dataclass
class TaskConfig:
    """Settings every task has. A task's own config subclasses this once (no deeper).

    Attributes:
        name: registered task name (``humanoid``, ``tool_use``, ``driving``).
        frame_skip: physics substeps per control step.
        episode_length_s: episode time limit in seconds; hitting it is a time-out (truncation).
        reward_scales: weight of each named reward term.
        randomize: apply the task's domain randomization at every reset.
        action_delay_max: per-world action delay drawn from ``0..action_delay_max`` control steps.
        obs_noise_std: std of Gaussian noise added to the policy observation.
        split: which instance set to draw from: ``train`` or ``heldout``.
        nan_max_count: non-finite reward terms or observations tolerated (counted per name,
            in world-steps) before the env stops the run; each such world is reset meanwhile.
        nan_max_fraction: ... and only once they also exceed this fraction of world-steps.
        scenarios: a scenario file (``robotrl twin mine``) whose regions this task's resets draw from.
        scenario_mix: fraction of resets drawn from ``scenarios`` (0: none).
        dynamics: a physics file (``robotrl twin calibrate``'s ``physics.yaml``) compiled into the
            model: its multipliers scale the nominal masses, damping, gains and friction, and its
            ``delay_steps`` is the control delay (``robotrl.twin.physics``).
        dynamics_mode: how ``dynamics`` is used. ``center``: the task's randomization ranges (and
            ``action_delay_max``) apply around the calibrated values. ``nominal``: every world runs the
            calibrated model as is, with the task's dynamics randomization (``randomize`` hook) and the
            random action delay off.

    """

    name: str = "base"
    frame_skip: int = 5
    episode_length_s: float = 10.0
    reward_scales: dict[str, float] = field(default_factory=dict)
    randomize: bool = True
    action_delay_max: int = 0
    obs_noise_std: float = 0.0
    split: str = "train"
    nan_max_count: int = 100
    nan_max_fraction: float = 0.001
    scenarios: str = ""
    scenario_mix: float = 0.0
    dynamics: str = ""
    dynamics_mode: str = "center"


class Task(abc.ABC):
    """Base class for tasks; see the module docstring for the call order.

    Attributes:
        cfg: the task config (never mutated).
        num_envs: number of worlds ``N``.
        device: torch device of every tensor the task returns.
        sim: the BatchSim, set by ``setup``.

    """

    name: ClassVar[str]
    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    eval_camera: ClassVar[str | int] = -1

    def __init__(self, cfg: TaskConfig, num_envs: int, device: torch.device) -> None:
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = device
        self.sim: BatchSim | None = None

    # --- model -----------------------------------------------------------------
    @abc.abstractmethod
    def build_model(self) -> mujoco.MjModel:
        """Compile the task's MuJoCo model (MjSpec or MJCF), Newton or CG solver."""

    @property
    @abc.abstractmethod
    def action_dim(self) -> int:
        """Size ``A`` of the normalized action vector."""

    @property
    def joint_names(self) -> list[str]:
        """Names of the actuated joints, in action order (used by export/deploy)."""
        return []

    def obs_layout(self) -> list[tuple[str, int]]:
        """Named slices of the policy observation, in order: ``[(name, size), ...]``."""
        return []

    def action_spec(self) -> dict[str, object]:
        """How a ``[-1, 1]`` action becomes a robot command, for export and deploy.

        ``command = offset + scale * action`` per joint. ``kind`` is ``position``
        (joint targets, rad), ``torque`` (normalized motor input), or ``velocity``.
        ``default_pose`` is the joint configuration the robot starts from.
        """
        return {"kind": "torque", "scale": [1.0] * self.action_dim, "offset": [0.0] * self.action_dim,
                "default_pose": [0.0] * self.action_dim}

    # --- lifecycle ---------------------------------------------------------------
    def setup(self, sim: BatchSim) -> None:
        """Bind sim views and allocate ``(N, ...)`` task buffers. Called once."""
        self.sim = sim

    @abc.abstractmethod
    def reset(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Reset worlds ``ids`` ``(k,)``: initial state (via ``sim.reset``) and task state."""

    def scenario_draws(self, ids: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Worlds of ``ids`` that draw from ``cfg.scenarios`` (a ``cfg.scenario_mix`` fraction) and their draws.

        Returns ``(chosen (k,), {name: (k,) float32})``; NaN means "keep the task's own draw".
        A task with ``scenario_params`` calls this at the end of ``reset`` and applies the values.
        """
        if not self.cfg.scenarios or self.cfg.scenario_mix <= 0:
            return ids[:0], {}
        if getattr(self, "_scenario_file", None) is None:
            from robotrl.twin.scenarios import ScenarioFile, check_names

            self._scenario_file = ScenarioFile.load(self.cfg.scenarios)
            check_names(self.name, getattr(self, "scenario_params", []),
                        {n for r in self._scenario_file.regions for n in r.bounds}, str(self.cfg.scenarios))
        chosen = ids[torch.rand(ids.numel(), generator=gen, device=ids.device) < self.cfg.scenario_mix]
        return chosen, self._scenario_file.sample(chosen.numel(), gen, self.device)

    @staticmethod
    def scenario_from_episode(episode: Episode) -> dict[str, float]:
        """The scenario parameters a recorded ``episode`` measures, ``{name: value}`` (none by default).

        ``robotrl twin triage`` uses them for a bag whose metadata does not name its scenario
        (``scenario.<name>``, which takes precedence), so that a failure the twin reproduces
        still becomes a box of the task's ``scenario_params`` for training.
        """
        return {}

    def randomize(self, ids: torch.Tensor, gen: torch.Generator) -> None:  # noqa: B027 - optional hook
        """Per-world domain randomization of worlds ``ids`` ``(k,)`` (model fields, gains)."""

    @abc.abstractmethod
    def apply_action(self, action: torch.Tensor) -> None:
        """Write the ``(N, A)`` action in ``[-1, 1]`` into the sim's controls."""

    def update(self, gen: torch.Generator) -> None:  # noqa: B027 - optional hook
        """Per control step bookkeeping after physics (goal/command resampling, pushes), drawing from ``gen``."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Task state that outlives episodes (curriculum stage, smoothed rates), for checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:  # noqa: B027 - optional hook
        """Inverse of ``state_dict``; missing keys keep their initial values."""

    # --- signals -----------------------------------------------------------------
    @abc.abstractmethod
    def observe(self) -> dict[str, torch.Tensor]:
        """``{"policy": (N, P) float32, optional "critic": (N, C) float32, ...}``."""

    @abc.abstractmethod
    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """Unscaled named reward terms, each ``(N,)`` float32."""

    @abc.abstractmethod
    def terminated(self) -> torch.Tensor:
        """``(N,)`` bool: the episode ended by the task (fall, drop, infraction)."""

    def success(self) -> torch.Tensor:
        """``(N,)`` bool: the task counts as solved in this world."""
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Extra ``(N,)`` per-world statistics, read when a world's episode ends."""
        return {}

    def trace(self) -> dict[str, torch.Tensor]:
        """Per-step ``(N, ...)`` quantities that ``robotrl eval`` records for plots."""
        return {}

    def eval_artifacts(self, trace: dict[str, np.ndarray], out_dir: str) -> list[str]:
        """Write task-specific eval plots from world 0's ``trace`` (``(T, ...)`` arrays); return paths."""
        return []
