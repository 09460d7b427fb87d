"""Driving task through TaskEnv: progress on constructed states, infractions, rays, smoke test."""

import math

import mujoco
import numpy as np
import pytest
import torch
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving import scenario
from robotrl.tasks.driving.car import ackermann_angles
from robotrl.tasks.driving.config import DrivingConfig
from robotrl.tasks.driving.scene import TRAFFIC_RADIUS
from robotrl.tasks.driving.task import COLLISION_KINDS, INFRACTIONS

from robotrl.envs.task_env import TaskEnv
from robotrl.rotations import quat_mul
from robotrl.sim.backend import SimConfig


def make_env(n: int = 4, **overrides) -> TaskEnv:
    values = dict(num_tracks=3, randomize=False, action_delay_max=0, scenario_prob=0.0)
    values.update(overrides)
    return TaskEnv(DrivingConfig(**values), SimConfig(num_envs=n, nthread=1), seed=0)


def place(
    env: TaskEnv,
    world: int,
    s: float,
    lateral: float = 0.0,
    heading: float = 0.0,
    speed: float = 0.0,
    upside_down: bool = False,
    z: float | None = None,
) -> torch.Tensor:
    """Put the car of ``world`` at arc length ``s`` of its track; returns its (x, y)."""
    task = env.task
    p, h = task.bank.point_at(task.track_id[world : world + 1], torch.tensor([float(s)]))
    h = h[0]
    normal = torch.stack([-torch.sin(h), torch.cos(h)])
    pos = p[0] + lateral * normal
    yaw = h + heading
    qpos = task.qpos0.clone()[None]
    qpos[0, :2] = pos.double()
    quat = torch.tensor([[math.cos(0.5 * yaw), 0.0, 0.0, math.sin(0.5 * yaw)]])
    if upside_down:
        quat = quat_mul(quat, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    qpos[0, 3:7] = quat[0].double()
    if z is not None:
        qpos[0, 2] = z
    qvel = torch.zeros(1, env.sim.model.nv, dtype=torch.float64)
    qvel[0, 0], qvel[0, 1] = speed * math.cos(yaw), speed * math.sin(yaw)
    env.sim.reset(torch.tensor([world]), qpos, qvel)
    return pos


def test_progress_and_route_completion_on_constructed_states():
    env = make_env(n=2)
    task = env.task
    s0, length = float(task.s[0]), float(task.bank.length[task.track_id[0]])
    total_gain = 0.0
    for k in range(1, int(length) + 1):
        place(env, 0, s0 + k, lateral=0.0)
        task.update(env.gen)
        assert task.progress[0].item() == pytest.approx(k, abs=0.03)
        assert task.route_completion()[0].item() == pytest.approx(k / length, abs=1e-3)
        spacing = length / len(task.bank.tracks[0].checkpoints)
        passed = math.floor((s0 + k) / spacing) - math.floor(s0 / spacing)
        assert task.checkpoints_reached()[0].item() == passed
        terms = task.reward_terms(torch.zeros(2, 2))
        total_gain += terms["route_gain"][0].item()
        assert not task.flags[0].any(), f"no infraction expected at {k} m, got {task.flags[0]}"
    assert not task.lap_done[0]
    # standing still on the centreline: lane, comfort and TTC factors are 1, the speed factor 0.5
    assert total_gain == pytest.approx(0.5 * int(length) / length, rel=0.02)
    place(env, 0, s0 + length + 0.3)  # across the start line: lap complete
    task.update(env.gen)
    assert task.lap_done[0] and task.terminated()[0] and task.success()[0]
    assert task.route_completion()[0].item() == 1.0
    assert task.checkpoints_reached()[0].item() == len(task.bank.tracks[0].checkpoints)
    assert not task.terminated()[1]


def test_driving_backwards_is_no_gain_then_wrong_way():
    env = make_env(n=1)
    task = env.task
    s0 = float(task.s[0])
    place(env, 0, s0 + 1.0)
    task.update(env.gen)
    place(env, 0, s0 + 0.2)
    task.update(env.gen)
    assert task.reward_terms(torch.zeros(1, 2))["route_gain"][0].item() == 0.0
    assert not task.flags[0].any()
    for back in (-0.3, -0.7):  # 1.9 m behind the best progress: still allowed (wrong_way_distance = 2 m)
        place(env, 0, s0 + back)
        task.update(env.gen)
    assert not task.flags[0].any()
    place(env, 0, s0 - 1.2)  # 2.2 m behind
    task.update(env.gen)
    assert task.flags[0].tolist() == [name == "wrong_way" for name in INFRACTIONS]
    assert task.terminated()[0]


def test_each_infraction_terminates_the_episode_and_collisions_say_what_they_hit():
    env = make_env(n=8, scenario_prob=1.0)
    task = env.task
    cases = {0: None, 1: "off_road", 2: "wrong_way", 3: "rollover", **dict.fromkeys((4, 5, 6, 7), "collision")}
    # 4: an obstacle ahead; 5: a traffic vehicle ahead; 6: one behind the standing car, driving on (it ran
    # into the car); 7: a standing one behind the car, which drives forward (not rear-ended)
    kinds = {4: ["collision_obstacle"], 5: ["collision_traffic"], 6: ["collision_traffic", "collision_rear_ended"],
             7: ["collision_traffic"]}
    for w in range(8):
        task.active[w] = w >= 4
        task.traffic_v[w] = 0.0
        task.traffic_s[w] = task.s[w] + 20.0
        task.obstacle_xy[w] = torch.tensor([500.0, 500.0])
    s = {w: float(task.s[w]) for w in range(8)}
    place(env, 0, s[0])
    place(env, 1, s[1], lateral=float(task.bank.half_width[task.track_id[1]]) + 0.3)
    place(env, 2, s[2], heading=math.pi, speed=1.5)
    place(env, 3, s[3], upside_down=True, z=0.2)
    pos = place(env, 4, s[4])
    heading = task.bank.point_at(task.track_id[4:5], torch.tensor([s[4]]))[1][0]
    task.obstacle_xy[4, 0] = pos + 0.3 * torch.stack([torch.cos(heading), torch.sin(heading)])
    for w, ds, v_car, v_traffic in ((5, 0.2, 0.0, 0.0), (6, -0.2, 0.0, 1.0), (7, -0.2, 1.0, 0.0)):
        place(env, w, s[w], speed=v_car)
        task.traffic_s[w, 0] = s[w] + ds
        task.traffic_off[w, 0] = 0.0
        task.traffic_v[w, 0] = v_traffic
    _, _, terminated, truncated, info = env.step(torch.zeros(8, 2))
    assert not terminated[0] and not truncated[0], f"clean world ended: {task.flags[0]}"
    done = (terminated | truncated).nonzero().squeeze(1).tolist()
    assert done == [1, 2, 3, 4, 5, 6, 7]
    episode = info["episode"]
    for row, w in enumerate(done):
        fired = [name for name in INFRACTIONS if episode[name][row] > 0]
        assert fired == [cases[w]], f"world {w}: expected {cases[w]}, got {fired}"
        hit = [name for name in COLLISION_KINDS if episode[name][row] > 0]
        assert hit == kinds.get(w, []), f"world {w}: expected {kinds.get(w, [])}, got {hit}"
        assert terminated[w] and not truncated[w]
        assert info["reward_terms"]["infraction"][w].item() == -env.cfg.reward_scales["infraction"]
    assert info["reward_terms"]["infraction"][0].item() == 0.0


def test_yield_speed_hand_worked():
    # lap 10 m, the car at s = 1 m on the centreline; stop gap 0.64 m, headway 1 s
    assert scenario.YIELD_STOP_GAP == pytest.approx(0.64) and scenario.YIELD_HEADWAY == 1.0
    traffic_s = torch.tensor([[0.0, 9.5, 0.9, 0.0, 5.0, 1.5]])
    offset = torch.tensor([[0.0, 0.1, 0.0, 0.5, 0.0, 0.0]])
    v = torch.ones(1, 6)
    got = scenario.yield_speed(v, traffic_s, offset, torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([10.0]))
    # gap 1.0 -> 0.36; gap 1.5 across the start line -> 0.86; gap 0.1 -> stop; other lane (0.5 m off)
    # -> its own speed; gap 6 -> its own speed; the car behind the vehicle (gap 9.5) -> its own speed
    torch.testing.assert_close(got, torch.tensor([[0.36, 0.86, 0.0, 1.0, 1.0, 1.0]]))


@pytest.mark.parametrize("yields", [False, True], ids=["scripted", "yielding"])
def test_traffic_behind_a_standing_car_runs_into_it_unless_it_yields(yields):
    env = make_env(n=1, scenario_prob=1.0, traffic_yields=yields)
    task = env.task
    task.active[0] = True
    task.obstacle_xy[0] = torch.tensor([500.0, 500.0])
    s = float(task.s[0])
    place(env, 0, s)
    task.traffic_s[0] = torch.tensor([s - 1.5, s + 20.0])
    task.traffic_off[0] = 0.0
    task.traffic_v[0] = 1.0
    hit = rear = False
    for _ in range(80):  # 4 s: a vehicle that does not yield covers the 1.5 m gap in about 1 s
        _, _, terminated, _, info = env.step(torch.zeros(1, 2))
        if terminated[0]:
            hit, rear = True, bool(info["episode"]["collision_rear_ended"][0])
            break
    assert (hit, rear) == (not yields, not yields)
    if yields:  # it waits behind the car, at the stop gap
        gap = float(torch.remainder(task.s[0] - task.traffic_s[0, 0], task.bank.length[task.track_id[0]]))
        assert gap == pytest.approx(scenario.YIELD_STOP_GAP, abs=0.05)


def test_rays_match_known_obstacle_and_vehicle_distances():
    env = make_env(n=2, scenario_prob=1.0, num_obstacles=3, num_traffic=1, num_rays=15, ray_fov_deg=180.0)
    task = env.task
    s = float(task.s[0])
    pos = place(env, 0, s)
    yaw = float(task.bank.point_at(task.track_id[0:1], torch.tensor([s]))[1][0])
    fwd, left = torch.tensor([math.cos(yaw), math.sin(yaw)]), torch.tensor([-math.sin(yaw), math.cos(yaw)])
    radii = task.obstacle_radii()
    task.active[0] = True
    task.obstacle_xy[0] = torch.stack([pos + 2.0 * fwd, pos + 1.5 * left, torch.tensor([500.0, 500.0])])
    task.traffic_v[0] = 0.0
    task._write_mocap(torch.tensor([0]))  # obstacles are static: written at reset or on demand
    task.update(env.gen)  # moves the traffic and casts the rays
    # put the traffic capsule 2.5 m to the right, parallel to the car (its side faces the ray)
    task.traffic_xy[0, 0] = pos - 2.5 * left
    task.traffic_yaw[0, 0] = yaw
    task.mocap_pos[0, task._traffic_mocap[0], :2] = task.traffic_xy[0, 0].double()
    quat = torch.tensor([math.cos(0.5 * yaw), 0, 0, math.sin(0.5 * yaw)], dtype=torch.float64)
    task.mocap_quat[0, task._traffic_mocap[0]] = quat
    task._cast_rays(None)
    rays = task.rays[0]
    assert rays[7].item() == pytest.approx(2.0 - radii[0], abs=1e-4)  # straight ahead
    assert rays[14].item() == pytest.approx(1.5 - radii[1], abs=1e-4)  # 90 degrees left
    assert rays[0].item() == pytest.approx(2.5 - TRAFFIC_RADIUS, abs=1e-4)  # 90 degrees right
    assert rays[3].item() == env.cfg.ray_range  # a miss reads the range
    # the observation carries the same readings, normalized by the range
    start = sum(size for name, size in task.obs_layout()[:6])
    assert [name for name, _ in task.obs_layout()][6] == "rays"
    obs = task.observe()["policy"][0, start : start + 15]
    torch.testing.assert_close(obs, rays / env.cfg.ray_range)


def test_car_drives_like_an_rc_car():
    env = make_env(n=1)
    model = env.sim.model
    data = mujoco.MjData(model)
    for _ in range(300):  # 3 s of full throttle, straight
        data.ctrl[:] = [0.0, 0.0, 1.0, 1.0]
        mujoco.mj_step(model, data)
    speed = float(np.linalg.norm(data.qvel[:2]))
    assert 3.5 < speed < C.TOP_SPEED
    left, right = ackermann_angles(0.2)
    for _ in range(100):
        data.ctrl[:] = [left, right, 0.5, 0.5]
        mujoco.mj_step(model, data)
    assert data.qvel[5] > 0.5  # positive steering turns left
    total_mass = model.body_subtreemass[model.body(C.CHASSIS_BODY).id]
    assert 3.0 < total_mass < 4.5


def test_tyre_friction_governs_tyre_road_contacts_and_limits_grip():
    """The floor's friction (1.0) must not mask a slippery tyre: the randomized tyre value is what acts."""
    env = make_env(n=1)
    model = env.sim.model
    wheels = [i for i in range(model.ngeom) if model.geom_priority[i] > 0]
    assert len(wheels) == 4
    speeds = {}
    for mu in (1.0, 0.3):
        model.geom_friction[wheels, 0] = mu
        data = mujoco.MjData(model)
        for _ in range(50):  # 0.5 s of full throttle from rest
            data.ctrl[:] = [0.0, 0.0, 1.0, 1.0]
            mujoco.mj_step(model, data)
        tyre = [c for c in data.contact[: data.ncon] if c.geom1 in wheels or c.geom2 in wheels]
        assert tyre and all(abs(c.friction[0] - mu) < 1e-9 for c in tyre)
        speeds[mu] = float(np.linalg.norm(data.qvel[:2]))
    assert speeds[0.3] < 0.7 * speeds[1.0]  # wheelspin: 0.3 cannot transmit the motor's torque


def test_smoke_random_actions():
    env = TaskEnv(DrivingConfig(num_tracks=4), SimConfig(num_envs=16, nthread=1), seed=1)
    obs = env.reset()
    width = sum(size for _, size in env.task.obs_layout())
    assert obs["policy"].shape == (16, width)
    gen = torch.Generator().manual_seed(0)
    finished = []
    for _ in range(120):
        action = torch.rand(16, 2, generator=gen) * 2 - 1
        action[:, 1] = action[:, 1].abs()
        obs, reward, terminated, truncated, info = env.step(action)
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
        if "episode" in info:
            finished.append(info["episode"])
    assert finished, "random driving should end some episodes by infractions"
    rc = torch.cat([e["route_completion"] for e in finished])
    assert ((rc >= 0) & (rc <= 1)).all()
    assert env.total_sim_resets == 0


def test_camera_observation():
    env = make_env(n=2, camera=True, image_size=[24, 32])
    image = env.reset()["image"]
    assert image.shape == (2, 24, 32, 3) and image.dtype == torch.uint8
    assert image.float().std() > 1.0


def test_eval_artifacts(tmp_path):
    env = make_env(n=2, scenario_prob=1.0)
    env.reset()
    rows = []
    for _ in range(25):
        env.step(torch.tensor([[0.0, 0.6], [0.0, 0.6]]))
        rows.append({k: v[0].numpy().copy() for k, v in env.task.trace().items()})
    trace = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
    paths = env.task.eval_artifacts(trace, str(tmp_path))
    assert [p.rsplit("/", 1)[-1] for p in paths] == ["track.png", "topdown.mp4"]
    import imageio.v2 as imageio

    assert imageio.imread(paths[0]).shape[0] > 200
    assert imageio.get_reader(paths[1]).count_frames() == 25


def test_hydra_configs(train_cfg):
    cfg = train_cfg("task=driving")
    assert isinstance(cfg.task, DrivingConfig) and cfg.task.scenario_prob == 0.8
    # task=driving trains on the widened randomization, wider than the schema's defaults
    assert cfg.task.half_width == [0.6, 1.0] and cfg.task.min_turn_radius == 1.0
    assert DrivingConfig().half_width == [0.8, 1.0]
    assert cfg.policy.distribution == "beta"
    traffic = train_cfg("task=driving_traffic")
    assert traffic.task.name == "driving" and traffic.task.scenario_prob == 1.0
    assert traffic.policy.distribution == "beta"


def test_curbs_follow_each_worlds_track():
    """Each kerb box spans a chord of its world's lane boundary: both ends lie on the boundary."""
    env = make_env(n=3)
    task = env.task
    sl = slice(task._curb_start, task._curb_start + 2 * env.cfg.curb_segments)
    pos = env.sim.model_field("geom_pos")[:, sl, :2].float()
    quat = env.sim.model_field("geom_quat")[:, sl].float()
    half = env.sim.model_field("geom_size")[:, sl, 0].float() - 0.01
    yaw = 2 * torch.atan2(quat[..., 3], quat[..., 0])
    axis = torch.stack([torch.cos(yaw), torch.sin(yaw)], -1) * half[..., None]
    for w in range(3):
        tid = int(task.track_id[w])
        hw = float(task.bank.half_width[tid])
        for end in (pos[w] - axis[w], pos[w] + axis[w]):
            nearest = torch.cdist(end, task.bank.center[tid]).amin(1)
            torch.testing.assert_close(nearest, torch.full_like(nearest, hw), atol=0.01, rtol=0)


def test_critic_dynamics_match_the_model_fields_after_randomization_and_a_scenario():
    env = make_env(n=4, randomize=True, friction_range=[0.5, 1.5], mass_range=[0.7, 1.3], motor_range=[0.8, 1.2],
                   privileged_critic=True)
    obs, task = env.reset(), env.task
    assert obs["critic"].shape[1] == obs["policy"].shape[1] + 6 + 3 * task.cfg.num_traffic + 2 * task.cfg.num_obstacles
    wheel = int(task._wheel_geoms[0])
    friction = task.sim.model_field("geom_friction")[:, wheel, 0] / task._base_friction[wheel, 0]
    mass = task.sim.model_field("body_mass")[:, task._chassis] / task._base_mass[task._chassis]
    motor = task.sim.model_field("actuator_gainprm")[:, 2, 0] / task._base_gain[2, 0]
    assert torch.allclose(task.dynamics, torch.stack([friction, mass, motor], 1).float(), atol=1e-6)
    assert task.dynamics.std(0).min() > 0.01  # drawn per world, not one value
    task.apply_scenario(torch.tensor([1]), {"friction": torch.tensor([0.4])}, env.gen)
    scaled = task.sim.model_field("geom_friction")[1, wheel, 0] / task._base_friction[wheel, 0]
    assert float(scaled) == pytest.approx(0.4)
    assert float(task.dynamics[1, 0]) == pytest.approx(0.4)
    extras = task.observe()["critic"][:, obs["policy"].shape[1]:]
    assert float(extras[1, 3]) == pytest.approx(0.4 - 1.0)  # the critic reads it as its friction input


def test_policy_observation_is_the_same_with_and_without_the_privileged_critic():
    with_critic, without = make_env(n=3, privileged_critic=True), make_env(n=3)
    a, b = with_critic.reset(), without.reset()
    assert "critic" not in b and torch.equal(a["policy"], b["policy"])
    assert torch.equal(a["critic"][:, : a["policy"].shape[1]], a["policy"])


def test_driving_fasttd3_tuning_sets_cpu_batches_and_value_support_and_leaves_the_task_as_ppo_composes_it(train_cfg):
    """configs/tuning/driving_fasttd3.yaml; benchmarks/learning.py --robotrl-algo needs PPO's task config."""
    ppo, off = train_cfg("task=driving"), train_cfg("task=driving", "algo=fasttd3")
    assert off.task == ppo.task
    assert (off.algo.batch_size, off.algo.utd, off.algo.steps_per_iteration) == (1024, 0.5, 32)
    assert off.algo.critic_hidden == [256, 256]
    assert (off.algo.v_min, off.algo.v_max) == (-20.0, 60.0)  # a lap (100 over ~300 steps), an infraction (-10)
