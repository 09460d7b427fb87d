"""Slow: a short ResFiT run lifts a weak BC base's success on 4-D PointReach (sparse reward).

The setting is ``benchmarks/residual.py --part residual`` at half its env steps: a chunked BC base
fitted on 20 noisy scripted demonstrations succeeds on about a quarter of the eval worlds, and
16k env steps of residual learning (ResFiT, demos in a 50/50 batch) took seed 0 from 0.25 to 0.61
there. A residual that stops learning (a sign error, a broken target, a zeroed actor step) stays
at the base.
"""

import time

import pytest
import torch

from robotrl.algos.bc import BC, BCConfig
from robotrl.algos.residual import Residual, ResidualConfig, relabel_base_actions
from robotrl.data.collect import collect
from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.envs.residual import BaseActionEnv
from robotrl.runners.off_policy import evaluate_success
from robotrl.storage.demos import demos_to_buffer

REACH = dict(dim=4, radius=0.05, reward="sparse", max_episode_length=50)
WORLDS, EVAL_WORLDS, ENV_STEPS, SEED = 16, 256, 16_000, 0


def _eval_env(base):
    """The same 256 eval worlds on every call (fresh env, fixed seed, fresh chunk state)."""
    return BaseActionEnv(PointReach(ReachConfig(num_envs=EVAL_WORLDS, **REACH), seed=1000), base.spawn(EVAL_WORLDS))


@pytest.mark.slow
def test_short_residual_run_beats_its_bc_base_by_15_points(one_torch_thread):
    start = time.perf_counter()
    teacher = PointReach(ReachConfig(num_envs=8, **REACH), seed=SEED)
    demos = collect(teacher, lambda o: teacher.scripted_action(), episodes=20, noise=0.5, success_only=True,
                    seed=SEED)
    torch.manual_seed(SEED)
    bc = BC(demos, BCConfig(chunk=5, execution="ensemble", hidden=[128, 128], updates_per_iteration=50), "cpu",
            num_envs=1, seed=SEED)
    for _ in range(40):
        bc.update()
    base = bc.executor
    base_success = evaluate_success(_eval_env(base), lambda o: o["base_action"])["success"]

    env = BaseActionEnv(PointReach(ReachConfig(num_envs=WORLDS, **REACH), seed=SEED), base.spawn(WORLDS))
    cfg = ResidualConfig(actor_lr=3e-4, critic_lr=3e-4, critic_warmup_updates=500, learning_starts=1000, utd=4.0,
                         batch_size=256, actor_hidden=[64, 64], critic_hidden=[64, 64], explore_sigma=0.05,
                         scale=0.3, gamma=0.95)
    buffer = demos_to_buffer(demos, "cpu", True, *relabel_base_actions(base, demos, "cpu"))
    algo = Residual(env.obs_dims["policy"], REACH["dim"], cfg, WORLDS, "cpu", demos=buffer, seed=SEED)
    obs = env.reset()
    for _ in range(ENV_STEPS // WORLDS):
        action = algo.act(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        algo.process_step(obs, reward, terminated, truncated, info)
        if algo.ready():
            algo.update(obs)
    success = evaluate_success(_eval_env(base), lambda o: algo.policy(o["policy"]))["success"]
    print(f"base {base_success:.3f} -> residual {success:.3f} in {time.perf_counter() - start:.0f} s")
    assert base_success < 0.5, "the BC base should leave room to improve"
    assert success >= base_success + 0.15, (base_success, success)
