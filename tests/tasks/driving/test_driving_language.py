"""Language-conditioned driving: the instruction decides the speed band and the side of the road."""

import json
import math
from dataclasses import asdict

import pytest
import torch
from robotrl.tasks import task_config_from_meta
from robotrl.tasks.driving.language import rewards as R
from robotrl.tasks.driving.language.config import DrivingLanguageConfig
from robotrl.tasks.driving.language.instructions import HELDOUT_TEMPLATES, TRAIN_TEMPLATES, instruction_list
from robotrl.tasks.driving.language.task import SIM_VIEWS, WORLD_BUFFERS

from robotrl.envs.task_env import make_env
from robotrl.sim.backend import SimConfig

SLOW_LEFT, SLOW_RIGHT, FAST_LEFT, FAST_RIGHT = 0, 1, 2, 3


def _env(n=8, seed=0, image_size=None, **overrides):
    cfg = DrivingLanguageConfig(**{"num_tracks": 8, **overrides})
    return make_env(cfg, SimConfig(num_envs=n, nthread=1), seed=seed, image_size=image_size)


def _run(env, intent_of=lambda task: task.intent, episodes=16):
    """Success and followed fraction of ``episodes`` episodes of the teacher following ``intent_of(task)``."""
    env.reset()
    succ, follow, n = 0.0, 0.0, 0
    while n < episodes:
        _, _, _, _, info = env.step(env.task.scripted_action(intent_of(env.task)))
        if "episode" in info:
            succ += info["episode"]["success"].sum().item()
            follow += info["episode"]["followed_fraction"].sum().item()
            n += info["episode"]["success"].numel()
    return succ / n, follow / n


def _place(env, world, lateral_hw, speed):
    """Put the car of ``world`` at its current arc length, ``lateral_hw`` half-widths left, aligned, at ``speed``."""
    task = env.task
    tid = task.track_id[world : world + 1]
    p, h = task.bank.point_at(tid, task.s[world : world + 1])
    h = float(h[0])
    hw = float(task.bank.half_width[tid])
    pos = p[0] + lateral_hw * hw * torch.tensor([-math.sin(h), math.cos(h)])
    qpos = task.qpos[world : world + 1].clone()
    qpos[0, :2] = pos.double()
    qpos[0, 3:7] = torch.tensor([math.cos(0.5 * h), 0.0, 0.0, math.sin(0.5 * h)], dtype=torch.float64)
    qvel = torch.zeros(1, env.sim.model.nv, dtype=torch.float64)
    qvel[0, 0], qvel[0, 1] = speed * math.cos(h), speed * math.sin(h)
    env.sim.reset(torch.tensor([world]), qpos, qvel)


# --- instructions -----------------------------------------------------------------------
def test_heldout_paraphrases_share_no_template_or_text_with_training():
    assert not set(TRAIN_TEMPLATES) & set(HELDOUT_TEMPLATES)
    train, train_intent = instruction_list("train")
    held, held_intent = instruction_list("heldout")
    assert not set(train) & set(held)
    assert len(set(train)) == len(train) and len(set(held)) == len(held)  # every text names one intent only
    assert set(train_intent) == set(held_intent) == {0, 1, 2, 3}  # each split asks for every intent
    assert held[FAST_RIGHT] == HELDOUT_TEMPLATES[0].format(adv="fast", adj="fast", side="right")


def test_unknown_split_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match="train, heldout"):
        instruction_list("test")


def test_intent_bands_survive_a_config_rebuilt_from_checkpoint_metadata():
    # checkpoint metadata is JSON with sorted keys; the pace order must not depend on key order
    cfg = DrivingLanguageConfig(num_tracks=2, slow_band=[0.3, 0.7])
    meta = {"task": {"name": "driving_language", "config": json.loads(json.dumps(asdict(cfg), sort_keys=True))}}
    rebuilt = task_config_from_meta(meta)
    bands = [make_env(c, SimConfig(num_envs=1, nthread=1)).task._bands for c in (cfg, rebuilt)]
    assert torch.equal(bands[0], bands[1]) and bands[0][0].tolist() == pytest.approx([0.3, 0.7])


def test_each_world_draws_an_instruction_of_its_split_and_follows_its_intent():
    for split, templates in (("train", TRAIN_TEMPLATES), ("heldout", HELDOUT_TEMPLATES)):
        env = _env(n=32, seed=3, instruction_split=split)
        assert len(env.instructions) == 4 * len(templates)
        other = instruction_list("heldout" if split == "train" else "train")[0]
        assert not set(env.instructions) & set(other)
        drawn = set()
        for _ in range(3):
            obs = env.reset()
            task = env.task
            assert torch.equal(obs["instruction"], task.instruction)
            assert torch.equal(task.intent, task._instr_intent[task.instruction])
            assert torch.equal(task.pace_id, task.intent // 2)
            assert torch.equal(task.side_sign, 1.0 - 2.0 * (task.intent % 2).float())
            drawn |= set(obs["instruction"].tolist())
        assert len(drawn) >= len(env.instructions) // 2  # draws spread over the list, not one instruction


# --- success metric ---------------------------------------------------------------------
def test_band_functions_on_hand_worked_numbers():
    x = torch.tensor([0.2, 0.6, 1.0, 1.5])
    low, high = torch.full((4,), 0.4), torch.full((4,), 0.8)
    assert torch.allclose(R.band_distance(x, low, high), torch.tensor([0.2, 0.0, 0.2, 0.7]))
    assert torch.allclose(R.band_reward(x, low, high, 0.5), torch.tensor([3 / 7, 1.0, 3 / 7, 0.0]))  # 1 - |x-0.6|/0.7
    off = R.side_offset(torch.tensor([0.4, 0.4, -0.2]), torch.tensor([0.8, 0.8, 1.0]), torch.tensor([1.0, -1.0, -1.0]))
    assert torch.allclose(off, torch.tensor([0.5, -0.5, 0.2]))
    ok = R.following_success(
        torch.tensor([8.0, 7.0, 9.0, 0.0]),
        torch.tensor([10.0, 10.0, 10.0, 0.0]),
        torch.tensor([False, False, True, False]),
        0.8,
    )
    assert ok.tolist() == [True, False, False, False]


def test_constructed_states_are_in_or_out_of_the_commanded_bands():
    env = _env(n=4, randomize=False, action_delay_max=0)
    task = env.task
    for world in range(4):
        _place(env, world, lateral_hw=0.5, speed=0.6)  # slow, on the left
    task.set_intent(torch.arange(4), torch.tensor([SLOW_LEFT, SLOW_RIGHT, FAST_LEFT, FAST_RIGHT]))
    task.update(env.gen)
    assert task.speed_in.tolist() == [True, True, False, False]
    assert task.lane_in.tolist() == [True, False, True, False]
    assert torch.allclose(task.speed_score, torch.tensor([1.0, 1.0, 0.0, 0.0]))  # 1.0 m/s below the fast band
    assert torch.allclose(task.lane_score, torch.tensor([0.9375, 0.0, 0.9375, 0.0]))  # 1 - 0.05 / 0.8
    for world in range(4):
        _place(env, world, lateral_hw=-0.5, speed=2.0)  # fast, on the right
    task.update(env.gen)
    assert task.speed_in.tolist() == [False, False, True, True]
    assert task.lane_in.tolist() == [False, True, False, True]


def test_success_counts_only_steps_after_settling_and_fails_on_an_infraction():
    env = _env(n=2, randomize=False, action_delay_max=0, settle_s=0.5)
    task = env.task
    task.set_intent(torch.arange(2), torch.tensor([SLOW_LEFT, SLOW_LEFT]))
    for step in range(20):  # 1.0 s of in-band states: 10 steps settling, 10 counted
        for world in range(2):
            _place(env, world, lateral_hw=0.5, speed=0.6)
        task.update(env.gen)
        if step == 9:
            assert task.counted.tolist() == [0.0, 0.0] and not task.success().any()
    assert task.counted.tolist() == [10.0, 10.0] and task.followed.tolist() == [10.0, 10.0]
    assert task.success().tolist() == [True, True]
    _place(env, 1, lateral_hw=1.3, speed=0.6)  # off the road
    task.update(env.gen)
    assert task.success().tolist() == [True, False]


# --- observations -----------------------------------------------------------------------
def test_image_and_instruction_observations_through_the_vecenv():
    env = _env(n=4, image_size=(32, 48))
    obs = env.reset()
    assert obs["image"].shape == (4, 32, 48, 3) and obs["image"].dtype == torch.uint8
    assert obs["instruction"].shape == (4,) and obs["instruction"].dtype == torch.int64
    assert int(obs["instruction"].max()) < len(env.instructions)
    assert {v.device for v in obs.values()} == {env.device}
    assert obs["image"].float().std() > 5.0  # a rendered scene, not a blank frame
    for _ in range(10):
        obs, _, _, _, info = env.step(env.task.scripted_action())
    assert obs["image"].shape == (4, 32, 48, 3) and info["final_obs"]["instruction"].dtype == torch.int64
    assert "image" not in env.obs_dims and "instruction" not in env.obs_dims


def test_critic_sees_the_intent_and_the_policy_only_when_privileged():
    plain, privileged = _env(n=2), _env(n=2, privileged_instruction=True)
    base = sum(size for _, size in plain.task.obs_layout())
    assert plain.obs_dims["policy"] == base and plain.obs_dims["critic"] == base + 4
    extras = _env(n=2, privileged_critic=True)  # the driving critic's inputs, then the intent
    c = extras.task.cfg
    assert extras.obs_dims["critic"] == base + 6 + 3 * c.num_traffic + 2 * c.num_obstacles + 4
    assert extras.obs_dims["policy"] == base
    assert privileged.obs_dims["policy"] == sum(size for _, size in privileged.task.obs_layout()) == base + 4
    onehot = privileged.reset()["policy"][:, -4:]
    t = privileged.task
    assert torch.equal(onehot.argmax(1)[:1], t.pace_id[:1]) and torch.equal(onehot[:, 2:].argmax(1), t.intent % 2)


# --- the teacher ---------------------------------------------------------------------------
def test_teacher_succeeds_under_the_instruction_it_follows():
    success, follow = _run(_env(seed=1))
    assert success >= 0.95 and follow >= 0.9


@pytest.mark.parametrize("flip", [2, 1], ids=["other_pace", "other_side"])
def test_teacher_following_a_contradicting_instruction_fails_the_success_check(flip):
    success, follow = _run(_env(seed=2), intent_of=lambda task: task.intent ^ flip)
    assert success == 0.0 and follow < 0.2


# --- same-state groups (GRPO) -----------------------------------------------------------------
def test_copied_worlds_match_their_source_and_stay_together():
    env = _env(n=6, action_delay_max=0)  # 6 worlds: no task constant has a first dimension of 6
    task = env.task
    per_world = {k for k, v in vars(task).items() if isinstance(v, torch.Tensor) and v.shape[:1] == (6,)}
    assert per_world <= set(WORLD_BUFFERS) | set(SIM_VIEWS)  # copy_worlds misses no per-world buffer
    env.reset_groups(3)
    for name in (*WORLD_BUFFERS, "qpos", "qvel"):
        buf = getattr(task, name)
        assert torch.equal(buf[0], buf[2]) and torch.equal(buf[3], buf[5]), name
    assert not torch.equal(task.qpos[0], task.qpos[3])  # two groups, two start states
    for field in ("body_mass", "geom_friction", "geom_pos"):
        assert torch.equal(env.sim.model_field(field)[0], env.sim.model_field(field)[1]), field
    for _ in range(20):
        env.step(task.scripted_action())
    assert torch.allclose(task.qpos[0], task.qpos[2]) and torch.allclose(task.qpos[3], task.qpos[4])


def test_collect_cli_writes_driving_demos_with_images_and_instructions(tmp_path):
    from robotrl.cli import collect_main as main
    from robotrl.storage.demos import read_demos

    out = tmp_path / "driving.hdf5"
    assert (
        main(
            [
                "task=driving_language",
                "teacher=scripted",
                "image_size=32",
                "episodes=4",
                "num_envs=4",
                "task.episode_length_s=3.0",
                f"out={out}",
            ]
        )
        == 0
    )
    episodes, env_args = read_demos(out)
    ep = episodes[0]
    T = ep["actions"].shape[0]
    assert ep["extra_obs"]["image"].shape == (T, 32, 32, 3) and ep["extra_obs"]["image"].dtype == torch.uint8
    assert (ep["extra_obs"]["instruction"] == ep["extra_obs"]["instruction"][0]).all()  # one instruction per episode
    assert env_args["task"] == "driving_language" and all(e["success"] for e in episodes)


def test_hydra_config_composes_with_the_heldout_split(train_cfg):
    cfg = train_cfg("task=driving_language", "task.instruction_split=heldout")
    assert isinstance(cfg.task, DrivingLanguageConfig)
    assert cfg.task.instruction_split == "heldout" and cfg.task.num_obstacles == 0
    assert set(cfg.task.reward_scales) == {"route_gain", "infraction", "speed_band", "lane_band"}
