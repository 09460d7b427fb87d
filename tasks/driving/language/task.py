"""Language-conditioned driving: drive at the commanded pace on the commanded side of the road.

The driving task (``tasks/driving/task.py``: the car, the procedural tracks, the CaRL
progress reward and the infractions) plus an instruction per world. Each instruction asks
for an *intent*: a pace, whose speed band is ``cfg.slow_band`` (0.4-0.8 m/s by default) or
``cfg.fast_band`` (1.6-2.6 m/s), and a side, ``left`` or ``right``: keep the car's centre
``cfg.lane_band`` half-widths (0.25-0.85) off the centreline on that side. Every reset
draws a new instruction (uniform over the split's list) for the reset worlds.

Success, from the state: after ``settle_s`` seconds, at least ``success_fraction`` of the
steps have the forward speed in the band *and* the lateral offset in the lane band, and no
hard infraction ended the episode. It is read when the episode ends (time-out, lap or infraction).

Reward terms (unscaled): the driving task's ``route_gain`` and ``infraction``, plus
``speed_band`` and ``lane_band``: each step 1 at the centre of its band, falling linearly to 0
at ``speed_tolerance`` m/s / ``lane_tolerance`` half-widths outside it (``rewards.band_reward``).

The policy observation is the driving task's (ego speed, route errors, route ahead, rays,
steering, last action): *what* to do must come from ``obs["instruction"]`` (an index into
``instructions``) and, with ``TaskEnv(image_size=...)``, the chase-camera ``obs["image"]``.
The critic observation appends the intent's one-hots (pace, side), and so does the policy
observation with ``privileged_instruction=True`` (state-based RL teachers).
``scripted_action()`` is a privileged pure-pursuit controller that follows an intent.
"""

from __future__ import annotations

import torch
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.language import rewards as R
from robotrl.tasks.driving.language.config import DrivingLanguageConfig
from robotrl.tasks.driving.language.instructions import PACES, SIDES, instruction_list
from robotrl.tasks.driving.task import DrivingTask

from robotrl.rotations import yaw_from_quat

# Per-world buffers of the driving task and of this one that ``copy_worlds`` copies; a test
# checks that every ``(N, ...)`` tensor attribute of the task is either here or a sim view.
WORLD_BUFFERS = tuple(
    """track_id idx s lateral heading_err track_heading progress best_progress gain v_fwd v_lat yaw_rate speed
    time lap_time distance ttc lap_done flags hit_kinds rays action factor_sum steps active obstacle_xy traffic_s
    traffic_off traffic_v traffic_xy traffic_yaw ended_infraction ended_completion start_s dynamics
    instruction intent pace_id side_sign counted followed speed_in lane_in speed_score lane_score""".split()
)
SIM_VIEWS = ("qpos", "qvel", "ctrl", "mocap_pos", "mocap_quat")
RANDOMIZED_FIELDS = (
    "geom_friction",
    "body_mass",
    "actuator_gainprm",
    "actuator_biasprm",
    "geom_pos",
    "geom_quat",
    "geom_size",
)


class DrivingLanguageTask(DrivingTask):
    """Driving with an instruction that sets the speed band and the side of the road (see module docstring)."""

    name = "driving_language"
    config_class = DrivingLanguageConfig
    cfg: DrivingLanguageConfig

    def __init__(self, cfg: DrivingLanguageConfig, num_envs: int, device: torch.device) -> None:
        super().__init__(cfg, num_envs, device)
        texts, intent = instruction_list(cfg.instruction_split)
        self.instructions: list[str] = texts
        self.image_camera = cfg.camera_name
        self._instr_intent = torch.tensor(intent, dtype=torch.long, device=device)
        self._bands = torch.tensor([cfg.slow_band, cfg.fast_band], dtype=torch.float32, device=device)  # PACES order

    def obs_layout(self) -> list[tuple[str, int]]:
        """The driving task's slices, plus the intent's one-hots with ``privileged_instruction``."""
        extra = [("pace", len(PACES)), ("side", len(SIDES))] if self.cfg.privileged_instruction else []
        return super().obs_layout() + extra

    # --- lifecycle -------------------------------------------------------------------
    def setup(self, sim) -> None:  # noqa: ANN001
        """The driving task's setup, then the instruction buffers."""
        super().setup(sim)
        n, dev = self.num_envs, self.device
        self.instruction = torch.zeros(n, dtype=torch.long, device=dev)
        self.intent = torch.zeros(n, dtype=torch.long, device=dev)
        self.pace_id = torch.zeros(n, dtype=torch.long, device=dev)
        self.side_sign = torch.ones(n, device=dev)
        self.counted, self.followed = torch.zeros(n, device=dev), torch.zeros(n, device=dev)
        self.speed_in = torch.zeros(n, dtype=torch.bool, device=dev)
        self.lane_in = torch.zeros(n, dtype=torch.bool, device=dev)
        self.speed_score, self.lane_score = torch.zeros(n, device=dev), torch.zeros(n, device=dev)

    def reset(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """The driving reset (track, start, scenario), then a fresh instruction for worlds ``ids``."""
        super().reset(ids, gen)
        self.instruction[ids] = torch.randint(
            0, len(self.instructions), (ids.numel(),), generator=gen, device=self.device
        )
        self.set_intent(ids, self._instr_intent[self.instruction[ids]])
        for buf in (self.counted, self.followed, self.speed_score, self.lane_score):
            buf[ids] = 0.0
        self.speed_in[ids] = False
        self.lane_in[ids] = False

    def set_intent(self, ids: torch.Tensor, intent: torch.Tensor) -> None:
        """Make worlds ``ids`` ``(k,)`` follow intents ``intent`` ``(k,)`` (``pace * 2 + side``).

        ``reset`` calls it with the intent of the drawn instruction; a test or an evaluation may
        call it to pose another intent than the one the instruction names.
        """
        self.intent[ids] = intent
        self.pace_id[ids] = intent // len(SIDES)
        self.side_sign[ids] = 1.0 - 2.0 * (intent % len(SIDES)).float()  # left +1, right -1

    def copy_worlds(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Make worlds ``dst`` ``(k,)`` exact copies of worlds ``src`` ``(k,)``: sim, randomized model, task state.

        Used right after a reset for GRPO groups: every rollout of a group starts from one state.
        """
        self.sim.reset(dst, self.qpos[src].clone(), self.qvel[src].clone())
        self.ctrl[dst] = self.ctrl[src]
        for name in RANDOMIZED_FIELDS:
            self.sim.set_model_field(name, dst, self.sim.model_field(name)[src].clone())
        for name in WORLD_BUFFERS:
            buf = getattr(self, name)
            buf[dst] = buf[src]
        if self.sim.model.nmocap:
            self._write_mocap(dst)

    def update(self, gen: torch.Generator) -> None:
        """The driving measurements, then whether this step is in the commanded bands."""
        super().update(gen)
        band = self._bands[self.pace_id]
        offset = R.side_offset(self.lateral, self.bank.half_width[self.track_id], self.side_sign)
        lane_lo, lane_hi = (torch.full_like(offset, v) for v in self.cfg.lane_band)
        self.speed_in = (self.v_fwd >= band[:, 0]) & (self.v_fwd <= band[:, 1])
        self.lane_in = (offset >= lane_lo) & (offset <= lane_hi)
        self.speed_score = R.band_reward(self.v_fwd, band[:, 0], band[:, 1], self.cfg.speed_tolerance)
        self.lane_score = R.band_reward(offset, lane_lo, lane_hi, self.cfg.lane_tolerance)
        counts = self.time > self.cfg.settle_s + 1e-6
        self.counted += counts.float()
        self.followed += (counts & self.speed_in & self.lane_in).float()

    # --- signals ---------------------------------------------------------------------
    def _intent_onehot(self) -> torch.Tensor:
        pace = torch.nn.functional.one_hot(self.pace_id, len(PACES)).float()
        side = torch.nn.functional.one_hot(self.intent % len(SIDES), len(SIDES)).float()
        return torch.cat([pace, side], dim=1)

    def observe(self) -> dict[str, torch.Tensor]:
        """The driving observation; the critic (and, if privileged, the policy) gains the intent one-hots."""
        obs = super().observe()
        onehot = self._intent_onehot()
        obs["critic"] = torch.cat([obs.get("critic", obs["policy"]), onehot], dim=1)
        if self.cfg.privileged_instruction:
            obs["policy"] = torch.cat([obs["policy"], onehot], dim=1)
        return obs

    def instruction_ids(self) -> torch.Tensor:
        """``(N,)`` int64 index of each world's instruction in ``instructions``."""
        return self.instruction

    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """The driving terms plus ``speed_band`` and ``lane_band`` (see module docstring)."""
        terms = super().reward_terms(action)
        terms["speed_band"] = self.speed_score
        terms["lane_band"] = self.lane_score
        return terms

    def success(self) -> torch.Tensor:
        """Enough steps after the settling time in both bands, and no hard infraction."""
        return R.following_success(self.followed, self.counted, self.flags.any(1), self.cfg.success_fraction)

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """The driving metrics plus the followed fraction and the intent."""
        metrics = super().episode_metrics()
        metrics["followed_fraction"] = self.followed / self.counted.clamp(min=1.0)
        metrics["intent"] = self.intent.float()
        return metrics

    def scripted_action(self, intent: torch.Tensor | None = None) -> torch.Tensor:
        """Privileged controller: pure pursuit of a point offset to the side, speed by feedforward + P.

        Args:
            intent: ``(N,)`` intent to follow (``pace * 2 + side``); default each world's own
                (another intent gives a controller that follows another instruction).

        Returns:
            ``(N, 2)`` steering and throttle in ``[-1, 1]``.

        """
        c = self.cfg
        intent = self.intent if intent is None else intent
        band = self._bands[intent // len(SIDES)]
        sign = 1.0 - 2.0 * (intent % len(SIDES)).float()
        hw = self.bank.half_width[self.track_id]
        ahead = c.teacher_lookahead + 0.3 * self.v_fwd.clamp(min=0.0)
        centre, heading = self.bank.point_at(self.track_id, self.s + ahead)
        normal = torch.stack([-torch.sin(heading), torch.cos(heading)], dim=-1)
        goal = centre + (sign * c.teacher_lane * hw)[:, None] * normal
        rel = goal - self.qpos[:, :2].float()
        yaw = yaw_from_quat(self.qpos[:, 3:7].float())
        x = torch.cos(yaw) * rel[:, 0] + torch.sin(yaw) * rel[:, 1]
        y = -torch.sin(yaw) * rel[:, 0] + torch.cos(yaw) * rel[:, 1]
        curvature = 2.0 * y / (x.square() + y.square()).clamp(min=1e-4)
        steer = torch.atan(C.WHEELBASE * curvature) / C.MAX_STEER
        target = band.mean(dim=1)
        throttle = target / C.TOP_SPEED + 1.5 * (target - self.v_fwd)
        return torch.stack([steer, throttle], dim=1).clamp(-1.0, 1.0)


TASK = DrivingLanguageTask
