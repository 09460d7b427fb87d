"""TaskEnv behaviour on the humanoid: autoreset, time-outs, NaN recovery, randomization."""

import pytest
import torch
from robotrl.tasks.humanoid.config import HumanoidConfig

from robotrl.envs.task_env import TaskEnv
from robotrl.sim import SimConfig


def make(num_envs=4, **task_kwargs):
    cfg = HumanoidConfig(**{"randomize": False, "push_interval_s": 0.0, **task_kwargs})
    return TaskEnv(cfg, SimConfig(num_envs=num_envs, nthread=2), seed=0)


def test_step_shapes_and_named_reward_terms():
    env = make()
    obs = env.reset()
    assert obs["policy"].shape == (4, env.obs_dims["policy"]) and obs["policy"].dtype == torch.float32
    assert obs["critic"].shape[1] > obs["policy"].shape[1]  # privileged inputs
    _, reward, term, trunc, info = env.step(torch.zeros(4, env.num_actions))
    assert reward.shape == (4,) and term.dtype == torch.bool and trunc.dtype == torch.bool
    total = torch.stack(list(info["reward_terms"].values())).sum(0)
    assert torch.allclose(total, reward)
    assert set(info["reward_terms"]) == set(HumanoidConfig().reward_scales)


def test_time_out_truncates_autoresets_and_keeps_final_obs():
    env = make(episode_length_s=0.15)  # 10 control steps of 15 ms
    assert env.max_episode_length == 10
    env.reset()
    for step in range(1, 11):
        obs, _, term, trunc, info = env.step(torch.zeros(4, env.num_actions))
        if step < 10:
            assert not trunc.any()
    assert trunc.all() and not term.any()
    assert info["episode"]["length"].tolist() == [10.0] * 4
    assert (env.episode_step == 0).all()
    # obs is the fresh episode (torso back at 1.4 m); final_obs is the pre-reset state.
    assert torch.allclose(obs["policy"][:, 0], torch.full((4,), 1.4), atol=0.02)
    assert not torch.allclose(info["final_obs"]["policy"], obs["policy"])


def test_fall_terminates_and_is_not_a_time_out():
    env = make()
    env.reset()
    env.sim.bind("qpos")[1, 2] = 0.3  # torso on the floor
    _, _, term, trunc, info = env.step(torch.zeros(4, env.num_actions))
    assert term.tolist() == [False, True, False, False] and not trunc.any()
    assert info["episode"]["length"].tolist() == [1.0]


def test_healthy_z_sets_the_fall_heights():
    wide, gym = make(num_envs=2), make(num_envs=2, healthy_z=[1.0, 2.0])  # default [0.8, 2.1]; gymnasium's
    for env in (wide, gym):
        env.reset()
        env.sim.bind("qpos")[1, 2] = 0.9  # torso lower than gymnasium's healthy range allows
        _, _, term, _, _ = env.step(torch.zeros(2, env.num_actions))
        assert term.tolist() == [False, env is gym]
    with pytest.raises(ValueError, match="healthy_z"):
        make(healthy_z=[2.0, 1.0])


def test_nan_world_is_reset_and_counted_while_others_continue():
    ref, env = make(), make()
    ref.reset(), env.reset()
    actions = torch.linspace(-0.5, 0.5, 4 * ref.num_actions).reshape(4, -1)
    for _ in range(3):
        ref.step(actions), env.step(actions)
    env.sim.bind("qvel")[2, 0] = float("nan")
    obs_r, rew_r, *_ = ref.step(actions)
    obs, rew, term, trunc, info = env.step(actions)
    assert info["sim_resets"] == 1 and env.total_sim_resets == 1
    assert term[2] and rew[2] == 0.0
    assert torch.isfinite(obs["policy"]).all()
    others = [0, 1, 3]
    assert torch.equal(obs["policy"][others], obs_r["policy"][others])  # bit-identical
    assert torch.equal(rew[others], rew_r[others])
    assert env.episode_step[2] == 0
    # and the run goes on
    for _ in range(3):
        obs, *_ = env.step(actions)
    assert torch.isfinite(obs["policy"]).all()


def test_per_world_randomization_changes_the_dynamics():
    env = make(num_envs=2, randomize=True, friction_range=[1.0, 1.0], strength_range=[1.0, 1.0],
               mass_range=[0.5, 1.5], action_delay_max=0, obs_noise_std=0.0)
    env.reset()
    mass = env.sim.model_field("body_mass")
    assert not torch.allclose(mass[0], mass[1])
    # identical initial state and actions in both worlds, different masses -> different motion
    qpos0 = env.sim.bind("qpos")[0].clone()
    env.sim.reset(torch.arange(2), qpos0.expand(2, -1).clone(), torch.zeros(2, env.sim.bind("qvel").shape[1]))
    for _ in range(20):
        env.task.apply_action(torch.full((2, env.num_actions), 0.3))
        env.sim.step(5)
    qpos = env.sim.bind("qpos")
    assert (qpos[0] - qpos[1]).abs().max() > 1e-3


def test_same_parameters_give_bit_identical_worlds():
    env = make(num_envs=2)
    env.reset()
    qpos0 = env.sim.bind("qpos")[0].clone()
    env.sim.reset(torch.arange(2), qpos0.expand(2, -1).clone(), torch.zeros(2, env.sim.bind("qvel").shape[1]))
    for _ in range(20):
        env.task.apply_action(torch.full((2, env.num_actions), 0.3))
        env.sim.step(5)
    qpos = env.sim.bind("qpos")
    assert torch.equal(qpos[0], qpos[1])


def test_action_delay_holds_back_actions():
    env = make(num_envs=2, randomize=True, action_delay_max=2, friction_range=[1.0, 1.0])
    env.reset()
    env._delay[:] = torch.tensor([0, 2])
    a = torch.full((2, env.num_actions), 0.5)
    env.step(a)
    assert torch.allclose(env.task.action[0], a[0]) and torch.all(env.task.action[1] == 0)
    env.step(a), env.step(a)
    assert torch.allclose(env.task.action[1], a[1])


def test_action_delay_replays_each_worlds_history_across_wraps_and_resets():
    env = make(num_envs=3, randomize=True, action_delay_max=2, friction_range=[1.0, 1.0], episode_length_s=100.0)
    env.reset()
    env._delay[:] = torch.tensor([0, 1, 2])
    sent = [torch.full((3, env.num_actions), 0.1 * (t + 1)) for t in range(9)]  # more steps than the 3 slots
    for t, a in enumerate(sent):
        if t == 5:  # world 2 restarts: its history is zeroed, the others keep theirs
            env._reset_ids(torch.tensor([2]))
            env._delay[2] = 2
        env.step(a)
        for world, delay in enumerate((0, 1, 2)):
            since = 5 if world == 2 and t >= 5 else 0
            want = sent[t - delay][world] if t - delay >= since else torch.zeros(env.num_actions)
            assert torch.equal(env.task.action[world], want), (t, world)


def test_bad_action_shape_is_a_clear_error():
    env = make()
    with pytest.raises(ValueError, match="action must have shape"):
        env.step(torch.zeros(3, 2))


def _poison(env, term=None, obs_group=None, worlds=(1,), calls=None):
    """Make the task's reward ``term`` / observation ``obs_group`` NaN in ``worlds`` (a task bug).

    ``calls``: poison only that many calls (None: every call).
    """
    task = env.task
    left = [calls]

    def active():
        if left[0] is None:
            return True
        left[0] -= 1
        return left[0] >= 0

    rows = torch.tensor(worlds)
    if term is not None:
        original = task.reward_terms

        def reward_terms(action):
            terms = dict(original(action))
            if not active():
                return terms
            terms[term] = terms[term].clone()
            terms[term][rows] = float("nan")
            return terms

        task.reward_terms = reward_terms
    if obs_group is not None:
        observe = task.observe

        def poisoned_observe():
            obs = dict(observe())
            if active():
                obs[obs_group] = obs[obs_group].clone()
                obs[obs_group][rows, 0] = float("inf")
            return obs

        task.observe = poisoned_observe
    return original if term is not None else observe


def test_nan_reward_term_is_counted_per_term_and_world_and_resets_the_world():
    env = make()
    env.reset()
    _poison(env, term="alive", worlds=(1, 3))
    _, reward, term, trunc, info = env.step(torch.zeros(4, env.num_actions))
    assert set(info["nan_reward"]) == {"alive"}
    assert info["nan_reward"]["alive"].tolist() == [False, True, False, True]
    assert info["nan_obs"] == {} and info["nan_resets"] == 2 and info["sim_resets"] == 0
    assert term.tolist() == [False, True, False, True] and not trunc.any()
    assert torch.isfinite(reward).all() and reward[1] == 0 and reward[3] == 0 and reward[0] != 0
    assert info["episode"]["length"].tolist() == [1.0, 1.0]  # those two worlds were reset
    assert env.nan_counts == {"reward/alive": 2} and env.total_nan_resets == 2


def test_nan_observation_is_counted_zeroed_in_final_obs_and_resets_the_world():
    env = make()
    env.reset()
    _poison(env, obs_group="critic", worlds=(2,), calls=1)
    _, _, term, _, info = env.step(torch.zeros(4, env.num_actions))
    assert info["nan_obs"]["critic"].tolist() == [False, False, True, False] and info["nan_reward"] == {}
    assert term.tolist() == [False, False, True, False]
    assert torch.isfinite(info["final_obs"]["critic"]).all()
    assert env.nan_counts == {"obs/critic": 1}


def test_persistent_nan_term_fails_loudly_naming_the_term():
    env = make(nan_max_count=5, nan_max_fraction=0.0)
    env.reset()
    _poison(env, term="upright", worlds=(0, 1, 2, 3))
    env.step(torch.zeros(4, env.num_actions))  # 4 world-steps: within the limit of 5
    with pytest.raises(FloatingPointError, match="reward term 'upright'"):
        env.step(torch.zeros(4, env.num_actions))


def test_physics_failures_are_not_counted_as_task_nans():
    env = make()
    env.reset()
    env.sim.bind("qvel")[2, 0] = float("nan")
    _, _, _, _, info = env.step(torch.zeros(4, env.num_actions))
    assert info["sim_resets"] == 1 and env.nan_counts == {} and info.get("nan_resets", 0) == 0


def test_nan_observation_after_reset_is_counted_and_zeroed():
    env = make(nan_max_count=1000)
    env.reset()
    _poison(env, obs_group="critic", worlds=(2,))  # every call: also right after the reset
    obs, _, _, _, info = env.step(torch.zeros(4, env.num_actions))
    assert env.nan_counts == {"obs/critic": 2}  # the step, then the fresh episode's first observation
    assert torch.isfinite(obs["critic"]).all()


def _clone(value):
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value.clone() if isinstance(value, torch.Tensor) else value


def test_step_outputs_are_not_overwritten_by_the_next_step():
    # The task keeps its per-step signals in persistent buffers: nothing a step returns may alias them.
    env = make(episode_length_s=0.045)  # time-outs every 3 steps: episode stats and final_obs too
    env.reset()
    gen = torch.Generator().manual_seed(0)
    kept = []
    for _ in range(4):
        out = env.step(torch.rand(4, env.num_actions, generator=gen) * 2 - 1)
        kept.append((out, _clone(out)))
    for out, copy in kept:
        obs, reward, _, _, info = out
        assert all(torch.equal(obs[k], copy[0][k]) for k in obs) and torch.equal(reward, copy[1])
        for key in ("final_obs", "reward_terms", "episode"):
            assert all(torch.equal(v, copy[4][key][k]) for k, v in info.get(key, {}).items())
    assert any("episode" in out[4] for out, _ in kept)


def test_step_accepts_an_action_that_requires_grad_and_records_no_graph():
    env = make()
    env.reset()
    action = torch.zeros(4, env.num_actions, requires_grad=True)
    obs, reward, _, _, info = env.step(action * 1.0)
    assert not obs["policy"].requires_grad and not reward.requires_grad
    assert not any(v.requires_grad for v in info["reward_terms"].values())


def test_noisy_observation_rows_of_worlds_that_did_not_end_equal_final_obs():
    env = make(obs_noise_std=0.05)
    env.reset()
    env.step(torch.zeros(4, env.num_actions))
    env.episode_step[2] = env.max_episode_length - 1  # world 2 times out on the next step, the others go on
    obs, _, term, trunc, info = env.step(torch.zeros(4, env.num_actions))
    assert (term | trunc).tolist() == [False, False, True, False]
    others = [0, 1, 3]
    # one noise draw per observation: the replay's next_obs is exactly what the policy sees next
    assert torch.equal(obs["policy"][others], info["final_obs"]["policy"][others])
    assert not torch.allclose(obs["policy"][2], info["final_obs"]["policy"][2])  # the reset world's fresh obs
