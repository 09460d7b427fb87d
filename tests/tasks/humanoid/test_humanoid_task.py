"""Humanoid task: the clocked events (command resamples, pushes) fire on every world's own period."""

import torch
from robotrl.tasks.humanoid.config import HumanoidConfig

from robotrl.envs.task_env import TaskEnv
from robotrl.sim import SimConfig

DT = 0.015  # the humanoid's control period (frame_skip * timestep)


def test_resamples_and_pushes_fire_exactly_on_each_worlds_period_across_staggered_resets():
    cfg = HumanoidConfig(randomize=True, command_resample_s=3 * DT, push_interval_s=5 * DT, episode_length_s=100.0)
    env = TaskEnv(cfg, SimConfig(num_envs=4, nthread=1), seed=0)
    task = env.task
    assert task._resample_every == 3 and task._push_every == 5
    fired: dict[str, list[set[int]]] = {"resample": [], "push": []}
    resample, push = task._resample, task._push

    def record_resample(ids, gen):
        fired["resample"][-1] |= set(ids.tolist())
        resample(ids, gen)

    def record_push(due, gen):
        fired["push"][-1] |= set(due.nonzero().squeeze(1).tolist())
        push(due, gen)

    task._resample, task._push = record_resample, record_push
    resets = {4: [1], 9: [2, 3], 10: [1], 22: [0]}  # world clocks out of phase with each other
    checked = {"resample": 0, "push": 0}
    for t in range(40):
        if t in resets:
            task.reset(torch.tensor(resets[t]), env.gen)
        fired["resample"].append(set())
        fired["push"].append(set())
        task.update(env.gen)
        steps = task.steps
        for name, period in (("resample", 3), ("push", 5)):
            expected = set((steps % period == 0).nonzero().squeeze(1).tolist())
            assert fired[name][-1] == expected, (t, name, steps.tolist(), fired[name][-1])
            checked[name] += len(expected)
    # every world had events, at different steps: the schedule was exercised, not trivially empty
    assert checked["resample"] >= 40 and checked["push"] >= 24
    assert len({frozenset(f) for f in fired["resample"] if f}) > 2


def test_gpu_recipe_gives_every_randomized_field_a_per_world_copy(train_cfg):
    cfg = train_cfg("task=humanoid_gpu", "sim=warp")
    assert cfg.task.name == "humanoid" and cfg.sim.backend == "warp" and cfg.sim.num_envs >= 4096
    # HumanoidTask.randomize and apply_scenario write these two per world; Warp needs them declared
    assert {"geom_friction", "body_mass"} <= set(cfg.sim.per_world_fields)
    assert cfg.algo.num_steps * cfg.sim.num_envs // cfg.algo.num_minibatches >= 16384  # GPU-sized mini-batches


def test_contact_timeconst_range_makes_each_worlds_contacts_stiffer_so_the_feet_rest_higher():
    import pytest

    def feet_rest_gap(timeconst):
        """Per world: the feet's smallest signed contact distance once landed (zero action, no pushes)."""
        cfg = HumanoidConfig(contact_timeconst_range=timeconst, push_interval_s=0.0, init_noise=0.0)
        env = TaskEnv(cfg, SimConfig(num_envs=4, nthread=1), seed=0)
        env.reset()
        for _ in range(16):  # dropped from its spawn height, it lands at about step 12
            env.step(torch.zeros(4, env.num_actions))
        gaps = []
        for w in range(4):
            _, data = env.sim.get_world(w)
            assert data.ncon >= 2  # both feet on the floor
            gaps.append(float(data.contact.dist[: data.ncon].min()))
        return env, gaps

    env, stiff = feet_rest_gap([0.006, 0.008])
    solref = env.sim.model_field("geom_solref")[..., 0]
    assert torch.all((solref >= 0.006) & (solref <= 0.008)) and len(set(solref[:, 0].tolist())) == 4
    assert torch.all(solref == solref[:, :1])  # one draw per world, for every geom
    _, soft = feet_rest_gap([])  # the model's own 0.02 s: softer, the feet sink in further
    assert min(stiff) > max(soft) + 5e-4
    with pytest.raises(ValueError, match=r"contact_timeconst_range=\[0.001, 0.01\]: give \[low, high\] with 0.006"):
        TaskEnv(HumanoidConfig(contact_timeconst_range=[0.001, 0.01]), SimConfig(num_envs=1, nthread=1), seed=0)
