"""Typed config of the language-conditioned driving task (Hydra ``task/driving_language_schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robotrl.tasks.driving.config import DrivingConfig


def _default_scales() -> dict[str, float]:
    return {"route_gain": 50.0, "infraction": 10.0, "speed_band": 0.25, "lane_band": 0.25}


@dataclass
class DrivingLanguageConfig(DrivingConfig):
    """The driving task where an instruction sets a speed band and the side of the road to keep to.

    Every field of ``DrivingConfig`` applies; this class adds the instruction fields and
    changes defaults (it is the driving config plus language, one level, no field edited
    after construction). The defaults clear the road (no obstacles or traffic), shorten the
    episode, and switch off the CaRL lane and minimum-speed factors, which would otherwise
    punish the very behaviours the instructions ask for.

    Attributes:
        instruction_split: ``train`` templates or ``heldout`` paraphrases (never trained on).
        slow_band: forward speed band ``[low, high]`` (m/s) of the ``slow`` instructions.
        fast_band: the same for ``fast``. The car's no-load top speed is 5 m/s; the band stays
            well below what the tightest turns (1.5 m radius) allow with the lowest tyre friction.
        lane_band: ``[low, high]`` of the lateral offset, in half-widths towards the commanded
            side (0: centreline, 1: road edge), that counts as keeping to that side.
        speed_tolerance: m/s outside the speed band at which the ``speed_band`` reward reaches 0.
        lane_tolerance: half-widths outside the lane band at which the ``lane_band`` reward reaches 0.
        settle_s: seconds from the start that the success metric ignores (accelerating, changing side).
        success_fraction: fraction of the counted steps that must be in both bands for success.
        privileged_instruction: append the intent's one-hots (pace, side) to the *policy* observation,
            for state-based RL teachers. Leave off for a VLA: it must read the instruction.
        teacher_lookahead: pure-pursuit look-ahead of ``scripted_action``, m (plus 0.3 s of travel).
        teacher_lane: lateral target of ``scripted_action``, in half-widths towards the commanded side.
        reward_scales: the driving terms (``route_gain``, ``infraction``) plus ``speed_band`` and
            ``lane_band``: per step, 1 at the band's centre, falling linearly to 0 at the tolerance
            outside the band.

    """

    name: str = "driving_language"
    episode_length_s: float = 12.0
    reward_scales: dict[str, float] = field(default_factory=_default_scales)
    num_obstacles: int = 0
    num_traffic: int = 0
    scenario_prob: float = 0.0
    lane_penalty: float = 1.0
    min_speed_penalty: float = 1.0
    instruction_split: str = "train"
    slow_band: list[float] = field(default_factory=lambda: [0.4, 0.8])
    fast_band: list[float] = field(default_factory=lambda: [1.6, 2.6])
    lane_band: list[float] = field(default_factory=lambda: [0.25, 0.85])
    speed_tolerance: float = 0.5
    lane_tolerance: float = 0.5
    settle_s: float = 2.0
    success_fraction: float = 0.8
    privileged_instruction: bool = False
    teacher_lookahead: float = 0.6
    teacher_lane: float = 0.55


CONFIG = DrivingLanguageConfig
