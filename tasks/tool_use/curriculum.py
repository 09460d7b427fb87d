"""The tool-use curriculum: stage ``reach`` -> ``lift`` -> ``goal`` and the smoothed rates that advance it.

In the goal stage a second dial, ``goal_scale``, sets how far goals lie from the lift goal:
a goal's position is the lift goal moved ``goal_scale`` of the way to a random point of the goal
region, and its rotation away from the spawn orientation is at most ``goal_scale *
goal_rot_range``. It starts at ``cfg.goal_scale_init`` and grows by ``cfg.goal_scale_step``
whenever the smoothed rate of goal-stage episodes that reached a goal passes
``cfg.goal_scale_threshold`` (after ``curriculum_min_episodes`` episodes at that scale), up to 1,
the full task. Without it, random 6-DoF goals from the first goal-stage step are out of reach of
a CPU run: 0 goals in every 10-minute screen of sessions 20-26. The goal tolerances widen with it
(``goal_tolerances``): at scale 0 they are ``goal_pos_tol_start`` and ``goal_rot_tol_start``.

The stage outlives episodes, so it travels through the task's ``state_dict`` (0-d int64
``stage`` and ``stage_episodes``, ``(2,)`` float32 ``rates``, 0-d float32 ``goal_scale`` and
``goal_rate``): a resumed run, and
``robotrl eval`` on ``split=train``, continue in the stage the checkpoint reached. The
curriculum only runs on ``split=train`` with ``cfg.curriculum``; otherwise the task stays in
the goal stage and a loaded stage is ignored (held-out splits always run the full task).
"""

from __future__ import annotations

import logging

import torch
from robotrl.tasks.tool_use.config import ToolUseConfig

log = logging.getLogger(__name__)

STAGES = ("reach", "lift", "goal")
GOAL_STAGE = len(STAGES) - 1


def _ema(rate, values, alpha: float):  # noqa: ANN001, ANN202 (a float or a tensor of rates)
    """``rate`` after folding in ``values`` one by one: ``rate = (1 - alpha) * rate + alpha * value``."""
    for value in values:
        rate = (1 - alpha) * rate + alpha * value
    return rate


class Curriculum:
    """Stage index into ``STAGES`` plus the ``(reach, lift)`` success rates smoothed over episodes.

    Attributes:
        enabled: the stage can change (``cfg.curriculum`` on ``split=train``).
        stage: current stage, ``0 .. len(STAGES) - 1``.
        rates: ``(2,)`` float32 exponential moving averages of the reach and lift outcomes.
        stage_episodes: finished episodes counted since the stage (or, in the goal stage, the
            goal scale) last changed.
        goal_scale: goal distance and rotation as a share of the full task's, in ``(0, 1]``
            (1 without the curriculum).
        goal_rate: exponential moving average of goal-stage episodes that reached a goal.

    """

    def __init__(self, cfg: ToolUseConfig, device: torch.device) -> None:
        if not 0.0 < cfg.goal_scale_init <= 1.0:
            raise ValueError(f"task.goal_scale_init must be in (0, 1], got {cfg.goal_scale_init}.")
        self.cfg = cfg
        self.enabled = bool(cfg.curriculum and cfg.split == "train")
        self.stage = 0 if self.enabled else GOAL_STAGE
        self.rates = torch.zeros(2, device=device)
        self.stage_episodes = 0
        self.goal_scale = round(float(cfg.goal_scale_init), 6) if self.enabled else 1.0
        self.goal_rate = 0.0

    def record(self, reached: torch.Tensor, lifted: torch.Tensor, succeeded: torch.Tensor | None = None) -> bool:
        """Fold finished episodes' outcomes ``(k,)`` bool into the rates; True when the stage or goal scale moved.

        ``succeeded`` (at least one goal reached) only counts in the goal stage, where it moves ``goal_scale``.
        """
        if not self.enabled or reached.numel() == 0:
            return False
        if self.stage >= GOAL_STAGE:
            return succeeded is not None and self._record_goals(succeeded)
        outcome = torch.stack([reached.float(), lifted.float()])  # (2, k)
        self.rates = _ema(self.rates, outcome.unbind(1), self.cfg.curriculum_ema)
        self.stage_episodes += int(reached.numel())
        if (self.stage_episodes < self.cfg.curriculum_min_episodes
                or float(self.rates[self.stage]) < self.cfg.curriculum_thresholds[self.stage]):
            return False
        self.stage += 1
        self.stage_episodes = 0
        log.info("tool_use curriculum: stage %d (%s), rates reach=%.2f lift=%.2f", self.stage,
                 STAGES[self.stage], float(self.rates[0]), float(self.rates[1]))
        return True

    def goal_tolerances(self) -> tuple[float, float]:
        """Position (m) and orientation (rad) tolerances of a goal at the current ``goal_scale``.

        Linear in the scale, from ``goal_*_tol_start`` at 0 to ``goal_*_tol`` at 1 (as DexPBT's success
        tolerance curriculum tightens its keypoint tolerance while goals get reached).
        """
        c, s = self.cfg, self.goal_scale
        return (c.goal_pos_tol_start + s * (c.goal_pos_tol - c.goal_pos_tol_start),
                c.goal_rot_tol_start + s * (c.goal_rot_tol - c.goal_rot_tol_start))

    def _record_goals(self, succeeded: torch.Tensor) -> bool:
        """Goal-stage episodes ``(k,)`` bool (a goal reached): widen the goals when their rate passes the threshold."""
        if self.goal_scale >= 1.0:
            return False
        self.goal_rate = _ema(self.goal_rate, succeeded.float().tolist(), self.cfg.curriculum_ema)
        self.stage_episodes += int(succeeded.numel())
        if self.stage_episodes < self.cfg.curriculum_min_episodes or self.goal_rate < self.cfg.goal_scale_threshold:
            return False
        self.goal_scale = min(1.0, round(self.goal_scale + self.cfg.goal_scale_step, 6))
        self.stage_episodes = 0
        log.info("tool_use curriculum: goal scale %.2f (goal rate %.2f)", self.goal_scale, self.goal_rate)
        return True

    def state_dict(self) -> dict[str, torch.Tensor]:
        """``stage``, ``stage_episodes`` (0-d int64), ``rates`` ``(2,)``, ``goal_scale``, ``goal_rate`` (0-d float32).

        All on the CPU.
        """
        return {"stage": torch.tensor(self.stage, dtype=torch.int64),
                "stage_episodes": torch.tensor(self.stage_episodes, dtype=torch.int64),
                "rates": self.rates.detach().cpu().clone(),
                "goal_scale": torch.tensor(self.goal_scale, dtype=torch.float32),
                "goal_rate": torch.tensor(self.goal_rate, dtype=torch.float32)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore what ``state_dict`` gave; missing keys keep their values.

        Raises:
            KeyError: a key this curriculum does not know (valid keys listed).
            ValueError: a stage outside ``0 .. len(STAGES) - 1``.

        """
        known = {"stage", "stage_episodes", "rates", "goal_scale", "goal_rate"}
        unknown = sorted(set(state) - known)
        if unknown:
            raise KeyError(f"Unknown tool_use curriculum state {unknown}; valid keys: {', '.join(sorted(known))}.")
        if "goal_rate" in state:
            self.goal_rate = float(state["goal_rate"])
        if "rates" in state:
            self.rates = state["rates"].to(self.rates).reshape(2).clone()
        if "stage_episodes" in state:
            self.stage_episodes = int(state["stage_episodes"])
        if "goal_scale" in state:
            scale = round(float(state["goal_scale"]), 6)  # float32 in the state; 6 digits here
            if not 0.0 < scale <= 1.0:
                raise ValueError(f"tool_use curriculum goal_scale must be in (0, 1], got {scale}.")
            if self.enabled:
                self.goal_scale = scale
        if "stage" not in state:
            return
        stage = int(state["stage"])
        if not 0 <= stage < len(STAGES):
            raise ValueError(f"tool_use curriculum stage must be in 0..{GOAL_STAGE} ({', '.join(STAGES)}), "
                             f"got {stage}.")
        if self.enabled:
            self.stage = stage
            if "goal_scale" not in state and stage == GOAL_STAGE:
                self.goal_scale = 1.0  # a checkpoint from before the goal scale trained on the full goals
        elif stage != self.stage:
            log.info("tool_use curriculum is off for split=%s (curriculum=%s): staying in the %s stage, not %s.",
                     self.cfg.split, self.cfg.curriculum, STAGES[self.stage], STAGES[stage])
