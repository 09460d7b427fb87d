"""VLM rewards benchmark, demonstrations (modes pose, driving, driving_finetune, prefs, prefs_sac, demos).

Training runs with VLM reward terms against their controls, and the RL-VLM-F preference labels;
each function's docstring says what it compares. Run them through ``python benchmarks/vlm_rewards.py <mode>``
(``--help`` lists the options).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_avg  # noqa: E402
from vlm_rewards_encoder import GOALS, load_or_train_encoder  # noqa: E402

log = logging.getLogger("vlm_rewards")

DEMO_DIR = Path("/tmp/robotrl_vlm_demo")
ZERO_BUT_ALIVE = [f"task.reward_scales.{k}=0.0" for k in
                  ("track_lin_vel", "track_yaw", "upright", "ctrl", "action_rate", "vertical_vel")]

# Fall height (task.healthy_z) of the pose demo per goal. An upright kneel puts the torso at 0.75-0.90 m
# (median 0.82 over the kneeling poses of robotrl.rewards.captions.humanoid_pose), so the velocity task's
# 0.8 m would end a third of kneeling episodes as falls; 0.6 m still ends sitting and lying down.
POSE_HEALTHY_Z = {"kneeling": (0.6, 2.1)}


def train_run(name: str, overrides: list[str], seconds: float, seed: int = 0,
              iterations: int | None = None) -> dict[str, float | str]:
    """``robotrl train <overrides>`` for ``seconds`` of wall-clock (or up to iteration ``iterations``,
    no wall-clock limit); env steps and iterations reached."""
    import json
    import subprocess

    run_dir = DEMO_DIR / name
    stop = [f"max_time_s={seconds:.0f}", "max_iterations=1000000"] if iterations is None else \
        ["max_time_s=0", f"max_iterations={iterations}"]
    cmd = ["robotrl", "train", *overrides, *stop,
           f"run_dir={run_dir}", f"seed={seed}", "progress=false", "tensorboard=false", "torch_threads=1"]
    log.info("$ %s", " ".join(cmd))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    last = max(rows, key=lambda r: r.get("env_steps", 0))
    return {f"{name}_train_wall_s": wall, f"{name}_train_env_steps": float(last.get("env_steps", 0)),
            f"{name}_train_iterations": float(last.get("iteration", 0)), f"{name}_run_dir": str(run_dir),
            f"{name}_train_overrides": " ".join(overrides)}


@torch.no_grad()
def pose_eval(run_dir: Path | None, pose: str, worlds: int = 32, steps: int = 200, seed: int = 7,
              act: object = None, task_cfg: object = None) -> dict[str, float]:
    """Ground-truth pose success of a policy over each world's first episode.

    The policy is the run's (``run_dir``), else ``act`` on ``task_cfg``, else uniform random actions.

    ``step_success``: share of the ``worlds x steps`` steps in which the pose holds before the
    first fall; ``episode_success``: share of worlds holding it in at least half the steps;
    ``alive``: share of worlds not yet fallen at the end. Two finer figures beside them, for runs
    where those three are 0: ``reached``, the share of worlds in the pose at one step or more
    before the first fall, and ``mean_alive_steps``, the mean number of steps before the first fall
    (``steps`` for a world that never falls). The reward never sees this metric.
    """
    from robotrl.tasks import config_class, task_config_from_meta

    from robotrl.envs.task_env import make_env
    from robotrl.policies.io import load_policy
    from robotrl.rewards.captions import humanoid_pose_truth
    from robotrl.sim.backend import SimConfig

    if run_dir is None:
        cfg = task_cfg or config_class("humanoid")(randomize=False)
    else:
        policy, meta = load_policy(str(run_dir))
        cfg, act = task_config_from_meta(meta, randomize=False), policy.act_inference
    env = make_env(cfg, SimConfig(num_envs=worlds, nthread=1), seed=seed)
    seen: dict[str, torch.Tensor] = {}
    env.pre_reset_hooks.append(lambda e, info: seen.update(humanoid_pose_truth(e.sim)))
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset()
    alive = torch.ones(worlds, dtype=torch.bool)
    held = torch.zeros(worlds)
    height = torch.zeros(worlds)
    alive_steps = torch.zeros(worlds)
    for _ in range(steps):
        a = act(obs["policy"]) if act else torch.rand(worlds, env.num_actions, generator=gen) * 2 - 1  # type: ignore
        obs, _, term, trunc, _ = env.step(a)
        alive &= ~term
        alive_steps += alive.float()
        held += (seen[pose] & alive).float()
        height += torch.where(alive, seen["arms_height"], torch.zeros(worlds))
    env.close()
    total = worlds * steps
    return {"step_success": float(held.sum() / total), "episode_success": float((held >= steps / 2).float().mean()),
            "alive": float(alive.float().mean()), "mean_arms_height_m": float(height.sum() / total),
            "reached": float((held > 0).float().mean()), "mean_alive_steps": float(alive_steps.mean())}


def _encoder_note(task: str) -> str:
    """Which ``lit`` artefact a ``robotrl train`` run of ``task`` loads: path and training settings."""
    import json

    from robotrl.rewards.encoders import default_encoder_dir

    path = default_encoder_dir() / f"lit_{task}.json"
    tc = json.loads(path.read_text()).get("train_config", {}) if path.is_file() else {}
    keys = ("frames", "steps", "seed", "text_head", "dim", "text_mix", "text_decay", "text_dropout")
    return f"{path.with_suffix('.safetensors')}: " + " ".join(f"{k}={tc.get(k, 'mlp' if k == 'text_head' else '?')}"
                                                             for k in keys)


def pose_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """Humanoid: VLM-RM + alive bonus (seen and unseen goal wording) vs random, velocity tracking and alive only.

    Every key starts with ``pose_<pose>_``, so runs of different poses sit side by side in the
    JSON; the budget, the scoring period and the scale are saved with the figures. Every learner
    gets the same wall-clock (``--pose-seconds``), worlds and composed config; only the reward
    terms differ (the VLM-RM runs zero every task term but ``alive`` and add the VLM-RM term).
    ``--pose-arms`` picks a subset of the learners (the others' keys are left as they are); each VLM-RM
    run records the encoder artefact it was scored with (``..._encoder``).
    """
    pose = args.pose
    p = f"pose_{pose}_" + (f"{args.pose_prefix}_" if args.pose_prefix else "")
    common = ["task=humanoid", f"sim.num_envs={args.demo_worlds}", "sim.nthread=1"]
    healthy_z = tuple(args.pose_healthy_z) if args.pose_healthy_z else POSE_HEALTHY_Z.get(pose)
    if healthy_z:  # every learner and the random policy: the same fall height
        common.append(f"task.healthy_z=[{healthy_z[0]:g},{healthy_z[1]:g}]")
    runs = {}
    for split in ("seen", "unseen"):
        goal, baseline = GOALS[pose][split]
        runs[f"vlm_rm_{split}"] = [*common, *ZERO_BUT_ALIVE, "reward=vlm_rm", f'reward.goal="{goal}"',
                                   f'reward.baseline="{baseline}"', f"reward.scale={args.vlm_scale}",
                                   f"reward.every={args.pose_every}"]
    runs["velocity_tracking"] = common
    runs["alive_only"] = [*common, *ZERO_BUT_ALIVE]  # the control: what the alive bonus alone teaches
    arms = args.pose_arms.split(",") if args.pose_arms else list(runs)
    if unknown := set(arms) - set(runs):
        raise SystemExit(f"--pose-arms: unknown {sorted(unknown)}; valid: {', '.join(runs)}")
    runs = {k: v for k, v in runs.items() if k in arms}
    out: dict[str, float | str] = {
        f"{p}eval_worlds": 32, f"{p}eval_steps": 200, f"{p}train_budget_s": args.pose_seconds,
        f"{p}every": args.pose_every, f"{p}vlm_scale": args.vlm_scale, f"{p}train_worlds": args.demo_worlds,
        f"{p}healthy_z": str(list(healthy_z)) if healthy_z else "task default",
        f"{p}command": (f"python benchmarks/vlm_rewards.py pose --pose {pose} --pose-every {args.pose_every} "
                        f"--pose-seconds {args.pose_seconds:g} --vlm-scale {args.vlm_scale:g} "
                        f"--demo-worlds {args.demo_worlds} --pose-seed {args.pose_seed}"
                        + (f" --pose-arms {args.pose_arms}" if args.pose_arms else "")
                        + (f" --pose-prefix {args.pose_prefix}" if args.pose_prefix else "")
                        + (f" --pose-healthy-z {healthy_z[0]:g} {healthy_z[1]:g}" if healthy_z else "")),
        f"{p}train_seed": args.pose_seed, **load_avg(f"{p}start")}
    t0 = time.perf_counter()
    for name, overrides in runs.items():
        out |= train_run(f"{p}{name}", overrides, args.pose_seconds, seed=args.pose_seed)
        out |= {f"{p}{name}_{k}": v for k, v in pose_eval(DEMO_DIR / f"{p}{name}", pose).items()}
        if name.startswith("vlm_rm"):
            out[f"{p}{name}_encoder"] = _encoder_note("humanoid")
    from robotrl.tasks import config_class

    random_cfg = config_class("humanoid")(randomize=False, **({"healthy_z": list(healthy_z)} if healthy_z else {}))
    out |= {f"{p}random_{k}": v for k, v in pose_eval(None, pose, task_cfg=random_cfg).items()}
    out[f"{p}wall_s"] = time.perf_counter() - t0
    return out | load_avg(f"{p}end")


def driving_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """Driving: CaRL-only vs CaRL + CLG speed gating, equal budget; collision rate with traffic, held-out tracks."""
    from driving import evaluate_run

    common = ["task=driving", f"sim.num_envs={args.demo_worlds}", "sim.nthread=1"]
    runs = {"driving_carl_only": common,
            "driving_carl_clg": [*common, "reward=clg_speed", f"reward.every={args.every}"]}
    out: dict[str, float | str] = {"driving_train_budget_s": args.demo_seconds,
                                   "driving_eval": "one deterministic episode per world, 64 worlds, held-out tracks, "
                                                   "3 obstacles and 2 traffic cars in every episode"}
    for name, overrides in runs.items():
        out |= train_run(name, overrides, args.demo_seconds)
        ev = evaluate_run(str(DEMO_DIR / name), scenario_prob=1.0, num_envs=64, rounds=1, split="heldout")
        out |= {f"{name}_heldout_{k}": v for k, v in ev.items()}
    return out


def driving_finetune_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """CLG as a fine-tune at equal env steps: one CaRL-only pretrain, then ``--finetune-iterations``
    more PPO iterations from that same checkpoint (weights, optimizer and random streams), with
    and without the CLG speed-gating term. Same composed task config, worlds and env steps for
    both arms; only the reward differs. Wall-clock differs (CLG renders and scores frames) and is
    reported."""
    import shutil

    from driving import evaluate_run

    common = ["task=driving", f"sim.num_envs={args.demo_worlds}", "sim.nthread=1", *args.ft_task]
    ev_kw = {"scenario_prob": 1.0, "num_envs": 64, "rounds": args.ft_rounds, "split": "heldout"}
    p = f"ft_{args.ft_prefix}_" if args.ft_prefix else "ft_"
    out: dict[str, float | str] = {f"{p}pretrain_budget_s": args.demo_seconds, f"{p}seed": args.ft_seed,
                                   f"{p}finetune_iterations": args.finetune_iterations, f"{p}every": args.every,
                                   f"{p}eval": f"one deterministic episode per world, {args.ft_rounds} x 64 worlds, "
                                               "held-out tracks, 3 obstacles and 2 traffic cars in every episode",
                                   f"{p}task_overrides": " ".join(args.ft_task),
                                   f"{p}reward_overrides": " ".join(args.ft_reward),
                                   f"{p}command": " ".join(["python", "benchmarks/vlm_rewards.py", *sys.argv[1:]])}
    pre = f"{p}pretrain"
    clg = ["reward=clg_speed", f"reward.every={args.every}", *args.ft_reward]
    arms = {f"{p}carl_only": [], f"{p}carl_clg": clg}
    if args.ft_speed_control:  # the same term with the contrast removed: negative = goal, so r_clg = 1
        goal = next((o.split("=", 1)[1] for o in args.ft_reward if o.startswith("reward.goal=")),
                    '"the road is clear"')  # configs/reward/clg_speed.yaml's goal unless overridden
        arms[f"{p}carl_speed"] = [*clg, f"reward.negative={goal}", "reward.negatives=[]"]
    if args.ft_eval_only:  # evaluate the runs already in DEMO_DIR again; their training keys stay as saved
        return {f"{name}_heldout_{k}": v for name in (pre, *arms)
                for k, v in evaluate_run(str(DEMO_DIR / name), **ev_kw).items()}
    shutil.rmtree(DEMO_DIR / pre, ignore_errors=True)
    out |= train_run(pre, common, args.demo_seconds, seed=args.ft_seed)
    out |= {f"{pre}_heldout_{k}": v for k, v in evaluate_run(str(DEMO_DIR / pre), **ev_kw).items()}
    until = int(out[f"{pre}_train_iterations"]) + args.finetune_iterations
    for name, extra in arms.items():
        shutil.rmtree(DEMO_DIR / name, ignore_errors=True)
        shutil.copytree(DEMO_DIR / pre, DEMO_DIR / name)
        out |= train_run(name, [*common, *extra, "resume=true"], 0.0, seed=args.ft_seed, iterations=until)
        out |= {f"{name}_heldout_{k}": v for k, v in evaluate_run(str(DEMO_DIR / name), **ev_kw).items()}
    return out


def pose_frames(n: int, seed: int) -> tuple[np.ndarray, torch.Tensor]:
    """``n`` rendered humanoid poses and each one's measured arms height (lower hand above its shoulder, m)."""
    import mujoco
    from robotrl.tasks.humanoid import constants as C

    from robotrl.rewards.captions import humanoid_measure, humanoid_pose
    from robotrl.sim.render import BatchRenderer

    model = mujoco.MjModel.from_xml_path(C.model_path())
    data = mujoco.MjData(model)
    renderer = BatchRenderer(model, size=(96, 96), lean=True)
    rng = np.random.default_rng(seed)
    frames, heights = [], []
    for _ in range(n):
        humanoid_pose(model, data, rng)
        frames.append(renderer.render_data(model, data, "track"))
        heights.append(min(humanoid_measure(data)[2]))
    renderer.close()
    return np.stack(frames), torch.tensor(heights)


def prefs_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """RL-VLM-F labels: the encoder labeller against the scripted oracle on random pose pairs."""
    from robotrl.rewards.preference import EncoderLabeller, OracleLabeller, label_accuracy

    enc, source = load_or_train_encoder(args.threads)
    frames, height = pose_frames(2 * args.pairs, seed=4242)
    a, b = np.arange(args.pairs), np.arange(args.pairs, 2 * args.pairs)
    oracle = OracleLabeller(lambda idx: height[idx], margin=0.05).label(torch.as_tensor(a), torch.as_tensor(b))
    out: dict[str, float | str] = {"prefs_pairs": args.pairs, "prefs_oracle_margin_m": 0.05,
                                   "prefs_oracle_answered": float((oracle >= 0).float().mean()),
                                   "prefs_goal_pose": "arms_raised (oracle: lower hand height above its shoulder)"}
    for split, (goal, _) in GOALS["arms_raised"].items():
        labels = EncoderLabeller(enc, goal, margin=0.01).label(frames[a], frames[b])
        acc = label_accuracy(labels, oracle)
        out[f"prefs_encoder_label_accuracy_{split}_wording"] = acc["accuracy"]
        out[f"prefs_encoder_answered_{split}_wording"] = acc["answered"]
    return out


def _alive_only_humanoid():
    from robotrl.tasks import config_class

    cfg = config_class("humanoid")(randomize=False)
    cfg.reward_scales = {k: (1.0 if k == "alive" else 0.0) for k in cfg.reward_scales}
    return cfg


def _shaped(x: torch.Tensor) -> torch.Tensor:
    """The pose part of both SAC rewards: ``0.5 tanh(x)`` in ``(-0.5, 0.5)``, added to the alive bonus of 1."""
    return 0.5 * torch.tanh(x)


def prefs_sac_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """RL-VLM-F end to end: encoder labels on random-policy frames -> 3-member Bradley-Terry ensemble -> SAC
    with PEBBLE relabelling; against SAC on the true reward (the oracle's arms height), equal wall-clock budget."""
    from robotrl.algos.sac import SAC, SACConfig
    from robotrl.envs.task_env import make_env
    from robotrl.rewards.captions import humanoid_pose_truth
    from robotrl.rewards.preference import EncoderLabeller, OracleLabeller, RewardEnsemble, label_accuracy
    from robotrl.sim.backend import SimConfig

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    enc, source = load_or_train_encoder(args.threads)
    task_cfg, n = _alive_only_humanoid(), args.demo_worlds
    # 1. random-policy frames, the observation they belong to and the truth (oracle only)
    env = make_env(task_cfg, SimConfig(num_envs=n, nthread=1), seed=11)
    rec: dict[str, list] = {"frames": [], "height": []}
    env.pre_reset_hooks.append(lambda e, info: (rec["frames"].append(e.sim.render("track", torch.arange(n), (96, 96))),
                                                rec["height"].append(humanoid_pose_truth(e.sim)["arms_height"])))
    env.reset()
    obs_list = []
    for _ in range(args.pref_steps):
        *_, info = env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
        obs_list.append(info["final_obs"]["policy"].clone())
    env.close()
    frames = np.concatenate(rec["frames"])
    height, obs = torch.cat(rec["height"]), torch.cat(obs_list)
    k = args.pairs
    ia, ib = torch.randint(len(frames), (k,), generator=gen), torch.randint(len(frames), (k,), generator=gen)
    goal = GOALS["arms_raised"]["seen"][0]
    labels = EncoderLabeller(enc, goal, margin=0.01).label(frames[ia.numpy()], frames[ib.numpy()])
    oracle = OracleLabeller(lambda idx: height[idx], margin=0.05).label(ia, ib)
    acc = label_accuracy(labels, oracle)
    ens = RewardEnsemble(obs.shape[1], members=3, hidden=128)
    loss = ens.fit(obs[ia], obs[ib], labels, steps=400, batch_size=128, gen=gen)
    with torch.no_grad():
        r_all = ens(obs)
    mu, sd = float(r_all.mean()), float(r_all.std()) + 1e-6
    held = torch.randint(len(frames), (2000,), generator=gen), torch.randint(len(frames), (2000,), generator=gen)
    with torch.no_grad():
        pred = (ens(obs[held[1]]) > ens(obs[held[0]])).long()
    truth = OracleLabeller(lambda idx: height[idx], margin=0.05).label(*held)
    out: dict[str, float | str] = {
        "prefs_sac_encoder_source": source, "prefs_sac_label_frames": len(frames), "prefs_sac_pairs": k,
        "prefs_sac_goal": goal, "prefs_sac_env_frames_label_accuracy": acc["accuracy"],
        "prefs_sac_env_frames_answered": acc["answered"], "prefs_sac_ensemble_final_bt_loss": loss,
        "prefs_sac_ensemble_pair_accuracy_vs_oracle": label_accuracy(pred, truth)["accuracy"],
        "prefs_sac_budget_s": args.demo_seconds, "prefs_sac_worlds": n,
        "prefs_sac_reward": "1 (alive) + 0.5 tanh(x); x = arms height / 0.2 m (true) or the standardized ensemble "
                            "reward of the next observation (learned)"}
    # 2. SAC on each reward for the same wall-clock budget
    for name in ("true", "learned"):
        env = make_env(task_cfg, SimConfig(num_envs=n, nthread=1), seed=5)
        seen: dict[str, torch.Tensor] = {}
        env.pre_reset_hooks.append(lambda e, info, seen=seen: seen.update(humanoid_pose_truth(e.sim)))
        scfg = SACConfig(batch_size=256, learning_starts=1000, utd=0.25, buffer_size=200_000,
                         actor_hidden=[128, 128], critic_hidden=[256, 256])
        sac = SAC(env.obs_dims["policy"], env.num_actions, scfg, n, "cpu", seed=0)
        o = env.reset()
        t0, steps = time.perf_counter(), 0
        while time.perf_counter() - t0 < args.demo_seconds:
            a = sac.act(o)
            o, r, term, trunc, info = env.step(a)
            if name == "true":
                r = torch.where(term, r, r + _shaped(seen["arms_height"] / 0.2))
            else:
                with torch.no_grad():
                    z = (ens(info["final_obs"]["policy"]) - mu) / sd
                r = torch.where(term, r, r + _shaped(z))
            sac.process_step(o, r, term, trunc, info)
            if sac.ready():
                sac.update(o)
            steps += n
        env.close()
        ev = pose_eval(None, "arms_raised", act=sac.policy.act_inference, task_cfg=task_cfg)
        out |= {f"prefs_sac_{name}_reward_env_steps": float(steps), f"prefs_sac_{name}_reward_updates": float(
            sac.num_updates)} | {f"prefs_sac_{name}_reward_{k}": v for k, v in ev.items()}
    return out
