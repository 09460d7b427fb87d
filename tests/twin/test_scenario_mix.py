"""task.scenarios + task.scenario_mix: the mined regions reach the task's resets."""

import torch

from robotrl.twin.scenarios import Region, ScenarioFile


def _env(path, mix, n=200):
    from robotrl.tasks.humanoid.config import HumanoidConfig
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    cfg = HumanoidConfig(scenarios=str(path), scenario_mix=mix, standing_prob=0.0)
    return TaskEnv(cfg, SimConfig(num_envs=n, nthread=1), seed=0), HumanoidTask.scenario_params


def test_scenario_mix_reaches_the_resets(tmp_path):
    from robotrl.tasks.humanoid.task import HumanoidTask

    region = Region(bounds={"cmd_vx": [1.4, 1.5], "friction": [0.4, 0.45]}, failure_rate=1.0, samples=10)
    path = ScenarioFile("humanoid", HumanoidTask.scenario_params, [region]).save(tmp_path / "s.yaml")
    env, _ = _env(path, 0.5)
    vx, fr = env.task.command[:, 0], env.task.friction_scale
    in_region = (vx >= 1.4) & (fr <= 0.45)
    frac = in_region.float().mean().item()
    assert 0.35 < frac < 0.65  # about half the worlds, the rest from the task's own ranges (friction >= 0.6)
    got = env.sim.model_field("geom_friction")[in_region][:, :, 0]
    assert torch.allclose(got, torch.as_tensor(env.sim.model.geom_friction[:, 0]) * fr[in_region, None].double())
    env_off, _ = _env(path, 0.0)
    assert not ((env_off.task.command[:, 0] >= 1.4) & (env_off.task.friction_scale <= 0.45)).any()


def test_unknown_scenario_parameter_is_an_error(tmp_path):
    import pytest
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.twin.scenarios import ScenarioParam

    params = [*HumanoidTask.scenario_params, ScenarioParam("handle_thickness", 0.0, 1.0)]
    path = ScenarioFile("humanoid", params, [Region({"handle_thickness": [0, 0.1]}, 1.0, 5)]).save(tmp_path / "b.yaml")
    with pytest.raises(ValueError, match="handle_thickness"):
        _env(path, 0.5, n=4)


def _task_env(task, path, mix, n, **overrides):
    from robotrl.tasks import config_class

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    cfg = config_class(task)(scenarios=str(path), scenario_mix=mix, **overrides)
    return TaskEnv(cfg, SimConfig(num_envs=n, nthread=1), seed=0)


def test_driving_scenarios_set_friction_obstacles_and_track(tmp_path):
    from robotrl.tasks.driving.scenario_params import SCENARIO_PARAMS, scenario_of

    region = Region(bounds={"friction": [0.3, 0.4], "obstacles": [1, 1], "half_width": [0.3, 0.45]},
                    failure_rate=1.0, samples=10)
    path = ScenarioFile("driving", SCENARIO_PARAMS, [region]).save(tmp_path / "d.yaml")
    env = _task_env("driving", path, 1.0, 16, half_width=[0.3, 1.0], num_tracks=32)
    got = scenario_of(env.task, torch.arange(16))
    assert ((got["friction"] >= 0.3 - 1e-6) & (got["friction"] <= 0.4 + 1e-6)).all()
    wheels = env.sim.model_field("geom_friction")[:, env.task._wheel_geoms, 0]
    assert torch.allclose(wheels / float(env.task._base_friction[env.task._wheel_geoms[0], 0]),
                          got["friction"][:, None].double(), atol=1e-6)
    assert got["half_width"].max() < 0.55  # the narrowest tracks of a bank drawn from [0.3, 1.0]
    assert env.task.active.all()
    on_road = (env.task.obstacle_xy.abs() < 100).all(-1).sum(1)
    assert (on_road == 1).all()
    env_off = _task_env("driving", path, 0.0, 16, half_width=[0.3, 1.0], num_tracks=32)
    assert scenario_of(env_off.task, torch.arange(16))["friction"].min() >= 1.0 - 1e-6


def test_driving_mined_narrow_widths_add_tracks_only_the_width_resets_reach(tmp_path):
    from robotrl.tasks.driving.scenario_params import SCENARIO_PARAMS, track_features

    narrow = Region(bounds={"half_width": [0.3, 0.45]}, failure_rate=0.9, samples=20)
    curvy = Region(bounds={"max_curvature": [0.6, 0.7]}, failure_rate=0.9, samples=20)
    path = ScenarioFile("driving", SCENARIO_PARAMS, [narrow, curvy]).save(tmp_path / "w.yaml")
    env = _task_env("driving", path, 0.5, 64, half_width=[0.6, 1.0], num_tracks=16, scenario_tracks=8)
    task = env.task
    assert task.num_reset_tracks == 16 and len(task.bank.tracks) == 24
    added = task.bank.half_width[16:]
    assert (added >= 0.3 - 1e-6).all() and (added <= 0.45 + 1e-6).all()
    assert (task.bank.half_width[:16] >= 0.6 - 1e-6).all()
    gen = torch.Generator().manual_seed(1)
    ids = torch.arange(64)
    seen_added = torch.zeros(64, dtype=torch.bool)
    drawn = []
    own_draws = task.scenario_draws
    task.scenario_draws = lambda i, g: drawn.append(own_draws(i, g)) or drawn[-1]  # record what reset drew
    for _ in range(4):
        task.reset(ids, gen)  # a plain reset, then the mined draws of about half the worlds
        chosen, draws = drawn[-1]
        width_asked = torch.zeros(64, dtype=torch.bool)
        width_asked[chosen] = ~torch.isnan(draws["half_width"])
        on_added = task.track_id >= 16
        assert not (on_added & ~width_asked).any()  # plain resets and curvature-only draws keep the 16 tracks
        assert on_added[width_asked].all()  # every width draw below 0.6 m lands on an added narrow road
        seen_added |= on_added
    assert seen_added.any()
    curv = track_features(task)["max_curvature"]
    task.apply_scenario(ids[:8], {"max_curvature": curv[16:]}, gen)  # exactly the added tracks' curvatures
    assert (task.track_id[:8] < 16).all()  # ... but no width asked: the nearest of the 16
    task.apply_scenario(ids[:8], {"max_curvature": curv[16:], "half_width": task.bank.half_width[16:]}, gen)
    assert torch.equal(task.track_id[:8], torch.arange(16, 24))
    # the same file mixed in at 0, or a region inside task.half_width: no added tracks
    assert len(_task_env("driving", path, 0.0, 4, num_tracks=16).task.bank.tracks) == 16
    inside = ScenarioFile("driving", SCENARIO_PARAMS, [Region({"half_width": [0.7, 0.8]}, 0.9, 20)])
    env_in = _task_env("driving", inside.save(tmp_path / "i.yaml"), 0.5, 4, half_width=[0.6, 1.0], num_tracks=16)
    assert len(env_in.task.bank.tracks) == 16


def test_tool_use_scenarios_pick_tool_family_and_goal(tmp_path):
    from robotrl.tasks.tool_use.scenario_params import SCENARIO_PARAMS

    region = Region(bounds={"tool_family": [4, 4], "goal_z": [0.35, 0.36], "tool_mass": [1.9, 2.0]},
                    failure_rate=1.0, samples=10)
    path = ScenarioFile("tool_use", SCENARIO_PARAMS, [region]).save(tmp_path / "t.yaml")
    env = _task_env("tool_use", path, 0.5, 32, curriculum=False)
    task = env.task
    eraser = task.pool_fields["family"][task.tool_id] == 4
    in_region = eraser & (task.goal_pos[:, 2] >= 0.35) & (task.mass_scale >= 1.9)
    assert 0.25 < in_region.float().mean().item() < 0.75
    assert torch.allclose(task.mocap_pos[in_region, 0, 2].float(), task.goal_pos[in_region, 2])
    tool_z = task.qpos[in_region, task._tq + 2].float()
    assert torch.allclose(tool_z, task.spawn_pos[in_region, 2], atol=1e-6)  # spawned at the eraser's height


def test_humanoid_scenario_pushes_are_fixed_per_world(tmp_path):
    from robotrl.tasks.humanoid.task import HumanoidTask

    region = Region(bounds={"push_vel": [1.0, 1.0], "push_dir": [1.5708, 1.5708]}, failure_rate=1.0, samples=5)
    path = ScenarioFile("humanoid", HumanoidTask.scenario_params, [region]).save(tmp_path / "p.yaml")
    env = _task_env("humanoid", path, 1.0, 4, randomize=False, push_interval_s=0.015)  # a push every step
    vy_before = env.task.qvel[:, 1].clone()
    assert torch.allclose(env.task.push, torch.tensor([[0.0, 1.0]]).expand(4, 2), atol=1e-4)
    env.step(torch.zeros(4, 17))
    assert (env.task.qvel[:, 1] - vy_before > 0.8).all()  # about +1 m/s sideways from the push


def test_point_scenario_draws_exactly_its_values_and_rejects_bad_ones():
    import pytest
    from robotrl.tasks.humanoid.task import HumanoidTask
    from robotrl.tasks.tool_use.task import ToolUseTask

    from robotrl.twin.scenarios import point_scenario

    point = point_scenario("humanoid", HumanoidTask.scenario_params, {"cmd_vx": 1.2, "friction": 0.6})
    draws = point.sample(5, torch.Generator().manual_seed(0))
    assert torch.all(draws["cmd_vx"] == 1.2) and torch.allclose(draws["friction"], torch.full((5,), 0.6))
    assert torch.isnan(draws["mass"]).all()  # the task's own draw for the rest
    with pytest.raises(ValueError, match=r"\['grip'\] are not scenario parameters of task 'humanoid'; valid:"):
        point_scenario("humanoid", HumanoidTask.scenario_params, {"grip": 1.0})
    with pytest.raises(ValueError, match=r"friction=2 is not valid for task 'humanoid'; it takes 0.4..1.4"):
        point_scenario("humanoid", HumanoidTask.scenario_params, {"friction": 2.0})
    with pytest.raises(ValueError, match="tool_family=1.5 is not valid for task 'tool_use'; it takes an integer in 0"):
        point_scenario("tool_use", ToolUseTask.scenario_params, {"tool_family": 1.5})


def test_a_region_with_reach_round_trips_and_training_draws_only_inside_its_plain_box(tmp_path):
    import pytest

    from robotrl.twin.scenarios import ScenarioParam

    params = [ScenarioParam("half_width", 0.3, 1.0, unit="m"), ScenarioParam("curvature", 0.0, 1.0)]
    region = Region({"half_width": [0.3, 0.5]}, 0.9, 20, "fails when half_width < 0.5 m",
                    reach={"half_width": [0.3, 0.7]}, reach_failure_rate=0.6, reach_samples=40,
                    reach_summary="fails when half_width < 0.7 m")
    loaded = ScenarioFile.load(ScenarioFile("driving", params, [region]).save(tmp_path / "r.yaml"))
    assert loaded.regions == [region]
    assert loaded.regions[0].extent().bounds == {"half_width": [0.3, 0.7]}
    assert loaded.regions[0].extent().summary == "fails when half_width < 0.7 m"
    hw = loaded.sample(2000, torch.Generator().manual_seed(0))["half_width"]
    assert hw.min() >= 0.3 and hw.max() <= 0.5 and hw.max() > 0.49  # the plain box, all of it, never the reach
    bad = ScenarioFile("driving", params, [Region({"half_width": [0.3, 0.5]}, 0.9, 20, reach={"grip": [0.0, 1.0]})])
    with pytest.raises(ValueError, match=r"undeclared parameters \['grip'\]"):
        ScenarioFile.load(bad.save(tmp_path / "bad.yaml"))
