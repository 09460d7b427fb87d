"""Off-policy runner end to end on PointReach: SAC, BC from HDF5, residual on a BC base, RLPD,
checkpoints loadable by robotrl eval's loader and as frozen bases, resume, update threads."""

import json

import pytest
import torch

from robotrl.algos.bc import BCConfig
from robotrl.algos.residual import ResidualConfig
from robotrl.algos.sac import SACConfig
from robotrl.config import TrainConfig
from robotrl.data.collect import collect
from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.policies.frozen import ChunkExecutor, ModulePolicy, ResidualPolicy, load_frozen
from robotrl.policies.io import load_policy
from robotrl.runners.off_policy import OffPolicyRunner, evaluate_success
from robotrl.storage.demos import write_demos


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _cfg(algo, tmp_path, **kw):
    return TrainConfig(task=ReachConfig(num_envs=16), algo=algo, run_dir=str(tmp_path), progress=False,
                       tensorboard=False, save_interval=2, **kw)


def _env(reward="sparse", n=16, seed=0):
    return PointReach(ReachConfig(num_envs=n, reward=reward, radius=0.05), seed=seed)


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    path = tmp_path_factory.mktemp("demos") / "reach.hdf5"
    env = _env()
    write_demos(path, collect(env, lambda o: env.scripted_action(), episodes=32, noise=0.2), {"task": "reach"})
    return str(path)


def test_success_evaluation_separates_the_scripted_policy_from_a_still_one():
    env = _env()
    good = evaluate_success(env, lambda o: env.scripted_action())
    still = evaluate_success(_env(), lambda o: torch.zeros(16, 2))
    # a point that never moves only reaches goals already inside the radius: none with seed 0
    assert still == {"success": 0.0, "return": 0.0, "length": 50.0, "episodes": 16.0}
    # the scripted controller reaches every goal (at most 1.8 * sqrt(2) / 0.1 < 26 steps away)
    assert good["success"] == 1.0 and good["return"] == 1.0 and good["episodes"] == 16.0
    assert 1.0 < good["length"] < 26.0


def test_sac_runner_logs_checkpoints_and_resumes(tmp_path):
    algo = SACConfig(batch_size=64, learning_starts=64, actor_hidden=[32], critic_hidden=[32], steps_per_iteration=8)
    runner = OffPolicyRunner(_cfg(algo, tmp_path, max_iterations=3), tmp_path, env=_env("dense"))
    last = runner.learn()
    assert last["iteration"] == 3 and runner.env_steps == 3 * 8 * 16
    assert last["updates"] > 0 and "loss/critic" in last
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    policy, meta = load_policy(tmp_path)
    obs = torch.randn(5, 4)
    assert torch.allclose(policy.act_inference(obs), runner.algo.policy.act_inference(obs))
    base, _ = load_frozen(tmp_path, num_envs=5)
    assert isinstance(base, ModulePolicy) and torch.allclose(base.act(obs), policy.act_inference(obs))
    resumed = OffPolicyRunner(_cfg(algo, tmp_path, max_iterations=5, resume=True), tmp_path, env=_env("dense"))
    resumed.learn()
    assert resumed.iteration == 5 and resumed.algo.num_updates > runner.algo.num_updates


def test_bc_then_residual_on_the_bc_base_then_rlpd(tmp_path, demos):
    bc_dir, res_dir, rlpd_dir = tmp_path / "bc", tmp_path / "res", tmp_path / "rlpd"
    bc_cfg = BCConfig(dataset=demos, chunk=4, hidden=[64, 64], updates_per_iteration=50, eval_interval=0,
                      execution="open_loop")
    bc_runner = OffPolicyRunner(_cfg(bc_cfg, bc_dir, max_iterations=4), bc_dir, env=_env())
    algo = bc_runner.algo
    untrained = evaluate_success(_env(seed=1), algo.act, reset=algo.executor.reset)["success"]
    last = bc_runner.learn()
    # the runner's end-of-training evaluation scores the cloned policy: 1.0 with these seeds,
    # the untrained one 0.06 (a broken learner or an evaluation that ignores the policy fails)
    assert last["eval/episodes"] == 16 and untrained <= 0.25 and last["eval/success"] >= 0.75
    assert last["eval/return"] == pytest.approx(last["eval/success"])  # sparse reward: 1 per success
    base, meta = load_frozen(bc_dir, num_envs=16)
    assert isinstance(base, ChunkExecutor) and base.execution == "open_loop" and meta["algo"] == "bc"
    bc_eval, _ = load_policy(bc_dir)  # what robotrl eval uses: replans every step
    obs = torch.randn(3, 4)
    assert torch.equal(bc_eval.act_inference(obs), base.predict(obs))

    res_cfg = ResidualConfig(base=str(bc_dir), demos=demos, learning_starts=64, critic_warmup_updates=4,
                             batch_size=32, utd=1.0, actor_hidden=[32], critic_hidden=[32], steps_per_iteration=4)
    runner = OffPolicyRunner(_cfg(res_cfg, res_dir, max_iterations=4), res_dir, env=_env())
    assert runner.env.obs_dims["policy"] == 4 + 2
    assert runner.algo.sampler.num_demo(32) == 32  # no online data yet: all demos
    last = runner.learn()
    assert runner.algo.sampler.num_demo(32) == 16
    assert last["demo_fraction"] == pytest.approx(0.5)
    policy, meta = load_policy(res_dir)
    assert isinstance(policy, ResidualPolicy) and meta["base"] == str(bc_dir)
    obs = torch.randn(3, 4)
    composed = policy.act_inference(obs)
    assert composed.shape == (3, 2) and (composed - policy.base.act_inference(obs)).abs().max() <= 0.1 + 1e-6

    rlpd_cfg = ResidualConfig(demos=demos, learning_starts=64, batch_size=32, actor_hidden=[32], critic_hidden=[32])
    rlpd = OffPolicyRunner(_cfg(rlpd_cfg, rlpd_dir, max_iterations=1), rlpd_dir, env=_env())
    assert rlpd.algo.scale == 1.0 and not rlpd.algo.has_base
    assert torch.equal(rlpd.env.reset()["base_action"], torch.zeros(16, 2))


def test_residual_base_from_a_dataset_fits_bc_first(tmp_path, demos):
    cfg = ResidualConfig(base=demos, bc_iterations=3, learning_starts=32, batch_size=16, actor_hidden=[16],
                         critic_hidden=[16], steps_per_iteration=2)
    runner = OffPolicyRunner(_cfg(cfg, tmp_path, max_iterations=1), tmp_path, env=_env())
    assert runner.algo.has_base and runner.algo.sampler.demos is not None
    runner.learn()
    policy, meta = load_policy(tmp_path)
    assert meta["base_policy"]["kind"] == "chunk" and policy.base is not None


def test_bc_without_dataset_names_the_fix(tmp_path):
    with pytest.raises(ValueError, match="algo.dataset"):
        OffPolicyRunner(_cfg(BCConfig(), tmp_path, max_iterations=1), tmp_path, env=_env())


def test_off_policy_gradient_steps_run_with_update_threads_and_acting_with_torch_threads(tmp_path, thread_spy):
    algo = SACConfig(batch_size=64, learning_starts=64, actor_hidden=[32], critic_hidden=[32], steps_per_iteration=8)
    runner = OffPolicyRunner(_cfg(algo, tmp_path, max_iterations=2, torch_threads=1, update_threads=3,
                                  eval_at_end=False), tmp_path, env=_env("dense"))
    seen = thread_spy(runner.algo)
    runner.learn()
    assert seen["update"] and set(seen["update"]) == {3}  # 16 worlds x 8 steps: ready after the 4th step
    assert set(seen["act"]) == {1} and len(seen["act"]) == 16
    assert torch.get_num_threads() == 1
