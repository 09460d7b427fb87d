"""Mode machine and safety chain: from robot state to the command actually sent.

Modes: ``PASSIVE -> SOFT_START -> POLICY``, and ``HOLD`` / ``DAMP`` on faults. Faults
latch: the mode stays HOLD or DAMP until ``arm`` is called again (an explicit re-arm) and
the cause has cleared. The ROS managed-node state is mirrored in ``lifecycle``:
``unconfigured`` (no policy yet), ``inactive`` (PASSIVE or faulted), ``active``
(SOFT_START / POLICY), ``finalized`` (shut down).

``SafetyChain.step`` runs DEPLOY.md's chain in order each control period:

1. per-input staleness watchdog (> ``stale_hold_periods`` -> HOLD, > ``stale_damp_periods`` -> DAMP);
2. NaN/Inf check of the observation and of the raw action (-> HOLD);
3. observation clip to the policy normalizer's ``mean +- obs_clip_sigma * std``;
4. action clip to ``[-1, 1]``, then ``command = offset + scale * action``; joints the spec's
   ``action_spec.relative`` marks move from the previous command instead
   (``previous + scale * action``), and with ``action_spec.ema`` < 1 the other joints' commands
   are smoothed (``ema * command + (1 - ema) * previous``), as the task's ``apply_action`` does;
5. joint position limits (position kind: clip; torque/velocity kind: no push further out
   beyond ``limit + position_margin``), then the command range (torque: effort limits,
   velocity: velocity limits, ackermann: the steering and throttle ``position_limits``);
6. per-step delta cap, and for position commands the velocity cap ``v_max * dt``;
7. torque-estimate clamp (position kind, ``kp * (q_cmd - q) - kd * qd`` within effort);
8. attitude and base-height guards (-> DAMP), and the out-of-domain guard: observations outside
   the clip range for ``ood_fault_periods`` consecutive periods (-> HOLD);
9. soft start: blend from the pose measured at arming to the policy over ``soft_start_s``;
10. e-stop: heartbeat missing for ``estop_timeout_s`` or ``data: true`` -> DAMP, latched.

Steps 5 and 6 are re-applied after the blend and to HOLD/DAMP commands, so every command
sent, in every mode, is within the position limits (position kind), the command range and
the delta cap of the previous command sent; for position commands the first command after
the first arming is capped from the pose measured at arming.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from robotrl.deploy.kinematics import Kinematics
from robotrl.deploy.observation import RobotState, build_observation, check_kinematic_terms
from robotrl.deploy.profile import RobotProfile

log = logging.getLogger(__name__)


class Mode(str, enum.Enum):
    """Control modes (see module docstring)."""

    PASSIVE = "PASSIVE"
    SOFT_START = "SOFT_START"
    POLICY = "POLICY"
    HOLD = "HOLD"
    DAMP = "DAMP"


LIFECYCLE = {Mode.PASSIVE: "inactive", Mode.SOFT_START: "active", Mode.POLICY: "active",
             Mode.HOLD: "inactive", Mode.DAMP: "inactive"}
HOLD, DAMP = "hold", "damp"


@dataclass
class StepResult:
    """What one control period produced (arrays in policy joint order).

    Attributes:
        mode: mode after this step.
        command: ``(A,)`` command sent, or None in PASSIVE (nothing is sent).
        obs: ``(P,)`` clipped observation fed to the policy (None when the policy did not run).
        raw_action: ``(A,)`` policy output before any clipping (None when it did not run).
        events: safety events of this step, e.g. ``"fault:stale:joint_states:hold"``.

    """

    mode: Mode
    command: np.ndarray | None
    obs: np.ndarray | None = None
    raw_action: np.ndarray | None = None
    events: list[str] = field(default_factory=list)


def _reorder(values: list[Any], names: list[str], order: list[str]) -> np.ndarray:
    index = {n: i for i, n in enumerate(names)}
    return np.asarray([values[index[n]] for n in order], dtype=np.float64)


class SafetyChain:
    """Stateful mode machine plus the ordered safety chain (module docstring)."""

    def __init__(self, spec: dict[str, Any], profile: RobotProfile, period: float) -> None:
        act = spec["action_spec"]
        if act["kind"] != profile.command_kind:
            raise ValueError(f"Policy commands {act['kind']!r} but robot profile {profile.name!r} takes "
                             f"{profile.command_kind!r}; pick a matching profile.")
        self.kind, self.period = act["kind"], period
        self.joints = list(spec["joint_names"])
        names, j, s = profile.joints.names, profile.joints, profile.safety
        lo, hi = profile.limits()
        self.lo, self.hi = _reorder(list(lo), names, self.joints), _reorder(list(hi), names, self.joints)
        self.vel = _reorder(j.velocity_limits, names, self.joints)
        self.effort = _reorder(j.effort_limits, names, self.joints)
        self.kp, self.kd = _reorder(j.kp, names, self.joints), _reorder(j.kd, names, self.joints)
        self.scale = np.asarray(act["scale"], dtype=np.float64)
        self.offset = np.asarray(act["offset"], dtype=np.float64)
        self.relative = np.asarray(act.get("relative") or [False] * len(self.joints), dtype=bool)
        self.ema = float(act.get("ema", 1.0))
        if (self.relative.any() or self.ema < 1.0) and self.kind != "position":
            raise ValueError(f"action_spec: relative or smoothed (ema) actions need position commands, not "
                             f"{self.kind!r}.")
        cap = np.broadcast_to(np.asarray(s.delta_cap, dtype=np.float64), (len(names),))
        self.delta_cap = _reorder(list(cap), names, self.joints)
        if self.kind == "position":
            self.delta_cap = np.minimum(self.delta_cap, self.vel * period)
        self.cfg = s
        norm = spec.get("obs_norm")
        if norm:
            mean, std = np.asarray(norm["mean"]), np.asarray(norm["std"])
            self.obs_lo = (mean - s.obs_clip_sigma * std).astype(np.float32)
            self.obs_hi = (mean + s.obs_clip_sigma * std).astype(np.float32)
        else:
            self.obs_lo = self.obs_hi = None
        self.obs_terms = spec["obs_terms"]
        self.kinematics = Kinematics(spec["kinematics"]) if spec.get("kinematics") else None
        check_kinematic_terms(self.obs_terms, self.kinematics, self.joints)
        self.mode = Mode.PASSIVE
        self.lifecycle = "inactive"
        self.faults: dict[str, str] = {}
        self.counters: Counter = Counter()
        self.last_command: np.ndarray | None = None
        self.last_action = np.zeros(len(self.joints))
        self._blend_from = np.zeros(len(self.joints))
        self._t_arm = 0.0
        self._hold_pose = np.zeros(len(self.joints))
        self._events: list[str] = []
        self._ood_run = 0

    # --- mode machine -------------------------------------------------------------
    def fault(self, name: str, severity: str, state: RobotState) -> None:
        """Latch fault ``name`` (``hold`` or ``damp``); the mode follows the worst latched fault."""
        new = name not in self.faults or (severity == DAMP and self.faults[name] == HOLD)
        if not new:
            return
        self.faults[name] = severity
        self.counters[f"fault:{name}"] += 1
        self._events.append(f"fault:{name}:{severity}")
        was = self.mode
        target = Mode.DAMP if DAMP in self.faults.values() else Mode.HOLD
        if target != was:
            if target == Mode.HOLD:
                self._hold_pose = state.joint_pos.copy()
            self._set_mode(target)

    def arm(self, state: RobotState, now: float, conditions: dict[str, bool]) -> bool:
        """Explicit (re-)arm: clear latched faults and start SOFT_START if every condition holds.

        ``conditions`` maps a name (``"fresh:joint_states"``, ``"estop"``) to whether it is met.
        """
        unmet = sorted(k for k, ok in conditions.items() if not ok)
        if unmet:
            self._events.append("arm_refused:" + ",".join(unmet))
            log.warning("arm refused: %s", ", ".join(unmet))
            return False
        if self.faults:
            self._events.append("rearm:cleared:" + ",".join(sorted(self.faults)))
        self.faults.clear()
        self._ood_run = 0
        state.new_episode()
        start = state.joint_pos if self.kind == "position" else np.zeros(len(self.joints))
        self._blend_from = self._bounds(np.clip(start, self.lo, self.hi) if self.kind == "position" else start)
        self._t_arm = now
        if self.last_command is None and self.kind == "position":
            # nothing sent yet: the first command's delta cap starts from the measured pose, so with
            # soft_start_s: 0 the first command cannot jump to the policy's output
            self.last_command = self._blend_from.copy()
        self._set_mode(Mode.SOFT_START if self.cfg.soft_start_s > 0 else Mode.POLICY)
        return True

    def _set_mode(self, mode: Mode) -> None:
        if mode != self.mode:
            self._events.append(f"mode:{self.mode.value}->{mode.value}")
            log.info("mode %s -> %s%s", self.mode.value, mode.value,
                     f" (faults: {', '.join(sorted(self.faults))})" if self.faults else "")
            self.mode = mode
            self.lifecycle = LIFECYCLE[mode]

    # --- chain steps ---------------------------------------------------------------
    def _bounds(self, cmd: np.ndarray) -> np.ndarray:
        if self.kind == "ackermann":
            return np.clip(cmd, self.lo, self.hi)
        if self.kind == "torque":
            return np.clip(cmd, -self.effort, self.effort)
        if self.kind == "velocity":
            return np.clip(cmd, -self.vel, self.vel)
        return cmd

    def _position_limits(self, cmd: np.ndarray, q: np.ndarray) -> np.ndarray:
        if self.kind == "position":
            return np.clip(cmd, self.lo, self.hi)
        if self.kind == "ackermann":  # the command range is the limits (_bounds)
            return cmd
        margin = self.cfg.position_margin
        out = cmd.copy()
        out[(q > self.hi + margin) & (cmd > 0)] = 0.0
        out[(q < self.lo - margin) & (cmd < 0)] = 0.0
        return out

    def _rate_limit(self, cmd: np.ndarray) -> np.ndarray:
        if self.last_command is None:
            return cmd
        return np.clip(cmd, self.last_command - self.delta_cap, self.last_command + self.delta_cap)

    def _torque_clamp(self, cmd: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        if self.kind != "position" or not self.cfg.torque_clamp:
            return cmd
        ok = self.kp > 0
        lo = q + (-self.effort + self.kd * qd) / np.where(ok, self.kp, 1.0)
        hi = q + (self.effort + self.kd * qd) / np.where(ok, self.kp, 1.0)
        return np.where(ok, np.clip(cmd, lo, hi), cmd)

    def enforce(self, cmd: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Steps 5-6 (limits, range, delta cap): the invariants of every command sent."""
        return self._rate_limit(self._bounds(self._position_limits(cmd, q)))

    def safe_command(self, state: RobotState, mode: Mode | None = None) -> np.ndarray:
        """HOLD or DAMP command for the current state (before the invariants are applied)."""
        mode = mode or self.mode
        q, qd = state.joint_pos, state.joint_vel
        if self.kind == "velocity":
            return np.zeros(len(self.joints))
        if self.kind == "ackermann":  # throttle 0; HOLD keeps the steering angle, DAMP centres it
            cmd = np.zeros(len(self.joints))
            if mode == Mode.HOLD and self.last_command is not None and "steering" in self.joints:
                i = self.joints.index("steering")
                cmd[i] = self.last_command[i]
            return cmd
        if mode == Mode.HOLD:
            if self.kind == "position":
                return self.last_command.copy() if self.last_command is not None else q.copy()
            return self.kp * (self._hold_pose - q) - self.kd * qd
        return q.copy() if self.kind == "position" else -self.kd * qd

    def step(self, state: RobotState, now: float, required: list[str], estop_ok: bool,
             policy: Callable[[np.ndarray], np.ndarray]) -> StepResult:
        """One control period (see module docstring); returns what to send and what happened."""
        if self.mode == Mode.PASSIVE:  # nothing is commanded; arming checks freshness and the e-stop
            return StepResult(self.mode, None, events=self._drain())
        for source in required:  # 1. staleness watchdog
            periods = state.age(source, now) / self.period
            if periods > self.cfg.stale_damp_periods:
                self.fault(f"stale:{source}", DAMP, state)
            elif periods > self.cfg.stale_hold_periods:
                self.fault(f"stale:{source}", HOLD, state)
        if not estop_ok:  # 10. evaluated early so this period's command is already safe
            self.fault("estop", DAMP, state)
        obs = raw = None
        cmd = None
        if self.mode in (Mode.SOFT_START, Mode.POLICY):
            cmd, obs, raw = self._policy_command(state, now, policy)
        if cmd is None:
            cmd = self.safe_command(state)
        cmd = self.enforce(cmd, state.joint_pos)
        self.last_action = self._action_of(cmd, self.last_command if self.last_command is not None else cmd)
        self.last_command = cmd
        self.counters[f"sent:{self.mode.value}"] += 1
        return StepResult(self.mode, cmd, obs, raw, self._drain())

    def _policy_command(self, state: RobotState, now: float, policy: Callable[[np.ndarray], np.ndarray]
                        ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        obs = build_observation(self.obs_terms, state, self.last_action, now, self.last_command, self.kinematics)
        if not np.all(np.isfinite(obs)):  # 2. NaN/Inf
            self.fault("nan_obs", HOLD, state)
            return None, obs, None
        if self.obs_lo is not None:  # 3. observation clip
            clipped = np.clip(obs, self.obs_lo, self.obs_hi)
            n_clipped = int(np.count_nonzero(clipped != obs))
            self.counters["obs_clipped"] += n_clipped
            self._ood_run = self._ood_run + 1 if n_clipped else 0
            obs = clipped
        raw = np.asarray(policy(obs), dtype=np.float64).reshape(-1)
        if raw.shape != (len(self.joints),) or not np.all(np.isfinite(raw)):  # 2. on the action too
            self.fault("nan_action", HOLD, state)
            return None, obs, raw
        cmd = self._targets(np.clip(raw, -1.0, 1.0), state)  # 4.
        cmd = self.enforce(cmd, state.joint_pos)  # 5-6.
        cmd = self._torque_clamp(cmd, state.joint_pos, state.joint_vel)  # 7.
        if self.cfg.max_tilt_rad > 0 and state.tilt() > self.cfg.max_tilt_rad:  # 8.
            self.fault("attitude", DAMP, state)
            return None, obs, raw
        if self.cfg.min_base_height is not None and state.base_pos[2] < self.cfg.min_base_height:
            self.fault("base_height", DAMP, state)
            return None, obs, raw
        if self.cfg.ood_fault_periods and self._ood_run >= self.cfg.ood_fault_periods:
            self.fault("out_of_domain", HOLD, state)
            return None, obs, raw
        if self.mode == Mode.SOFT_START:  # 9.
            alpha = min(1.0, (now - self._t_arm) / self.cfg.soft_start_s)
            cmd = (1.0 - alpha) * self._blend_from + alpha * cmd
            if alpha >= 1.0:
                self._set_mode(Mode.POLICY)
        return cmd, obs, raw

    def _targets(self, action: np.ndarray, state: RobotState) -> np.ndarray:
        """Step 4: ``offset + scale * action``; relative joints move from the previous command.

        Smoothed (``ema``) joints move towards it; before the first command, the measured pose.
        """
        cmd = self.offset + self.scale * action
        if not self.relative.any() and self.ema >= 1.0:
            return cmd
        prev = self.last_command if self.last_command is not None else state.joint_pos
        cmd = np.where(self.relative, prev + self.scale * action, cmd)
        if self.ema < 1.0:
            cmd = np.where(self.relative, cmd, self.ema * cmd + (1.0 - self.ema) * prev)
        return cmd

    def _action_of(self, cmd: np.ndarray, prev: np.ndarray) -> np.ndarray:
        """The action in ``[-1, 1]`` that step 4 maps to ``cmd`` from ``prev`` (inverse of ``_targets``)."""
        absolute = cmd if self.ema >= 1.0 else (cmd - (1.0 - self.ema) * prev) / self.ema
        target = np.where(self.relative, cmd - prev + self.offset, absolute)
        return np.clip((target - self.offset) / np.where(self.scale != 0, self.scale, 1.0), -1.0, 1.0)

    def _drain(self) -> list[str]:
        events, self._events = self._events, []
        return events
