"""The tool-use curriculum: stage ``reach`` -> ``lift`` -> ``goal`` and the smoothed rates that advance it.

The stage outlives episodes, so it travels through the task's ``state_dict`` (0-d int64
``stage`` and ``stage_episodes``, ``(2,)`` float32 ``rates``): a resumed run, and
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


class Curriculum:
    """Stage index into ``STAGES`` plus the ``(reach, lift)`` success rates smoothed over episodes.

    Attributes:
        enabled: the stage can change (``cfg.curriculum`` on ``split=train``).
        stage: current stage, ``0 .. len(STAGES) - 1``.
        rates: ``(2,)`` float32 exponential moving averages of the reach and lift outcomes.
        stage_episodes: finished episodes counted since the stage began.

    """

    def __init__(self, cfg: ToolUseConfig, device: torch.device) -> None:
        self.cfg = cfg
        self.enabled = bool(cfg.curriculum and cfg.split == "train")
        self.stage = 0 if self.enabled else GOAL_STAGE
        self.rates = torch.zeros(2, device=device)
        self.stage_episodes = 0

    def record(self, reached: torch.Tensor, lifted: torch.Tensor) -> bool:
        """Fold finished episodes' outcomes ``(k,)`` bool into the rates; True when the stage advanced."""
        if not self.enabled or reached.numel() == 0 or self.stage >= GOAL_STAGE:
            return False
        outcome = torch.stack([reached.float(), lifted.float()])  # (2, k)
        alpha = self.cfg.curriculum_ema
        for value in outcome.unbind(1):
            self.rates = (1 - alpha) * self.rates + alpha * value
        self.stage_episodes += int(reached.numel())
        if (self.stage_episodes < self.cfg.curriculum_min_episodes
                or float(self.rates[self.stage]) < self.cfg.curriculum_thresholds[self.stage]):
            return False
        self.stage += 1
        self.stage_episodes = 0
        log.info("tool_use curriculum: stage %d (%s), rates reach=%.2f lift=%.2f", self.stage,
                 STAGES[self.stage], float(self.rates[0]), float(self.rates[1]))
        return True

    def state_dict(self) -> dict[str, torch.Tensor]:
        """``stage`` and ``stage_episodes`` as 0-d int64 tensors, ``rates`` as ``(2,)`` float32 (all on the CPU)."""
        return {"stage": torch.tensor(self.stage, dtype=torch.int64),
                "stage_episodes": torch.tensor(self.stage_episodes, dtype=torch.int64),
                "rates": self.rates.detach().cpu().clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore what ``state_dict`` gave; missing keys keep their values.

        Raises:
            KeyError: a key this curriculum does not know (valid keys listed).
            ValueError: a stage outside ``0 .. len(STAGES) - 1``.

        """
        unknown = sorted(set(state) - {"stage", "stage_episodes", "rates"})
        if unknown:
            raise KeyError(f"Unknown tool_use curriculum state {unknown}; valid keys: rates, stage, stage_episodes.")
        if "rates" in state:
            self.rates = state["rates"].to(self.rates).reshape(2).clone()
        if "stage_episodes" in state:
            self.stage_episodes = int(state["stage_episodes"])
        if "stage" not in state:
            return
        stage = int(state["stage"])
        if not 0 <= stage < len(STAGES):
            raise ValueError(f"tool_use curriculum stage must be in 0..{GOAL_STAGE} ({', '.join(STAGES)}), "
                             f"got {stage}.")
        if self.enabled:
            self.stage = stage
        elif stage != self.stage:
            log.info("tool_use curriculum is off for split=%s (curriculum=%s): staying in the %s stage, not %s.",
                     self.cfg.split, self.cfg.curriculum, STAGES[self.stage], STAGES[stage])
