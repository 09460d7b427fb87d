"""OffPolicyRunner + VLM rewards: the runner wraps the env when reward != none, and late scores
reach their replay transitions before the gradient steps that could sample them."""

import importlib.util
import json

import numpy as np
import pytest
import torch

from robotrl.algos.sac import SACConfig
from robotrl.config import TrainConfig
from robotrl.rewards.config import VLMRewardConfig
from robotrl.rewards.env import VLMRewardEnv
from robotrl.rewards.scorer import Scorer, ScorerStats, Scores, SyncScorer
from robotrl.runners.off_policy import OffPolicyRunner
from robotrl.sim.backend import SimConfig

DELAY = 3  # a score becomes ready DELAY env steps after its frame was submitted
N, STEPS_PER_IT, ITERS = 3, 6, 3


def brightness(frames: np.ndarray) -> torch.Tensor:
    """A frame-content score: any mix-up of worlds or steps changes it."""
    return torch.from_numpy(frames.reshape(len(frames), -1).astype(np.float32).mean(1) / 255.0)


class DelayedScorer(Scorer):
    """Deterministic lateness: the scores of a ``submit`` are ready ``DELAY`` submits later."""

    def __init__(self) -> None:
        self.stats = ScorerStats()
        self._queue: list[tuple[int, Scores]] = []
        self._calls = 0

    def submit(self, worlds, steps, frames):
        self._calls += 1
        self.stats.submitted += len(frames)
        self.stats.scored += len(frames)
        self._queue.append((self._calls, Scores(worlds.long(), steps.long(), brightness(frames))))

    def _take(self, ready):
        out = [s for c, s in self._queue if ready(c)]
        self._queue = [(c, s) for c, s in self._queue if not ready(c)]
        return Scores.cat(out)

    def collect(self):
        return self._take(lambda c: self._calls - c >= DELAY)

    def flush(self, timeout_s=600.0):
        return self._take(lambda c: True)


def _task_env(seed=3):
    from robotrl.tasks import config_class

    from robotrl.envs.task_env import make_env

    return make_env(config_class("humanoid")(randomize=False), SimConfig(num_envs=N, nthread=1), seed=seed)


def _reward_cfg(mode):
    return VLMRewardConfig(name="vlm_rm", mode=mode, scale=2.0, image_size=[24, 24])


def test_late_vlm_scores_land_on_their_replay_slots_before_each_gradient_step(tmp_path):
    torch.manual_seed(0)
    env = VLMRewardEnv(_task_env(), _reward_cfg("async"), DelayedScorer())
    algo = SACConfig(batch_size=8, learning_starts=4 * N, actor_hidden=[16], critic_hidden=[16],
                     steps_per_iteration=STEPS_PER_IT, buffer_size=100 * N)
    cfg = TrainConfig(algo=algo, run_dir=str(tmp_path), progress=False, tensorboard=False,
                      save_interval=100, max_iterations=ITERS)
    runner = OffPolicyRunner(cfg, tmp_path, env=env)
    replay = runner.algo.replay
    seen = []  # (env steps taken, replay rewards) at every gradient step
    step_fn = runner.algo.gradient_step
    runner.algo.gradient_step = lambda: (seen.append((env.t, replay.reward[:replay.size].clone())), step_fn())[1]
    last = runner.learn()
    T = ITERS * STEPS_PER_IT
    assert replay.size == T and len(seen) > 0 and last["vlm/relabelled"] > 0

    # the reference: the same actions through a sync env (scores added at the step)
    ref = VLMRewardEnv(_task_env(), _reward_cfg("sync"), SyncScorer(brightness))
    ref.reset()
    full, term = torch.zeros(T, N), torch.zeros(T, N)
    for t in range(T):
        _, full[t], _, _, info = ref.step(replay.action[t])
        term[t] = info["reward_terms"]["vlm_rm"]
    assert float(term.abs().min()) > 0  # every transition has a nonzero VLM term to land
    base = full - term
    for t_now, rewards in seen:
        # after step t_now - 1 the scores of steps s <= t_now - 1 - DELAY were ready and relabelled
        done = t_now - DELAY
        torch.testing.assert_close(rewards[:done], full[:done])
        torch.testing.assert_close(rewards[done:t_now], base[done:t_now])
    env.scorer._calls += DELAY  # the rest become ready
    env.relabel_replay(replay)
    torch.testing.assert_close(replay.reward[:T], full)


_MISSING = [m for m in ("torchvision", "open_clip") if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(_MISSING), reason=f"needs the vlm extra (missing {_MISSING})")
def test_off_policy_runner_wraps_the_env_with_the_configured_vlm_term(tmp_path, train_cfg):
    import open_clip

    from robotrl.rewards.torchvision_compat import prepare_torchvision

    prepare_torchvision()
    arch = {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 8,
                                           "head_width": 8},
            "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16, "heads": 2, "layers": 1}}
    cfg_path = tmp_path / "robotrl-tiny-clip-runner.json"
    cfg_path.write_text(json.dumps(arch))
    open_clip.add_model_config(str(cfg_path))
    torch.manual_seed(0)
    ckpt = tmp_path / "tiny.pt"
    torch.save({"state_dict": open_clip.create_model("robotrl-tiny-clip-runner").state_dict()}, ckpt)
    cfg = train_cfg("task=humanoid", "algo=sac", "sim.num_envs=2", "sim.nthread=1", "reward=vlm_rm",
                    "reward.mode=sync", "reward.image_size=[32,32]", "reward.encoder.backend=open_clip",
                    f"reward.encoder.checkpoint={ckpt}", f"reward.encoder.model_config={cfg_path}",
                    "algo.steps_per_iteration=2", "algo.learning_starts=1000", "max_iterations=1",
                    f"run_dir={tmp_path}", "progress=false", "tensorboard=false")
    runner = OffPolicyRunner(cfg, tmp_path)
    assert isinstance(runner.env, VLMRewardEnv) and runner.env.term == "vlm_rm"
    runner.learn()
    assert runner.env.scorer.stats.scored == 2 * 2  # 2 steps x 2 worlds, scored by the tiny CLIP
    assert float(runner.algo.replay.reward[:2].abs().sum()) > 0
