"""The tool-use task through the generic TaskEnv on the CPU backend (mujoco.batch)."""

import dataclasses

import numpy as np
import pytest
import torch
from robotrl.tasks.tool_use.config import ToolUseConfig

from robotrl.envs.task_env import TaskEnv
from robotrl.sim.backend import SimConfig

QUIET = {"dr_kicks": False, "dr_object_pose": False, "obs_delay_max": 0, "action_delay_max": 0}


def make(n=8, **kw):
    return TaskEnv(ToolUseConfig(**{"arm": "floating", **kw}), SimConfig(num_envs=n, nthread=2), seed=0)


def hold_action(task):
    """Action that keeps the current joint targets (arm delta 0, hand targets unchanged)."""
    a = torch.zeros(task.num_envs, task.action_dim)
    na = task._na
    a[:, na:] = 2 * (task.targets[:, na:] - task.lo[na:]) / (task.hi[na:] - task.lo[na:]) - 1
    return a


@pytest.mark.parametrize("arm", ["floating", "kuka_iiwa"])
def test_smoke_reset_step_autoreset(arm):
    if arm == "kuka_iiwa":
        pytest.importorskip("pybullet_data", reason="the KUKA arm needs pybullet_data: pip install pybullet")
    env = make(n=6, arm=arm, episode_length_s=0.4)  # 20 control steps
    task = env.task
    obs = env.reset()
    assert obs["policy"].shape == (6, sum(size for _, size in task.obs_layout()))
    assert obs["critic"].shape[1] > obs["policy"].shape[1]
    assert len(task.joint_names) == env.num_actions == len(task.action_spec()["scale"])
    gen = torch.Generator().manual_seed(0)
    ended = []
    for _ in range(25):
        action = torch.rand(6, env.num_actions, generator=gen) * 2 - 1
        obs, reward, term, trunc, info = env.step(action)
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["critic"]).all()
        assert torch.isfinite(reward).all()
        assert set(info["reward_terms"]) == set(ToolUseConfig().reward_scales)
        if "episode" in info:
            ended.append(info["episode"])
    assert ended, "no episode ended although the time limit is 20 steps"
    ep = ended[0]
    for key in ("goals_reached", "dropped", "lifted", "curriculum_stage", "return", "success"):
        assert key in ep
    assert (env.episode_step < 20).all()  # autoreset restarted the clocks
    assert env.total_sim_resets == 0


def test_goal_reached_pays_bonus_and_draws_new_goal():
    env = make(n=4, randomize=False, curriculum=False, success_steps=1,
               goal_region_low=[0.5, -0.1, 0.35], goal_region_high=[0.65, 0.1, 0.4])
    task, sim = env.task, env.task.sim
    env.reset()
    ids = torch.arange(4)
    qpos = task.qpos.clone()
    qpos[:, task._tq:task._tq + 3] = task.goal_pos.double()
    qpos[:, task._tq + 3:task._tq + 7] = task.goal_quat.double()
    sim.reset(ids, qpos, torch.zeros_like(task.qvel))
    pos_err, rot_err = task.goal_errors()
    # the goal frame is the tool frame at the goal (float32 acos resolves ~1e-3 rad near 0)
    assert pos_err.max() < 1e-6 and rot_err.max() < 3e-3
    old_goal = task.goal_pos.clone()
    _, _, _, _, info = env.step(hold_action(task))
    scale = ToolUseConfig().reward_scales["goal_bonus"]
    assert torch.allclose(info["reward_terms"]["goal_bonus"], torch.full((4,), scale))
    assert (task.goals_reached == 1).all()
    assert (task.goal_pos - old_goal).norm(dim=1).min() > 1e-4  # a new goal was drawn
    _, _, _, _, info = env.step(hold_action(task))
    assert (info["reward_terms"]["goal_bonus"] == 0).all()  # no repeated bonus for the old goal


def _tool_in_the_air(lift_hand_dist, **kw):
    env = make(n=4, randomize=False, curriculum=False, lift_hand_dist=lift_hand_dist, **kw)
    task, sim = env.task, env.task.sim
    env.reset()
    qpos = task.qpos.clone()
    qpos[:, task._tq + 2] = (task.rest_z + 0.17).double()  # 17 cm above rest: past the 15 cm lift
    qpos[:, task._tq] += 0.15  # away from the hand, so it falls freely
    sim.reset(torch.arange(4), qpos, torch.zeros_like(task.qvel))
    return env, task


def test_tool_knocked_into_the_air_is_not_lifted_and_earns_no_held_lift():
    scales = {**ToolUseConfig().reward_scales, "lift": 1.0, "held_lift": 1.0}
    env, task = _tool_in_the_air(lift_hand_dist=0.05, reward_scales=scales)  # the hand must be around the tool
    _, _, _, _, info = env.step(hold_action(task))
    assert (info["reward_terms"]["lift_bonus"] == 0).all() and not task.lifted.any()
    assert (info["reward_terms"]["lift"] > 0.1).all()  # the plain DexPBT term pays any height
    assert (info["reward_terms"]["held_lift"] == 0).all()


def test_held_lift_pays_the_height_of_a_held_tool():
    scales = {**ToolUseConfig().reward_scales, "lift": 1.0, "held_lift": 1.0}
    env, task = _tool_in_the_air(lift_hand_dist=10.0, reward_scales=scales)  # any fingertip distance holds
    _, _, _, _, info = env.step(hold_action(task))
    assert torch.allclose(info["reward_terms"]["held_lift"], info["reward_terms"]["lift"])
    assert torch.allclose(info["reward_terms"]["held_lift"], torch.full((4,), 0.15))


def test_held_lift_keeps_paying_the_clipped_height_after_the_lift_while_lift_stops():
    scales = {**ToolUseConfig().reward_scales, "lift": 1.0, "held_lift": 1.0}
    env, task = _tool_in_the_air(lift_hand_dist=10.0, reward_scales=scales)
    env.step(hold_action(task))  # lifted in this step
    assert task.lifted.all()
    _, _, _, _, info = env.step(hold_action(task))
    height = task.step_measures.height
    assert (height > 0.15).all()  # still above the lift height, falling freely
    assert (info["reward_terms"]["lift"] == 0).all()  # the DexPBT term stops at the lift
    # holding the tool past the lift earns as much as holding it just below: no reward for hovering there
    assert torch.allclose(info["reward_terms"]["held_lift"], torch.full((4,), 0.15))


def test_lift_bonus_then_drop_terminates():
    env, task = _tool_in_the_air(lift_hand_dist=10.0)  # count any tool high enough as lifted
    _, _, term, _, info = env.step(hold_action(task))
    scales = ToolUseConfig().reward_scales
    assert torch.allclose(info["reward_terms"]["lift_bonus"], torch.full((4,), scales["lift_bonus"]))
    assert torch.allclose(info["reward_terms"]["lift"], torch.full((4,), 0.15 * scales["lift"]))
    assert not term.any()
    dropped = None
    for _ in range(30):
        _, _, term, _, info = env.step(hold_action(task))
        assert (info["reward_terms"]["lift_bonus"] == 0).all()  # paid once
        if term.any():
            dropped = info["episode"]["dropped"]
            break
    assert dropped is not None and (dropped == 1).all()


def test_per_world_randomization_changes_dynamics():
    def rollout(randomize):
        env = make(n=4, randomize=randomize, split="heldout_family", tools_per_family=1, **QUIET)
        task, sim = env.task, env.task.sim
        env.reset()
        ids = torch.arange(4)
        sim.reset(ids, task.qpos[:1].expand(4, -1).clone(), torch.zeros_like(task.qvel))
        task.targets[:] = task.targets[:1].clone()
        gen = torch.Generator().manual_seed(1)
        for _ in range(15):
            a = (torch.rand(1, env.num_actions, generator=gen) * 2 - 1).expand(4, -1)
            env.step(a.contiguous())
        return task.qpos.clone(), sim.model_field("body_mass")[:, task._tool_body], \
            sim.model_field("actuator_gainprm")[:, :, 0]

    q_nominal, mass_nominal, _ = rollout(False)
    assert (q_nominal - q_nominal[:1]).abs().max() == 0  # same tool, same actions: identical worlds
    assert mass_nominal.unique().numel() == 1
    q_dr, mass_dr, gain_dr = rollout(True)
    assert mass_dr.unique().numel() == 4 and gain_dr[:, 0].unique().numel() == 4
    lo, hi = ToolUseConfig().dynamics_range
    ratio = mass_dr / mass_nominal
    assert (ratio >= lo - 1e-9).all() and (ratio <= hi + 1e-9).all()
    assert (q_dr - q_dr[:1]).abs().amax(dim=1)[1:].min() > 1e-4  # every world moved differently


def test_each_world_collides_with_its_own_tool_geometry():
    env = make(n=12, randomize=False, curriculum=False, tools_per_family=4)
    task = env.task
    env.reset()
    for _ in range(40):
        env.step(hold_action(task))
    z = task._tool_pose()[:, 2]
    assert task.tool_id.unique().numel() > 3
    assert task.rest_z.max() - task.rest_z.min() > 0.004
    # each tool rests at the height its own (standalone) geometry gives, not the default model's
    assert torch.allclose(z, task.rest_z, atol=1.5e-3)


def test_curriculum_advances_reach_lift_goal():
    env = make(n=16, randomize=False, curriculum=True, curriculum_min_episodes=8)
    task = env.task
    assert task.stage == 0
    gen = torch.Generator().manual_seed(0)
    ids = torch.arange(16)
    task.steps[:] = 5
    task.reached[:] = True
    for _ in range(3):
        task.steps[:] = 5
        task.reached[:] = True
        task.reset(ids, gen)
    assert task.stage == 1
    # lift-stage goals sit above the spawn point, with the spawn orientation
    assert ((task.goal_pos[:, 2] - task.spawn_pos[:, 2]) > 0.1).all()
    for _ in range(4):
        task.steps[:] = 5
        task.lifted[:] = True
        task.reset(ids, gen)
    assert task.stage == 2
    low, high = torch.tensor(task.cfg.goal_region_low), torch.tensor(task.cfg.goal_region_high)
    assert ((task.goal_pos >= low) & (task.goal_pos <= high)).all()
    assert task.episode_metrics()["curriculum_stage"].eq(2).all()


def test_no_curriculum_starts_in_goal_stage_and_config_is_untouched():
    cfg = ToolUseConfig(arm="floating", curriculum=False)
    before = dataclasses.asdict(cfg)
    env = TaskEnv(cfg, SimConfig(num_envs=2, nthread=1))
    assert env.task.stage == 2
    assert dataclasses.asdict(cfg) == before
    held = TaskEnv(ToolUseConfig(arm="floating", split="heldout"), SimConfig(num_envs=2, nthread=1))
    assert held.task.stage == 2  # evaluation splits run the full 6-DoF goal task


def test_unknown_arm_and_split_are_explained():
    with pytest.raises(ValueError, match="valid arms"):
        make(n=2, arm="ur5")
    with pytest.raises(ValueError, match="valid splits"):
        make(n=2, split="test")


def test_preview_writes_contact_sheet(tmp_path):
    from robotrl.tasks.tool_use.preview import main

    out = tmp_path / "sheet.png"
    assert main(["--n", "3", "--size", "64", "--out", str(out)]) == 0
    import imageio.v2 as imageio

    img = imageio.imread(out)
    assert img.ndim == 3 and img.shape[0] > 100 and np.asarray(img).std() > 5


def test_observation_delay_and_object_pose_delay():
    from robotrl.tasks.tool_use import rewards as R

    env = make(n=4, randomize=True, dr_dynamics=False, dr_kicks=False, dr_object_pose=True,
               object_pos_noise=0.0, object_rot_noise=0.0, object_delay_max=3, obs_delay_max=2)
    task = env.task
    env.reset()
    task._obs_delay[:] = 2
    task._pose_delay[:] = 3
    qpos = task.qpos.clone()  # drop the tool from 20 cm, away from the hand, so it moves every step
    qpos[:, task._tq] += 0.15
    qpos[:, task._tq + 2] += 0.2
    task.sim.reset(torch.arange(4), qpos, torch.zeros_like(task.qvel))
    p = env.obs_dims["policy"]
    names = [name for name, size in task.obs_layout() for _ in range(size)]
    assert names[:24] == ["keypoints_rel_palm"] * 24 and names[51:63] == ["fingertips_rel_tool"] * 12
    assert "fingertips_rel_tool" not in names[63:]  # from index 63 on, nothing depends on the tool pose
    true_obs, poses, palms, seen = [], [], [], []
    gen = torch.Generator().manual_seed(0)
    for _ in range(8):
        obs, _, _, _, info = env.step(torch.rand(4, env.num_actions, generator=gen) * 2 - 1)
        assert "episode" not in info
        true_obs.append(obs["critic"][:, :p].clone())  # undelayed, noise-free policy features
        poses.append(task._tool_pose().clone())
        palms.append(task.xpos[:, task._palm].float().clone())
        seen.append(obs["policy"].clone())
    seen_pose = task._pose_hist[task._pose_delay, task._arange]
    assert torch.allclose(seen_pose, poses[-4])  # the tool pose the policy sees lags 3 steps
    for t in range(5, 8):
        # proprioception and the rest lag 2 steps (the whole observation is delayed) ...
        assert torch.allclose(seen[t][:, 63:], true_obs[t - 2][:, 63:], atol=1e-6)
        # ... and the keypoints come from the tool pose 3 steps before that observation
        kp = R.to_world(poses[t - 5][:, :3], poses[t - 5][:, 3:], task.kp_local)
        assert torch.allclose(seen[t][:, :24], (kp - palms[t - 2][:, None]).flatten(1), atol=1e-5)
        assert (seen[t][:, :24] - true_obs[t - 2][:, :24]).abs().max() > 1e-3  # a real lag, not a no-op


def test_tool_size_scale_reaches_every_world_and_the_observed_tool_extents():
    plain, bigger = make(8), make(8, tool_size_scale=[1.25, 1.25])
    for env in (plain, bigger):
        env.reset()
    # the same tool draws (same seed), each 1.25x the size in every world's model and in the observation
    assert torch.equal(plain.task.tool_id, bigger.task.tool_id)
    torch.testing.assert_close(bigger.task.bbox_half, 1.25 * plain.task.bbox_half)
    body = plain.sim.model.body("tool").id
    masses = [env.sim.model_field("body_mass")[:, body] for env in (plain, bigger)]
    assert torch.equal(plain.task.mass_scale, bigger.task.mass_scale)  # same randomization draws
    torch.testing.assert_close(masses[1], 1.25**3 * masses[0], rtol=1e-6, atol=0)  # density kept


def test_timestep_sets_the_physics_step_and_control_period_and_an_out_of_range_one_is_refused():
    from robotrl.tasks.tool_use import constants as C

    assert ToolUseConfig().timestep == C.TIMESTEP  # the config's default is the task's one physics step
    env = make(n=2, timestep=0.01, frame_skip=2)
    assert env.sim.model.opt.timestep == pytest.approx(0.01)
    assert env.task.step_dt == pytest.approx(0.02)  # 50 Hz control, as 0.005 s x 4
    assert env.max_episode_length == make(n=2).max_episode_length  # same control steps per episode
    time0 = env.sim._time_np.copy()
    env.step(torch.zeros(2, env.num_actions))
    np.testing.assert_allclose(env.sim._time_np - time0, 0.02, atol=1e-9)  # two 0.01 s physics steps
    for bad in (0.0, 0.02):
        with pytest.raises(ValueError, match=rf"task.timestep={bad}.*\(0, 0.01\]"):
            make(n=1, timestep=bad)
