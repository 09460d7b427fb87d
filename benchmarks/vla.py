"""VLA benchmark on ``tool_use_language`` or ``driving_language``: SFT, GRPO and PPO fine-tuning, residual RL.

``--task`` picks the language task (default ``tool_use_language``; ``driving_language`` needs a
``--prefix`` and its own ``--sft-dir``, so that its figures and weights stay apart). The VLA drives at
10 Hz with 8 s episodes (``DRIVING_VLA``: 80 steps, as tool_use_language's 30 steps run at 10 Hz), not
the state task's 20 Hz and 12 s: a rollout renders and runs the VLA on every step, so the default
would give a GRPO iteration of about a minute. The scripted pure-pursuit teacher succeeds in every
episode at this rate.

Run in phases, each one CPU job of at most ~10 minutes under the shared lock; every phase
merges its figures into ``benchmarks/results/vla.json`` (flat, units in key names):

  throughput  env steps/s with 64x64 images at 64 and 128 worlds (scripted actions, lean
              rendering, one frame per world-step) and VLA frames/s (frozen tower + fusion +
              token head) at batch 64;
  sft         demonstrations from the privileged scripted teacher with action noise
              ``--demo-noise`` (states) and its clean actions as labels (DART), ``--demos``
              episodes in 32 worlds, written to and read back from HDF5 with images; the
              teacher's success; behaviour cloning of the VLA (tokens head) for ``--sft-steps``;
              success on new placements (fresh env seeds) with the training wording (``seen``)
              and the held-out paraphrases (``unseen_wording``); the shuffled-instruction control
              on both (the model sees a random instruction for the whole episode, success is
              judged against the world's own); chance (1 / tools). Saves the SFT weights to
              ``--sft-dir`` for the later phases;
  rl          GRPO (G = 8 rollouts per task instance from one reset state, 8 instances per
              batch, temperature ``--temperature``, clip 0.2/0.28, success filter [0.1, 0.9]) or
              PPO (value head, action-level GAE) for ``--rl-minutes`` of training wall-clock
              (rollouts + updates) from the SFT weights, in resumable calls of ``--call-minutes``
              (state in ``<sft-dir>/../<method>``); success (deterministic, ``--eval-episodes``,
              seen wording, the same placements every time) every ``--eval-every`` iterations;
              the call that spends the budget writes the success table (seen and held-out
              wording, shuffled-instruction controls);
  residual    ResFiT on the frozen SFT VLA (``robotrl.algos.residual``) for ``--residual-minutes``;
              the VLA alone and VLA + residual on the SFT's evaluation placements.

Both rl and residual redraw ``vla_success.png`` (success against wall-clock, from
``vla_curve.json``). ``--prefix P`` keeps a second configuration apart: every figure of the run is
written as ``P_<key>`` (the rl phase reads ``P_sft_success_seen``), and the curve and plot go to
``vla_curve_P.json`` and ``vla_success_P.png``; pass a separate ``--sft-dir`` with it. Several rl
configurations can share one SFT: ``--sft-prefix S`` makes the rl phase read ``S_sft_success_seen``
instead, and keeps its state in ``<sft-dir>/../P_<method>``.

    flock /tmp/robotrl-cpu.lock python benchmarks/vla.py --phase throughput
    flock /tmp/robotrl-cpu.lock python benchmarks/vla.py --phase sft
    # three calls each: 21 min per method, 7 per call
    flock /tmp/robotrl-cpu.lock python benchmarks/vla.py --phase rl --methods grpo --rl-minutes 21 --call-minutes 7
    flock /tmp/robotrl-cpu.lock python benchmarks/vla.py --phase rl --methods ppo --rl-minutes 21 --call-minutes 7
    flock /tmp/robotrl-cpu.lock python benchmarks/vla.py --phase residual --residual-minutes 6
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, fmt, interleaved, load_avg, missing, save, table  # noqa: E402
from robotrl.tasks.driving.language.config import DrivingLanguageConfig  # noqa: E402
from robotrl.tasks.driving.language.instructions import PACES, SIDES  # noqa: E402
from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig  # noqa: E402

from robotrl.algos import grpo as G  # noqa: E402
from robotrl.algos import vla_sft as S  # noqa: E402
from robotrl.data.collect import collect  # noqa: E402
from robotrl.envs.task_env import make_env  # noqa: E402
from robotrl.policies.vla import VLA, MiniLMEncoder, VLAConfig  # noqa: E402
from robotrl.runners.vla import load_vla, save_vla  # noqa: E402
from robotrl.sim.backend import SimConfig  # noqa: E402
from robotrl.storage.demos import read_demos, write_demos  # noqa: E402


def tagged(name: str, args, ext: str) -> Path:
    """``results/<name>[_<prefix>].<ext>``: the curve and plot files of this configuration."""
    return RESULTS_DIR / f"{name}{'_' + args.prefix if args.prefix else ''}.{ext}"


def save_figs(args, fig: dict) -> Path:
    """Merge ``fig`` into ``vla.json``, each key as ``<prefix>_<key>`` when ``--prefix`` is set."""
    return save("vla", {f"{args.prefix}_{k}" if args.prefix else k: v for k, v in fig.items()})


def results_key(args, key: str, prefix: str | None = None):  # noqa: ANN201
    """``key`` (under ``prefix``, by default this configuration's) as last written to ``vla.json``."""
    prefix = args.prefix if prefix is None else prefix
    return json.loads((RESULTS_DIR / "vla.json").read_text()).get(f"{prefix}_{key}" if prefix else key)


def sft_prefix(args) -> str:
    """The prefix of the SFT run this configuration fine-tunes: ``--sft-prefix``, else ``--prefix``."""
    return args.prefix if args.sft_prefix is None else args.sft_prefix


def rl_dir(args, method: str) -> Path:
    """``<sft-dir>/../<method>``, or ``.../<prefix>_<method>`` when the SFT is shared (``--sft-prefix``)."""
    own = sft_prefix(args) == args.prefix
    return Path(args.sft_dir).parent / (method if own else f"{args.prefix}_{method}")


DRIVING_VLA = {"frame_skip": 10, "episode_length_s": 8.0}  # the VLA's driving control rate and episode (docstring)


def task_config(args, split: str = "train"):  # noqa: ANN201
    """The composed language-task config of ``--task`` with instruction split ``split``."""
    if args.task == "driving_language":
        return DrivingLanguageConfig(instruction_split=split, **DRIVING_VLA)
    return ToolUseLanguageConfig(instruction_split=split)


def env_for(args, n: int, seed: int, split: str = "train"):  # noqa: ANN201
    """``n`` worlds of ``--task`` with ``--image-size`` images."""
    return make_env(task_config(args, split), SimConfig(num_envs=n, nthread=0), seed=seed,
                    image_size=(args.image_size, args.image_size))


def new_vla(args, env) -> VLA:  # noqa: ANN001
    """A fresh VLA (tokens head) sized for ``env``'s proprioception and actions."""
    return VLA(VLAConfig(image_size=args.image_size, vision_stages=args.vision_stages), env.obs_dims["policy"],
               env.num_actions)


def chance(args, env) -> tuple[float, str]:  # noqa: ANN001
    """Success of a policy that ignores the instruction but executes perfectly, and what it means."""
    if args.task == "driving_language":
        return 1 / (len(PACES) * len(SIDES)), ("1/intents: a pace and a side drawn at random; success needs both "
                                               "bands, so a language-blind policy lands at most at this")
    return 1 / len(env.task.specs), ("1/tools: picking a tool uniformly at random; success also needs the grasp, "
                                     "so a language-blind copy of the SFT policy lands at about chance x its "
                                     "grasp rate")


def throughput(args, fig: dict) -> None:
    """CPU env steps/s with images at 64 and 128 worlds, and the VLA's forward pass at batch 64.

    The GPU figures (MuJoCo Warp's batch renderer, the VLA in the loop) come from
    ``benchmarks/gpu.py --parts vla_images`` on a GPU machine (``*_gpu_h200`` keys here).
    """
    size = args.image_size
    for n in (64, 128):
        env = env_for(args, n, 0)
        env.reset()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < 10.0:
            env.step(env.task.scripted_action())
            steps += n
        fig[f"env_steps_per_s_images{size}_{n}worlds_cpu"] = steps / (time.perf_counter() - start)
        fig[f"frames_per_s_images{size}_{n}worlds_cpu"] = fig[f"env_steps_per_s_images{size}_{n}worlds_cpu"]
    model = new_vla(args, env)
    model.set_instructions(torch.zeros(len(env.instructions), 384))
    obs = {k: v[:64] for k, v in env.reset().items()}
    model.act(obs)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < 10.0:
        model.act(obs)
        count += 64
    fig["vla_forward_frames_per_s_batch64_cpu"] = count / (time.perf_counter() - start)
    fig["vla_vision_stages"] = args.vision_stages
    tower_speed(model, fig)


def tower_speed(model: VLA, fig: dict) -> None:
    """The frozen tower at batch 64 as loaded (batch norms) and as run (folded into the convs), interleaved.

    Inputs are random frames preprocessed as ``VLA.vision_tokens`` does (channels-last strides): the
    speed of both arms depends on that layout (an NCHW-contiguous input ran both at about 50 ms).
    """
    if not hasattr(model.vision, "stem"):
        return  # the tiny test tower has no batch norms
    size = model.cfg.image_size
    frames = torch.randint(0, 256, (64, size, size, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    # vision_tokens' own preprocessing: from (B, H, W, 3) frames, so the tensor keeps channels-last strides
    x = (frames.permute(0, 3, 1, 2).float() / 255.0 - model._mean) / model._std
    arms = {"unfolded": lambda: model.vision.blocks(model.vision.stem(x)), "folded": lambda: model.vision(x)}
    with torch.no_grad():
        ref, out = arms["unfolded"](), arms["folded"]()
        times, batches = interleaved(arms, seconds=5.0)
    for name in arms:
        fig[f"vla_tower_{name}_frames_per_s_batch64_cpu"] = 64 * batches[name] / times[name]
    fig["vla_tower_ratio_folded_vs_unfolded"] = (fig["vla_tower_folded_frames_per_s_batch64_cpu"]
                                                 / fig["vla_tower_unfolded_frames_per_s_batch64_cpu"])
    fig["vla_tower_folded_max_abs_diff"] = float((out - ref).abs().max())
    fig["vla_tower_feature_max_abs"] = float(ref.abs().max())


def success_table(model: VLA, args, prefix: str, fig: dict) -> None:
    """``<prefix>_success_{seen,unseen_wording}`` and their shuffled-instruction controls (+ wrong-tool rates)."""
    encoder = MiniLMEncoder()
    own = model.instruction_table.clone()
    for split, key in (("train", "seen"), ("heldout", "unseen_wording")):
        env = env_for(args, 64, args.seed + (7 if split == "train" else 8), split)
        model.set_instructions(env.instruction_embeddings(encoder))
        for shuffle, suffix in ((False, ""), (True, "_shuffled_instruction")):
            ev = S.evaluate(env, model, args.eval_episodes, shuffle_instructions=shuffle,
                            gen=torch.Generator().manual_seed(args.seed))
            fig[f"{prefix}_success_{key}{suffix}"] = ev["success"]
            wrong = ""
            if "wrong_tool" in ev:  # the driving task has no wrong object to count
                fig[f"{prefix}_wrong_tool_{key}{suffix}"] = ev["wrong_tool"]
                wrong = f" wrong tool {ev['wrong_tool']:.3f}"
            print(f"{prefix} {key}{suffix}: success {ev['success']:.3f}{wrong}", flush=True)
    model.set_instructions(own)


def sft_phase(args, fig: dict) -> None:
    env = env_for(args, 32, args.seed)
    t0 = time.perf_counter()
    eps = collect(env, lambda o: env.task.scripted_action(), args.demos, noise=args.demo_noise,
                  extra_obs=("image", "instruction"), seed=args.seed)
    fig["demo_collect_wall_s"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "demos.hdf5")
        write_demos(path, eps, {"task": args.task, "teacher": "scripted", "noise": args.demo_noise})
        fig["demo_file_mb"] = os.path.getsize(path) / 1e6
        eps, _ = read_demos(path)
    fig["demo_episodes"] = len(eps)
    fig["demo_steps"] = sum(int(ep["actions"].shape[0]) for ep in eps)
    fig["demo_success"] = sum(ep["success"] for ep in eps) / len(eps)
    fig["demo_action_noise_std"] = args.demo_noise
    fig["demo_labels"] = "teacher_actions (clean, DART)" if "teacher_actions" in eps[0] else "applied actions"
    print(f"demos: {len(eps)} episodes, success {fig['demo_success']:.3f}", flush=True)

    teacher = lambda e: (lambda o: e.task.scripted_action())  # noqa: E731
    for split, key in (("train", "seen"), ("heldout", "unseen_wording")):
        ev_env = env_for(args, 64, args.seed + (7 if split == "train" else 8), split)
        fig[f"teacher_success_{key}"] = S.evaluate(ev_env, None, args.eval_episodes, policy=teacher(ev_env))["success"]

    torch.manual_seed(args.seed)
    model = new_vla(args, env)
    model.set_instructions(env.instruction_embeddings(MiniLMEncoder()))
    t_sft = time.perf_counter()
    data = S.build_dataset(model, eps)
    losses = S.train_bc(model, data, args.sft_steps, args.sft_batch, args.sft_lr,
                        gen=torch.Generator().manual_seed(args.seed))
    fig["sft_train_wall_s"] = time.perf_counter() - t_sft
    fig["sft_steps"] = args.sft_steps
    fig["sft_lr"] = args.sft_lr
    fig["sft_loss_first"] = sum(losses[:20]) / 20
    fig["sft_loss_last"] = sum(losses[-20:]) / 20
    print(f"SFT: {args.sft_steps} steps in {fig['sft_train_wall_s']:.0f}s, loss {fig['sft_loss_first']:.3f} -> "
          f"{fig['sft_loss_last']:.3f}", flush=True)
    fig["chance_success"], fig["chance_note"] = chance(args, env)
    success_table(model, args, "sft", fig)
    save_figs(args, fig)  # the SFT figures survive a failure below
    Path(args.sft_dir).mkdir(parents=True, exist_ok=True)
    save_vla(model, Path(args.sft_dir), {"task": args.task, "algo": "vla_sft", "benchmark": "vla.py"})
    fig["sft_checkpoint"] = args.sft_dir
    print(table([(k, fmt(v)) for k, v in fig.items() if k.startswith(("demo", "teacher", "sft", "chance"))], "SFT"),
          flush=True)


def fine_tune(method: str, args, fig: dict) -> None:
    """``--rl-minutes`` of ``method`` from the SFT weights, in resumable calls of at most ``--call-minutes``.

    Every call trains until the method's clock (rollouts + updates, evaluations excluded)
    reaches the next ``--call-minutes`` mark or the budget, then saves the weights, the AdamW
    state, the sampling generator and the curve to ``<sft-dir>/../<method>``; the next call
    continues from there (``--restart`` starts over). The call that spends the budget writes
    the method's success table. A call's env resets draw from ``seed + 100 + 1000 x call``.
    """
    run_dir = rl_dir(args, method)
    state_path = run_dir / "rl_state.json"
    sft_seen = results_key(args, "sft_success_seen", sft_prefix(args))  # from --phase sft
    if not isinstance(sft_seen, float):
        raise SystemExit(f"no sft_success_seen (prefix {sft_prefix(args)!r}) in vla.json: run --phase sft first")
    cfg = G.GRPOConfig(method=method, lr=args.rl_lr, group_size=args.group_size, epochs=args.epochs, minibatches=4,
                       temperature=args.temperature)
    resume = state_path.exists() and not args.restart
    model = load_vla(run_dir if resume else args.sft_dir)
    opt = torch.optim.AdamW(model.trainable_parameters(), lr=cfg.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    if resume:
        state = json.loads(state_path.read_text())
        saved = torch.load(run_dir / "optim.pt")
        opt.load_state_dict(saved["optim"])
        gen.set_state(saved["gen"])
        if args.rl_minutes * 60 < state["train_time"]:
            raise SystemExit(f"{method}: the saved run has trained {state['train_time']:.0f}s, more than "
                             f"--rl-minutes {args.rl_minutes:g}; pass a larger budget or --restart.")
        state["budget_s"] = args.rl_minutes * 60
        state.setdefault("rollouts", [])
    else:
        torch.manual_seed(args.seed)
        start = S.evaluate(env_for(args, 64, args.seed + 7), model, args.eval_episodes,
                           gen=torch.Generator().manual_seed(args.seed))
        state = {"budget_s": args.rl_minutes * 60, "train_time": 0.0, "iterations": 0, "calls": 0,
                 "eval_wall_s": 0.0, "points": [(0.0, start["success"])], "start_success_seen": start["success"],
                 "rollouts": []}
        for key in ("success_seen", "success_unseen_wording", "gain_over_sft_points"):
            fig[f"{method}_{key}"] = missing(f"in progress ({args.rl_minutes:g} min budget, resumable calls)")
    env = env_for(args, 64, args.seed + 100 + 1000 * state["calls"])
    stop = min(state["budget_s"], state["train_time"] + args.call_minutes * 60)
    update = G.grpo_update if method == "grpo" else G.ppo_update
    while state["train_time"] < stop:
        t0 = time.perf_counter()
        batch = G.rollout(env, model, cfg.temperature, cfg.group_size if method == "grpo" else None, gen)
        metrics = update(model, opt, batch, cfg, gen)
        state["train_time"] += time.perf_counter() - t0
        state["iterations"] += 1
        it, train_time = state["iterations"], state["train_time"]
        state["rollouts"].append((train_time, metrics["success"], metrics.get("kept_groups", 1.0)))
        print(f"{method} it {it} t {train_time:.0f}s rollout success {metrics['success']:.3f} "
              + " ".join(f"{k} {v:.3f}" for k, v in metrics.items() if k != "success"), flush=True)
        if it % args.eval_every == 0:
            t_ev = time.perf_counter()
            ev = S.evaluate(env_for(args, 64, args.seed + 7), model, args.eval_episodes,
                            gen=torch.Generator().manual_seed(args.seed))
            state["eval_wall_s"] += time.perf_counter() - t_ev
            state["points"].append((train_time, ev["success"]))
            print(f"{method} eval success {ev['success']:.3f} at {train_time:.0f}s", flush=True)
    state["calls"] += 1
    run_dir.mkdir(parents=True, exist_ok=True)
    save_vla(model, run_dir, {"task": args.task, "algo": method, "init": args.sft_dir,
                              "benchmark": "vla.py"})
    torch.save({"optim": opt.state_dict(), "gen": gen.get_state()}, run_dir / "optim.pt")
    done = state["train_time"] >= state["budget_s"]
    if done:
        success_table(model, args, method, fig)
        state["points"].append((state["train_time"], fig[f"{method}_success_seen"]))
        fig[f"{method}_gain_over_sft_points"] = 100 * (fig[f"{method}_success_seen"] - sft_seen)
    state_path.write_text(json.dumps(state, indent=1) + "\n")
    curve_path = tagged("vla_curve", args, "json")
    curve = json.loads(curve_path.read_text()) if curve_path.exists() else {}
    curve[method] = state["points"]
    curve_path.write_text(json.dumps(curve, indent=1) + "\n")
    fig[f"{method}_temperature"] = cfg.temperature
    fig[f"{method}_lr"] = cfg.lr
    fig[f"{method}_group_size"] = cfg.group_size if method == "grpo" else 1
    fig[f"{method}_epochs"] = cfg.epochs
    fig[f"{method}_budget_min"] = args.rl_minutes
    fig[f"{method}_start_success_seen"] = state["start_success_seen"]
    fig[f"{method}_sft_prefix"] = sft_prefix(args)
    fig[f"{method}_sft_success_seen"] = sft_seen
    rollouts = state["rollouts"]
    for name, part in (("first", rollouts[:10]), ("last", rollouts[-10:])):
        fig[f"{method}_rollout_success_{name}10_iterations"] = sum(r[1] for r in part) / max(len(part), 1)
        fig[f"{method}_kept_groups_{name}10_iterations"] = sum(r[2] for r in part) / max(len(part), 1)
    fig[f"{method}_iterations"] = state["iterations"]
    fig[f"{method}_episodes"] = state["iterations"] * env.num_envs
    fig[f"{method}_train_wall_s"] = state["train_time"]
    fig[f"{method}_eval_wall_s"] = state["eval_wall_s"]
    fig[f"{method}_calls"] = state["calls"]
    fig[f"{method}_checkpoint"] = str(run_dir)
    fig[f"{method}_command"] = args.command
    print(f"{method}: {state['train_time']:.0f}s of {state['budget_s']:.0f}s after call {state['calls']}"
          + ("" if done else "; run again to continue"), flush=True)


def residual_phase(args, fig: dict) -> None:
    """ResFiT on the frozen SFT VLA: the residual sees [proprio, VLA readout features, VLA action].

    Success is measured as the SFT's (64 worlds, ``--eval-episodes``, fresh placements, env seeds
    ``seed + 7`` seen wording / ``seed + 8`` held-out wording), for the VLA alone and for VLA +
    residual, in the same envs. Deviations from ResFiT, for a minutes-long CPU run: no
    demonstration half of the batch (online data only), a critic warm-up of
    ``--residual-critic-warmup`` updates (default 500) instead of 10-20k, actor lr
    ``--residual-actor-lr`` instead of 1e-6 to 5e-6, and the task's own reward
    unless ``--residual-reward success`` (ResFiT's sparse reward: 1 on the last step of a
    successful episode, every episode end terminal).
    """
    from robotrl.algos.residual import Residual, ResidualConfig
    from robotrl.envs.residual import BaseActionEnv
    from robotrl.policies.vla import VLABase

    torch.manual_seed(args.seed)
    base = VLABase(load_vla(args.sft_dir))
    env = BaseActionEnv(env_for(args, 64, args.seed + 200), base)
    cfg = ResidualConfig(scale=args.residual_scale, learning_starts=2048,
                         critic_warmup_updates=args.residual_critic_warmup, utd=4.0,
                         actor_lr=args.residual_actor_lr, batch_size=256, buffer_size=200_000)
    algo = Residual(env.obs_dims["policy"], env.num_actions, cfg, env.num_envs, env.device, demos=None,
                    has_base=True, seed=args.seed)
    splits = {"seen": ("train", 7), "unseen_wording": ("heldout", 8)}

    encoder = MiniLMEncoder()

    def success(policy, key: str = "seen") -> float:  # noqa: ANN001
        """On ``key``'s placements, with the VLA reading that split's own instruction embeddings."""
        split, off = splits[key]
        inner = env_for(args, 64, args.seed + off, split)
        own = base.model.instruction_table.clone()
        base.model.set_instructions(inner.instruction_embeddings(encoder))
        try:
            gen = torch.Generator().manual_seed(args.seed)
            return S.evaluate(BaseActionEnv(inner, base), None, args.eval_episodes, gen=gen, policy=policy)["success"]
        finally:
            base.model.set_instructions(own)

    def vla_alone(o: dict) -> torch.Tensor:
        return o["base_action"]

    def with_residual(o: dict) -> torch.Tensor:
        return algo.policy.act_inference(o["policy"])

    for key in splits:
        fig[f"residual_base_success_{key}"] = success(vla_alone, key)
    points = [(0.0, fig["residual_base_success_seen"])]
    obs, steps, updates, wall, finished, succeeded = env.reset(), 0, 0, 0.0, 0, 0.0
    next_eval = args.residual_eval_minutes * 60
    stats: dict[str, float] = {}
    while wall < args.residual_minutes * 60:
        t0 = time.perf_counter()
        for _ in range(16):
            action = algo.act(obs)
            obs, reward, term, trunc, info = env.step(action)
            if args.residual_reward == "success":  # ResFiT's: r = 1 on a successful episode's last step
                reward, term, trunc = torch.zeros_like(reward), term | trunc, torch.zeros_like(trunc)
                if "episode" in info:
                    reward[term.nonzero().squeeze(1)] = info["episode"]["success"].float()
            algo.process_step(obs, reward, term, trunc, info)
            if "episode" in info:
                finished += int(info["episode"]["success"].numel())
                succeeded += float(info["episode"]["success"].sum())
            steps += env.num_envs
            if algo.ready():
                stats = algo.update(obs)
                updates = algo.num_updates
        wall += time.perf_counter() - t0
        rate = succeeded / max(finished, 1)
        print(f"residual {wall:.0f}s env steps {steps} updates {updates} train success {rate:.3f} "
              + " ".join(f"{k} {v:.3g}" for k, v in stats.items()), flush=True)
        finished, succeeded = 0, 0.0
        if wall >= next_eval and wall < args.residual_minutes * 60:
            points.append((wall, success(with_residual)))
            print(f"residual eval success {points[-1][1]:.3f} at {wall:.0f}s", flush=True)
            next_eval += args.residual_eval_minutes * 60
    for key in splits:
        fig[f"residual_success_{key}"] = success(with_residual, key)
        print(f"residual {key}: base {fig[f'residual_base_success_{key}']:.3f} -> "
              f"{fig[f'residual_success_{key}']:.3f}", flush=True)
    points.append((wall, fig["residual_success_seen"]))
    out_dir = Path(args.sft_dir).parent / ("residual" if args.residual_reward == "task" else "residual_success")
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save({"actor": algo.policy.state_dict(), "meta": algo.policy_meta()}, out_dir / "actor.pt")
    fig["residual_checkpoint"] = str(out_dir / "actor.pt")
    curve_path = tagged("vla_curve", args, "json")
    curve = json.loads(curve_path.read_text()) if curve_path.exists() else {}
    curve["residual"] = points
    curve_path.write_text(json.dumps(curve, indent=1) + "\n")
    fig["residual_success"] = fig["residual_success_seen"]
    fig["residual_base_success"] = fig["residual_base_success_seen"]
    fig["residual_env_steps"] = steps
    fig["residual_gradient_updates"] = updates
    fig["residual_train_wall_s"] = wall
    fig["residual_scale"] = cfg.scale
    fig["residual_actor_lr"] = cfg.actor_lr
    fig["residual_utd"] = cfg.utd
    fig["residual_reward"] = args.residual_reward
    fig["residual_command"] = args.command
    fig["residual_critic_warmup_updates"] = cfg.critic_warmup_updates
    fig["residual_gain_over_base_points"] = 100 * (fig["residual_success_seen"] - fig["residual_base_success_seen"])


def plot(args) -> Path:
    """Success against fine-tuning wall-clock from this configuration's curve file; the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = json.loads(tagged("vla_curve", args, "json").read_text())
    sft = results_key(args, "sft_success_seen", sft_prefix(args))
    fig, ax = plt.subplots(figsize=(6, 4))
    if isinstance(sft, float):
        ax.axhline(sft, color="grey", ls="--", lw=1, label=f"SFT ({sft:.2f})")
        ax.axhline(min(sft + 0.2, 1.0), color="grey", ls=":", lw=1, label="SFT + 20 points (target)")
    for method, pts in sorted(curve.items()):
        label = "residual (ResFiT)" if method == "residual" else method.upper()
        ax.plot([t / 60 for t, _ in pts], [s for _, s in pts], marker="o", label=label)
    ax.set_xlabel("fine-tuning wall-clock (min, CPU)")
    ax.set_ylabel("success (deterministic, seen wording)")
    ax.set_ylim(0, 1)
    ax.set_title(f"{args.task}: RL from the SFT VLA (residual: VLA frozen)"
                 + (f"\n[{args.prefix}]" if args.prefix else ""), fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = tagged("vla_success", args, "png")
    fig.savefig(path, dpi=120)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--phase", choices=("throughput", "sft", "rl", "residual"), required=True)
    p.add_argument("--task", choices=("tool_use_language", "driving_language"), default="tool_use_language")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--vision-stages", type=int, default=5)
    p.add_argument("--demos", type=int, default=1024)
    p.add_argument("--demo-noise", type=float, default=0.1)
    p.add_argument("--sft-steps", type=int, default=6000)
    p.add_argument("--sft-batch", type=int, default=64)
    p.add_argument("--sft-lr", type=float, default=1e-3)
    p.add_argument("--sft-dir", default="runs/vla_bench/sft")
    p.add_argument("--eval-episodes", type=int, default=128)
    p.add_argument("--rl-minutes", type=float, default=21.0)
    p.add_argument("--rl-lr", type=float, default=1e-4)
    p.add_argument("--temperature", type=float, default=1.6)
    p.add_argument("--group-size", type=int, default=8, help="rl: GRPO rollouts per reset state (G)")
    p.add_argument("--epochs", type=int, default=2, help="rl: passes over each rollout batch (4 minibatches each)")
    p.add_argument("--eval-every", type=int, default=12)
    p.add_argument("--call-minutes", type=float, default=7.0,
                   help="RL training minutes per call (a call stays under 10 min of wall with its evaluations)")
    p.add_argument("--restart", action="store_true", help="rl: ignore a saved partial run and start from SFT")
    p.add_argument("--sft-prefix", default=None, help="rl: the prefix of the --phase sft run to fine-tune "
                   "(default: --prefix); lets several rl configurations share one SFT")
    p.add_argument("--methods", nargs="+", default=["grpo"])
    p.add_argument("--residual-minutes", type=float, default=6.0)
    p.add_argument("--residual-scale", type=float, default=0.1)
    p.add_argument("--residual-actor-lr", type=float, default=1e-4)
    p.add_argument("--residual-critic-warmup", type=int, default=500,
                   help="residual: gradient updates of the critic alone before the actor follows it")
    p.add_argument("--residual-reward", choices=("task", "success"), default="task",
                   help="residual: the task's reward, or ResFiT's sparse success (1 on a successful episode's "
                        "last step, every episode end terminal)")
    p.add_argument("--residual-eval-minutes", type=float, default=2.0, help="residual: curve point every")
    p.add_argument("--torch-threads", type=int, default=2, help="intra-op threads (run under the CPU lock)")
    p.add_argument("--prefix", default="", help="write every figure as <prefix>_<key>, and the curve and plot "
                   "as vla_curve_<prefix>.json / vla_success_<prefix>.png (a second configuration)")
    args = p.parse_args()
    args.command = "python benchmarks/vla.py " + shlex.join(sys.argv[1:])
    torch.set_num_threads(args.torch_threads)
    if args.task != "tool_use_language" and not args.prefix:
        p.error(f"--task {args.task} needs a --prefix (and its own --sft-dir): its figures would overwrite "
                "tool_use_language's")
    fig: dict = {"task": args.task, "image_size_px": args.image_size, "seed": args.seed,
                 **load_avg(f"{args.phase}_start")}
    t0 = time.perf_counter()
    if args.phase == "throughput":
        throughput(args, fig)
    elif args.phase == "sft":
        fig["sft_command"] = args.command
        sft_phase(args, fig)
    elif args.phase == "rl":
        for method in args.methods:
            fine_tune(method, args, fig)
            save_figs(args, fig)
        fig["plot"] = str(plot(args).relative_to(RESULTS_DIR.parent.parent))
    else:
        residual_phase(args, fig)
        fig["plot"] = str(plot(args).relative_to(RESULTS_DIR.parent.parent))
    fig[f"{args.phase}_phase_wall_s"] = time.perf_counter() - t0
    fig.update(load_avg(f"{args.phase}_end"))
    out = save_figs(args, fig)
    print(table([(k, fmt(v)) for k, v in fig.items() if not k.startswith("load_avg")], args.phase))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
