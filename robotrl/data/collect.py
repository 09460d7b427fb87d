"""``robotrl collect``: record demonstrations to robomimic-style HDF5 (``robotrl.storage.demos``).

    robotrl collect task=humanoid teacher=runs/humanoid/ppo episodes=50 out=demos.hdf5
    robotrl collect task=reach teacher=scripted noise=0.3 episodes=100 out=reach.hdf5
    robotrl collect task=tool_use teacher=scripted task.randomize=false num_envs=32
    robotrl collect task=tool_use_language teacher=scripted image_size=64 episodes=128 noise=0.1 out=vla.hdf5

Arguments (``key=value``):
    task        a registered task (``robotrl train`` tasks) or ``reach`` (the torch PointReach).
    teacher     ``scripted`` (the env's or task's ``scripted_action()``) or a checkpoint
                (PPO, SAC or BC run dir).
    noise       std of Gaussian noise added to every teacher action: a deliberately
                suboptimal "noisy teacher" (default 0).
    episodes    finished episodes to record (default 50).
    num_envs    parallel worlds (default 16).
    success_only  keep successful episodes only (default false).
    seed        env and noise seed (default 0).
    image_size  render ``obs/image`` (square, pixels) and record ``obs/instruction`` too, for VLA
                SFT (default 0: no images).
    out         output file (default demos.hdf5).
    task.<field>=value  override a field of the task (or PointReach) config.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import torch
import yaml

from robotrl.envs.base import VecEnv
from robotrl.storage.demos import Episode

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "task": "",
    "teacher": "",
    "noise": 0.0,
    "episodes": 50,
    "num_envs": 16,
    "success_only": False,
    "seed": 0,
    "image_size": 0,
    "out": "demos.hdf5",
}


def parse_args(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``key=value`` arguments into ``(options, task overrides)``.

    Raises:
        ValueError: an argument without ``=`` or an unknown key, listing the valid ones.

    """
    opts, overrides = dict(DEFAULTS), {}
    for arg in argv:
        if "=" not in arg:
            raise ValueError(
                f"robotrl collect takes key=value arguments, got {arg!r}. Valid keys: {', '.join(DEFAULTS)}."
            )
        key, raw = arg.split("=", 1)
        value = yaml.safe_load(raw) if raw else ""
        if key.startswith("task."):
            overrides[key[5:]] = value
        elif key in DEFAULTS:
            opts[key] = type(DEFAULTS[key])(value) if DEFAULTS[key] is not None else value
        else:
            raise ValueError(
                f"Unknown collect argument {key!r}. Valid keys: {', '.join(DEFAULTS)}, task.<field>."
            )
    if not opts["task"] or not opts["teacher"]:
        raise ValueError("robotrl collect needs task=<name> and teacher=<scripted|checkpoint>.")
    return opts, overrides


def _with(cfg: Any, overrides: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cfg)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(f"Unknown task fields {unknown}; valid: {', '.join(sorted(names))}.")
    return dataclasses.replace(cfg, **overrides)


def build_env(
    task: str, num_envs: int, seed: int, overrides: dict[str, Any], image_size: int = 0
) -> tuple[VecEnv, dict[str, Any]]:
    """The VecEnv for ``task`` and a JSON-safe description of it."""
    if task == "reach":
        from robotrl.envs.reach import PointReach, ReachConfig

        cfg = _with(ReachConfig(num_envs=num_envs), overrides)
        return PointReach(cfg, seed=seed), {"task": "reach", "config": dataclasses.asdict(cfg)}
    from robotrl.envs.task_env import make_env
    from robotrl.sim.backend import SimConfig
    from robotrl.tasks import config_class

    cfg = _with(config_class(task)(), overrides)
    size = (image_size, image_size) if image_size > 0 else None
    return make_env(cfg, SimConfig(num_envs=num_envs), seed=seed, image_size=size), {
        "task": task,
        "config": dataclasses.asdict(cfg),
    }


def _teacher(env: VecEnv, teacher: str) -> Any:
    if teacher == "scripted":
        for owner in (env, getattr(env, "task", None)):
            if owner is not None and hasattr(owner, "scripted_action"):
                return lambda obs: owner.scripted_action()
        raise ValueError(f"{type(env).__name__} has no scripted_action(); pass teacher=<checkpoint> instead.")
    from robotrl.policies.frozen import load_frozen

    policy, _ = load_frozen(teacher, env.num_envs, env.device)
    state = {"policy": policy}

    def act(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return state["policy"].act(obs["policy"])

    act.reset = policy.reset  # type: ignore[attr-defined]
    return act


def collect(
    env: VecEnv,
    teacher: Any,
    episodes: int,
    noise: float = 0.0,
    success_only: bool = False,
    seed: int = 0,
    max_steps: int | None = None,
    extra_obs: tuple[str, ...] = (),
) -> list[Episode]:
    """Roll ``teacher`` (``obs dict -> (N, A)``) until ``episodes`` episodes are recorded.

    Every world records its first ``ceil(episodes / N)`` (kept) episodes, so the set is not
    biased toward short episodes the way "the first episodes to finish" would be.

    Args:
        env: the VecEnv to roll.
        teacher: ``obs dict -> (N, A)`` actions (optionally with ``reset(ids)``).
        episodes: episodes to record.
        noise: std of Gaussian noise added to each teacher action.
        success_only: keep successful episodes only.
        seed: noise seed.
        max_steps: env steps before giving up (default ``50 * max_episode_length * per-world episodes``).
        extra_obs: further observation keys to record per step (``image``, ``instruction``),
            returned under ``extra_obs`` and written as ``obs/<key>`` by ``write_demos``.

    Returns:
        Episodes with ``obs``, ``next_obs``, ``actions`` (the noisy actions actually applied),
        ``rewards``, ``terminated`` (per-step tensors), ``success``; with ``noise > 0`` also
        ``teacher_actions`` (the teacher's own actions before the noise, clamped: DART labels
        for cloning); with ``extra_obs``, ``extra_obs`` (dict of per-step tensors).

    """
    gen = torch.Generator(device=env.device)
    gen.manual_seed(seed)
    n = env.num_envs
    obs = env.reset()
    keys = ("obs", "next_obs", "actions", "rewards", "terminated", *(("teacher_actions",) if noise > 0 else ()))
    current: list[dict[str, list[torch.Tensor]]] = [{k: [] for k in (*keys, *extra_obs)} for _ in range(n)]
    per_world = max(1, -(-episodes // n))
    recorded = [0] * n
    out: list[tuple[int, int, Episode]] = []
    limit = max_steps or 50 * env.max_episode_length * per_world
    with torch.no_grad():
        for _ in range(limit):
            clean = teacher(obs).clamp(-1.0, 1.0)
            action = clean
            if noise > 0:
                action = (clean + noise * torch.randn(clean.shape, generator=gen, device=env.device)).clamp(-1.0, 1.0)
            next_obs, reward, terminated, truncated, info = env.step(action)
            final = info["final_obs"]["policy"]
            for i in range(n):
                ep = current[i]
                ep["obs"].append(obs["policy"][i].cpu())
                ep["next_obs"].append(final[i].cpu())
                ep["actions"].append(action[i].cpu())
                ep["rewards"].append(reward[i].cpu())
                ep["terminated"].append(terminated[i].cpu())
                if noise > 0:
                    ep["teacher_actions"].append(clean[i].cpu())
                for key in extra_obs:
                    ep[key].append(obs[key][i].cpu())
            done = (terminated | truncated).nonzero().squeeze(1).tolist()
            for j, i in enumerate(done):
                success = bool(info["episode"]["success"][j] > 0.5)
                if recorded[i] < per_world and (success or not success_only):
                    out.append(
                        (
                            recorded[i],
                            i,
                            _episode(current[i], extra_obs) | {"success": success},
                        )
                    )
                    recorded[i] += 1
                current[i] = {k: [] for k in current[i]}
            if done and hasattr(teacher, "reset"):
                teacher.reset(torch.tensor(done, device=env.device))
            obs = next_obs
            if min(recorded) >= per_world:
                return [ep for _, _, ep in sorted(out, key=lambda x: (x[0], x[1]))][:episodes]
    raise RuntimeError(
        f"Recorded only {len(out)} of {episodes} episodes in {limit} steps; "
        "lower episodes or drop success_only."
    )


def _episode(steps: dict[str, list[torch.Tensor]], extra_obs: tuple[str, ...]) -> Episode:
    ep: Episode = {k: torch.stack(v) for k, v in steps.items() if k not in extra_obs}
    if extra_obs:
        ep["extra_obs"] = {k: torch.stack(steps[k]) for k in extra_obs}
    return ep
