"""The tool-use curriculum goes out through ``state_dict`` and back in through ``load_state_dict``."""

import pytest
import torch
from robotrl.tasks.tool_use.config import ToolUseConfig
from robotrl.tasks.tool_use.curriculum import GOAL_STAGE

from robotrl.envs.task_env import TaskEnv
from robotrl.rotations import quat_angle_between
from robotrl.sim.backend import SimConfig


def make(n=4, **kw):
    cfg = ToolUseConfig(**{"arm": "floating", "randomize": False, **kw})
    return TaskEnv(cfg, SimConfig(backend="cpu", num_envs=n, nthread=1), seed=0)


def goal_tilt(task):
    """``(N,)`` angle between each world's goal and spawn orientations (lift goals of stages 0-1 keep it)."""
    return quat_angle_between(task.goal_quat, task.spawn_quat)


def advance_to_lift_stage(task):
    """Finish enough episodes in which every fingertip reached the tool to leave the reach stage."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.arange(task.num_envs)
    while task.stage == 0:
        task.steps[:] = 5
        task.reached[:] = True
        task.reset(ids, gen)


def test_state_dict_round_trip_restores_stage_on_a_fresh_task():
    trained = make(curriculum_min_episodes=8).task
    advance_to_lift_stage(trained)
    state = trained.state_dict()
    assert set(state) == {"stage", "stage_episodes", "rates", "goal_scale", "goal_rate"}
    assert state["stage"].dtype == torch.int64 and state["stage"].ndim == 0 and int(state["stage"]) == 1
    assert state["stage_episodes"].dtype == torch.int64 and state["stage_episodes"].ndim == 0
    assert float(state["rates"][0]) > 0.0  # the reach rate that advanced the stage

    fresh = make(curriculum_min_episodes=8).task
    assert fresh.stage == 0
    fresh.load_state_dict(state)
    assert fresh.stage == 1
    restored = fresh.state_dict()
    for key, value in state.items():
        assert torch.equal(restored[key], value), key
    state["rates"].zero_()  # the task holds its own copy
    assert float(fresh.state_dict()["rates"][0]) > 0.0


def test_eval_on_train_split_runs_the_loaded_goal_stage():
    env = make()  # split=train with the curriculum: a fresh task starts in the reach stage
    task = env.task
    assert task.stage == 0 and torch.equal(task.goal_quat, task.spawn_quat)  # lift goals keep the spawn orientation
    task.load_state_dict({"stage": torch.tensor(GOAL_STAGE)})
    assert task.stage == GOAL_STAGE
    obs, *_ = env.step(torch.zeros(4, env.num_actions))
    # the goals in flight were redrawn as random 6-DoF goals, inside the goal region
    assert (goal_tilt(task) > 1e-2).all()
    low, high = torch.tensor(task.cfg.goal_region_low), torch.tensor(task.cfg.goal_region_high)
    assert ((task.goal_pos >= low) & (task.goal_pos <= high)).all()
    assert (obs["critic"][:, -1] == 1.0).all()  # the critic sees stage / 2
    env.reset()
    assert task.stage == GOAL_STAGE and (goal_tilt(task) > 1e-2).all()
    assert task.episode_metrics()["curriculum_stage"].eq(GOAL_STAGE).all()


def test_loading_the_same_stage_keeps_the_goals_in_flight():
    env = make()
    task = env.task
    goals = task.goal_pos.clone()
    task.load_state_dict(task.state_dict())
    env.step(torch.zeros(4, env.num_actions))
    assert torch.equal(task.goal_pos, goals)


def test_heldout_split_stays_in_goal_stage_and_bad_state_is_explained():
    task = make(split="heldout").task
    task.load_state_dict({"stage": torch.tensor(0)})
    assert task.stage == GOAL_STAGE  # held-out splits always run the full task
    with pytest.raises(ValueError, match="stage must be in 0..2"):
        task.load_state_dict({"stage": torch.tensor(3)})
    with pytest.raises(KeyError, match="valid keys"):
        task.load_state_dict({"stages": torch.tensor(1)})


def goal_stage_task(**kw):
    task = make(curriculum_min_episodes=8, **kw).task
    task.load_state_dict({"stage": torch.tensor(GOAL_STAGE), "goal_scale": torch.tensor(task.cfg.goal_scale_init)})
    return task


def test_goal_stage_starts_with_goals_near_the_lift_goal_and_a_small_rotation():
    task = goal_stage_task(goal_scale_init=0.1)
    assert task.curriculum.goal_scale == pytest.approx(0.1)
    gen = torch.Generator().manual_seed(1)
    ids = torch.arange(task.num_envs)
    far = []
    for _ in range(20):
        task._new_goal(ids, gen)
        anchor = task.spawn_pos + torch.tensor([0.0, 0.0, task.cfg.lift_goal_height])
        far.append((task.goal_pos - anchor).norm(dim=1))
        assert (goal_tilt(task) <= 0.1 * task.cfg.goal_rot_range + 1e-3).all()
    far = torch.cat(far)
    # a tenth of the way to the goal region (anchor-to-region distances here are below 0.6 m)
    assert far.max() < 0.06 and far.mean() > 0.003


def test_goal_scale_widens_only_after_enough_episodes_reach_goals_and_stops_at_one():
    task = goal_stage_task(goal_scale_init=0.5, goal_scale_step=0.25, goal_scale_threshold=0.2, curriculum_ema=0.5)
    cur = task.curriculum
    no, yes = torch.zeros(8, dtype=torch.bool), torch.ones(8, dtype=torch.bool)
    assert not cur.record(yes, yes, no)  # no goals: the scale stays
    assert cur.goal_scale == 0.5
    assert cur.record(yes, yes, yes)  # 8 episodes, all with a goal: rate above 0.2
    assert cur.goal_scale == 0.75 and cur.stage_episodes == 0
    assert not cur.record(yes[:4], yes[:4], yes[:4])  # too few episodes at the new scale
    assert cur.record(yes[:4], yes[:4], yes[:4])
    assert cur.goal_scale == 1.0
    assert not cur.record(yes, yes, yes) and cur.goal_scale == 1.0  # the full task: nothing more to widen


def test_goal_scale_is_restored_from_state_and_old_checkpoints_load_the_full_goals():
    trained = goal_stage_task(goal_scale_init=0.3)
    state = trained.state_dict()
    fresh = make().task
    fresh.load_state_dict(state)
    assert fresh.stage == GOAL_STAGE and fresh.curriculum.goal_scale == pytest.approx(0.3)
    old = make().task
    old.load_state_dict({k: v for k, v in state.items() if k not in ("goal_scale", "goal_rate")})
    assert old.curriculum.goal_scale == 1.0  # trained before the goal scale existed, on the full goals
    heldout = make(split="heldout").task
    heldout.load_state_dict(state)
    assert heldout.curriculum.goal_scale == 1.0  # held-out splits always run the full task
    with pytest.raises(ValueError, match="goal_scale must be in"):
        fresh.load_state_dict({"goal_scale": torch.tensor(0.0)})
    with pytest.raises(ValueError, match="goal_scale_init"):
        make(goal_scale_init=1.5)


def test_goal_tolerances_tighten_linearly_with_the_goal_scale_to_the_task_tolerances():
    task = goal_stage_task(goal_scale_init=0.25, goal_pos_tol=0.04, goal_rot_tol=0.4, goal_pos_tol_start=0.12,
                           goal_rot_tol_start=2.0)
    pos, rot = task.curriculum.goal_tolerances()
    assert pos == pytest.approx(0.12 - 0.25 * 0.08) and rot == pytest.approx(2.0 - 0.25 * 1.6)
    task.curriculum.goal_scale = 1.0
    assert task.curriculum.goal_tolerances() == pytest.approx((0.04, 0.4))
    heldout = make(split="heldout", goal_pos_tol_start=0.12).task
    assert heldout.curriculum.goal_tolerances() == pytest.approx((0.04, 0.4))  # the full task's tolerances
