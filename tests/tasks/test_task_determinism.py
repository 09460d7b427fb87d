"""Every random stream of a task derives from the env's seed (one generator, ``TaskEnv.gen``).

Two envs built with the same seed replay the same observations, rewards and episode ends
under the same actions (pushes, command resampling, kicks, goal switches, traffic, resets);
another seed gives another run; and the draws a task makes in ``update`` come from the
generator it is handed, not from a stream of its own.
"""

import pytest
import torch
from robotrl.tasks import config_class

from robotrl.envs.task_env import TaskEnv
from robotrl.sim.backend import SimConfig

# Short episodes, so that resets (which draw from the generator too) happen within the rollout.
CONFIGS = {
    "humanoid": {"episode_length_s": 0.3, "push_interval_s": 0.06, "command_resample_s": 0.045,
                 "action_delay_max": 2},
    "tool_use": {"arm": "floating", "tools_per_family": 4, "episode_length_s": 0.4, "kick_prob": 0.3},
    "driving": {"num_tracks": 4, "episode_length_s": 1.0, "num_traffic": 2, "scenario_prob": 1.0},
}
STEPS = 50


def make(task: str, seed: int, **overrides) -> TaskEnv:
    cfg = config_class(task)(**{**CONFIGS[task], **overrides})
    assert cfg.randomize  # domain randomization (and with it pushes and kicks) is on
    return TaskEnv(cfg, SimConfig(backend="cpu", num_envs=4, nthread=1), seed=seed)


def rollout(env: TaskEnv, steps: int) -> dict[str, torch.Tensor]:
    """Observations, rewards, reward terms and dones of ``steps`` steps of fixed random actions."""
    actions = torch.Generator().manual_seed(123)
    rows: dict[str, list[torch.Tensor]] = {"obs0": [env.reset()["policy"]]}
    ended = 0
    for _ in range(steps):
        action = torch.rand(env.num_envs, env.num_actions, generator=actions) * 2 - 1
        obs, reward, terminated, truncated, info = env.step(action)
        for key, value in {**obs, "reward": reward, "terminated": terminated, "truncated": truncated,
                           **info["reward_terms"]}.items():
            rows.setdefault(key, []).append(value.clone())
        ended += int(info["episode"]["return"].numel()) if "episode" in info else 0
    out = {key: torch.stack(values) for key, values in rows.items()}
    out["episodes_ended"] = torch.tensor(ended)
    return out


@pytest.mark.parametrize("task", sorted(CONFIGS))
def test_same_seed_same_run_other_seed_other_run(task):
    first, second, other = (rollout(make(task, seed), STEPS) for seed in (7, 7, 8))
    assert int(first["episodes_ended"]) > 0, "no reset happened: the test would not cover reset draws"
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), f"{task}: {key} differs between two runs with seed 7"
    assert not torch.equal(first["policy"], other["policy"])
    assert not torch.equal(first["reward"], other["reward"])


@pytest.mark.parametrize(
    ("task", "overrides"),
    [
        ("humanoid", {"command_resample_s": 0.001, "episode_length_s": 15.0}),  # a new command every step
        ("tool_use", {"kick_prob": 1.0, "episode_length_s": 12.0}),  # a kick and pose noise every step
    ],
)
def test_update_draws_from_the_generator_it_is_handed(task, overrides):
    envs = [make(task, 7, **overrides) for _ in range(2)]
    actions = torch.Generator().manual_seed(0)
    for _ in range(2):
        action = torch.rand(4, envs[0].num_actions, generator=actions) * 2 - 1
        before = [env.step(action)[0]["policy"] for env in envs]
    assert torch.equal(before[0], before[1])
    for env, seed in zip(envs, (100, 101), strict=True):  # from here on only update() draws
        env.gen.manual_seed(seed)
    after = [[], []]
    for _ in range(4):
        action = torch.rand(4, envs[0].num_actions, generator=actions) * 2 - 1
        for env, trajectory in zip(envs, after, strict=True):
            obs, _, _, _, info = env.step(action)
            assert "episode" not in info  # no reset: the difference below comes from update()
            trajectory.append(obs["policy"])
    assert not torch.equal(torch.stack(after[0]), torch.stack(after[1]))
