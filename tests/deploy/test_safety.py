"""Safety chain and mode machine, in-process: order, latching, re-arm, and fuzzed invariants."""

import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from robotrl.deploy import msgs
from robotrl.deploy.observation import RobotState
from robotrl.deploy.profile import load_profile, profile_path
from robotrl.deploy.safety import Mode, SafetyChain

ARM = load_profile("example_arm")
J = len(ARM.joints.names)
PERIOD = 0.02
TERMS = [
    {"name": "joint_pos", "size": J, "source": "joint_pos", "scale": 1.0, "offset": 0.0},
    {"name": "joint_vel", "size": J, "source": "joint_vel", "scale": 0.1, "offset": 0.0},
    {"name": "last_action", "size": J, "source": "last_action", "scale": 1.0, "offset": 0.0},
]


def arm_spec(kind: str = "position") -> dict:
    return {
        "joint_names": list(reversed(ARM.joints.names)),  # policy order differs from controller order
        "action_spec": {"kind": kind, "scale": [1.5] * J, "offset": [0.1] * J, "default_pose": [0.0] * J},
        "obs_terms": TERMS, "obs_norm": {"mean": [0.0] * 3 * J, "std": [1.0] * 3 * J, "clip": 10.0},
    }


def make(kind: str = "position", soft_start: float = 0.0, **safety) -> tuple[SafetyChain, RobotState]:
    profile = load_profile("example_arm")
    profile.command_kind = kind
    profile.safety.soft_start_s = soft_start
    for key, value in safety.items():
        setattr(profile.safety, key, value)
    spec = arm_spec(kind)
    return SafetyChain(spec, profile, PERIOD), RobotState(profile, spec["joint_names"])


def feed(state, now, pos=None, vel=None):
    pos = np.zeros(J) if pos is None else np.asarray(pos)
    vel = np.zeros(J) if vel is None else np.asarray(vel)
    msg = msgs.JointState(name=list(state.policy_joints), position=pos.tolist(), velocity=vel.tolist())
    assert state.ingest_joint_state(msg, now)


FRESH = {"fresh:joint_states": True, "estop": True}


def test_passive_sends_nothing_and_arm_starts_policy():
    chain, state = make()
    feed(state, 0.0)
    assert chain.step(state, 0.0, ["joint_states"], True, lambda o: np.zeros(J)).command is None
    assert not chain.arm(state, 0.0, {"fresh:joint_states": False, "estop": True})
    assert chain.arm(state, 0.0, FRESH)
    out = chain.step(state, 0.01, ["joint_states"], True, lambda o: np.zeros(J))
    assert out.mode == Mode.POLICY and out.command is not None


def test_first_command_without_soft_start_is_delta_capped_from_the_measured_pose():
    kind = "position"
    chain, state = make(kind, soft_start=0.0)
    pose = np.linspace(-0.3, 0.3, J)
    feed(state, 0.0, pos=pose)
    assert chain.arm(state, 0.0, FRESH) and chain.mode == Mode.POLICY
    out = chain.step(state, 0.01, ["joint_states"], True, lambda o: np.ones(J))  # policy asks for the far limit
    assert np.all(np.abs(out.command - pose) <= chain.delta_cap + 1e-12)
    assert np.any(np.abs(out.command - pose) > 0.5 * chain.delta_cap)  # it moved, as far as the cap allows


def test_stale_input_holds_after_three_periods_and_latches():
    chain, state = make()
    feed(state, 0.0)
    chain.arm(state, 0.0, FRESH)
    policy = lambda o: np.full(J, 0.5)  # noqa: E731
    assert chain.step(state, 3 * PERIOD, ["joint_states"], True, policy).mode == Mode.POLICY
    out = chain.step(state, 3.01 * PERIOD, ["joint_states"], True, policy)
    assert out.mode == Mode.HOLD and "fault:stale:joint_states:hold" in out.events
    held = chain.last_command.copy()
    feed(state, 4 * PERIOD)  # fresh again: still latched
    out = chain.step(state, 4 * PERIOD, ["joint_states"], True, policy)
    assert out.mode == Mode.HOLD and np.allclose(out.command, held)
    out = chain.step(state, 30 * PERIOD, ["joint_states"], True, policy)
    assert out.mode == Mode.DAMP  # older than stale_damp_periods (25)
    feed(state, 31 * PERIOD)
    assert chain.arm(state, 31 * PERIOD, FRESH) and chain.mode == Mode.POLICY and not chain.faults


def test_estop_latches_damp_until_rearm():
    chain, state = make(kind="torque")
    feed(state, 0.0, vel=np.full(J, 1.0))
    chain.arm(state, 0.0, FRESH)
    out = chain.step(state, 0.01, ["joint_states"], False, lambda o: np.zeros(J))
    assert out.mode == Mode.DAMP and "fault:estop:damp" in out.events
    joints = load_profile("example_arm").joints  # policy order is the reverse of the controller's
    kd, effort = np.asarray(joints.kd)[::-1], np.asarray(joints.effort_limits)[::-1]
    assert np.allclose(out.command, np.clip(-kd * 1.0, -effort, effort))  # DAMP: -kd * qd, first command sent
    out = chain.step(state, 0.02, ["joint_states"], True, lambda o: np.zeros(J))
    assert out.mode == Mode.DAMP  # heartbeat back, still latched


def test_nan_action_holds_and_is_never_sent():
    chain, state = make()
    feed(state, 0.0, pos=np.full(J, 0.3))
    chain.arm(state, 0.0, FRESH)
    first = chain.step(state, 0.01, ["joint_states"], True, lambda o: np.zeros(J)).command
    out = chain.step(state, 0.02, ["joint_states"], True, lambda o: np.full(J, np.nan))
    assert out.mode == Mode.HOLD and np.all(np.isfinite(out.command)) and np.allclose(out.command, first)


def test_soft_start_blends_from_measured_pose():
    chain, state = make(soft_start=1.0, delta_cap=10.0)
    start = np.linspace(-0.5, 0.5, J)
    feed(state, 0.0, pos=start)
    chain.arm(state, 0.0, FRESH)
    out = chain.step(state, 0.0, ["joint_states"], True, lambda o: np.ones(J))
    assert out.mode == Mode.SOFT_START and np.allclose(out.command, np.clip(start, *chain_limits(chain)), atol=1e-9)
    feed(state, 1.0, pos=start)
    out = chain.step(state, 1.0, ["joint_states"], True, lambda o: np.ones(J))
    assert out.mode == Mode.POLICY


def chain_limits(chain):
    return chain.lo, chain.hi


def test_attitude_guard_damps():
    chain, state = make(max_tilt_rad=0.5)
    feed(state, 0.0)
    state.quat = np.array([math.cos(0.4), math.sin(0.4), 0.0, 0.0])  # (w, x, y, z): 0.8 rad roll
    chain.arm(state, 0.0, FRESH)
    out = chain.step(state, 0.01, ["joint_states"], True, lambda o: np.zeros(J))
    assert out.mode == Mode.DAMP and "fault:attitude:damp" in out.events


def test_out_of_domain_observations_hold_after_n_periods():
    chain, state = make(ood_fault_periods=3, obs_clip_sigma=1.0)
    feed(state, 0.0, pos=np.full(J, 2.0))  # 2 std away from the normalizer's mean
    chain.arm(state, 0.0, FRESH)
    modes = [chain.step(state, k * 0.01, ["joint_states"], True, lambda o: np.zeros(J)).mode for k in range(1, 5)]
    assert modes == [Mode.POLICY, Mode.POLICY, Mode.HOLD, Mode.HOLD] and "out_of_domain" in chain.faults


def test_kind_mismatch_is_an_error():
    profile = load_profile("example_arm")
    with pytest.raises(ValueError, match="pick a matching profile"):
        SafetyChain(arm_spec("torque"), profile, PERIOD)


def profile_numbers() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, step cap) in the policy's joint order, read from example_arm.yaml itself, not the chain."""
    data = yaml.safe_load(profile_path("example_arm").read_text())
    names = data["joints"]["names"]
    order = [names.index(n) for n in arm_spec()["joint_names"]]
    limits = np.asarray(data["joints"]["position_limits"], dtype=np.float64)[order]
    velocity = np.asarray(data["joints"]["velocity_limits"], dtype=np.float64)[order]
    # position commands: at most delta_cap and velocity_limit * period per step
    return limits[:, 0], limits[:, 1], np.minimum(float(data["safety"]["delta_cap"]), velocity * PERIOD)


LO, HI, STEP_CAP = profile_numbers()
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


def test_profile_numbers_are_the_arm_yaml():
    # the fuzz below is only as good as these: the arm's wrist limits are +-3.1 rad, 3 rad/s
    assert LO[0] == -3.1 and HI[0] == 3.1 and STEP_CAP[0] == pytest.approx(min(0.02, 3.0 * PERIOD))
    assert np.all(STEP_CAP > 0) and np.all(LO < HI)


@settings(max_examples=200, deadline=None)
@given(
    outputs=st.lists(st.lists(floats, min_size=J, max_size=J), min_size=1, max_size=12),
    positions=st.lists(st.floats(-3.5, 3.5), min_size=J, max_size=J),
    soft=st.sampled_from([0.0, 0.05]),
)
def test_fuzzed_policy_output_keeps_profile_limits_and_step_cap(outputs, positions, soft):
    chain, state = make(soft_start=soft)
    # measured poses up to 0.1 rad outside the limits (inside input_position_margin, so they are accepted)
    pos = np.clip(np.asarray(positions), LO - 0.1, HI + 0.1)
    feed(state, 0.0, pos=pos)
    chain.arm(state, 0.0, FRESH)
    prev = None
    for k, raw in enumerate(outputs):
        now = (k + 1) * PERIOD
        feed(state, now, pos=pos)
        cmd = chain.step(state, now, ["joint_states"], True, lambda o, raw=raw: np.asarray(raw)).command
        assert cmd is not None and np.all(np.isfinite(cmd))
        assert np.all(cmd >= LO - 1e-12) and np.all(cmd <= HI + 1e-12)
        if prev is not None:
            assert np.all(np.abs(cmd - prev) <= STEP_CAP + 1e-12)
        prev = cmd
