"""Shared helpers for benchmark scripts: machine facts, flat JSON results, a printed table,
one composed robotrl config for every learner in a comparison, and SB3 PPO built from it."""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """CPU model, core count, GPU (if any), library versions and the UTC date."""
    import mujoco
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "machine_cpu": cpu,
        "machine_cpu_count": os.cpu_count(),
        "machine_gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "torch_version": torch.__version__,
        "mujoco_version": mujoco.__version__,
        "python_version": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **load_avg("at_save"),
    }


def load_avg(when: str) -> dict[str, float]:
    """The 1-, 5- and 15-minute load averages, keyed ``load_avg_<n>min_<when>``."""
    one, five, fifteen = os.getloadavg()
    return {f"load_avg_1min_{when}": one, f"load_avg_5min_{when}": five, f"load_avg_15min_{when}": fifteen}


def save(name: str, figures: dict, merge: bool = True, out_dir: str | Path | None = None) -> Path:
    """Write ``<out_dir>/<name>.json`` (default ``results/``): flat figures plus the machine facts."""
    out = Path(out_dir) if out_dir else RESULTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    old = json.loads(path.read_text()) if merge and path.exists() else {}
    merged = {**old, **figures, **machine()}
    path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    return path


def table(rows: list[tuple[str, str]], title: str) -> str:
    """A plain two-column text table."""
    width = max(len(k) for k, _ in rows) + 2
    lines = [title, "-" * (width + 20)] + [f"{k:<{width}}{v}" for k, v in rows]
    return "\n".join(lines)


def timed(fn, min_seconds: float = 5.0, warmup: int = 5) -> float:
    """Call ``fn()`` (one batch of work, returning its step count) for ``min_seconds``; steps/s."""
    for _ in range(warmup):
        fn()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds:
        steps += fn()
    return steps / (time.perf_counter() - start)


def interleaved(arms: dict[str, Callable[[], object]], *, seconds: float | None = None,
                rounds: int | None = None,
                after_each: Callable[[], object] | None = None) -> tuple[dict[str, float], dict[str, int]]:
    """Time ``arms`` by alternating calls (one per arm per round), so every arm sees the same machine load.

    Runs until every arm has spent ``seconds``, or for exactly ``rounds`` rounds (give one of the two).
    ``after_each`` runs after every call, outside the timing (to undo an arm's side effects).
    Returns (seconds spent per arm, calls per arm).
    """
    if (seconds is None) == (rounds is None):
        raise ValueError(f"interleaved: give exactly one of seconds={seconds} and rounds={rounds}")
    times, calls = dict.fromkeys(arms, 0.0), dict.fromkeys(arms, 0)
    done = 0
    while min(times.values()) < seconds if seconds is not None else done < rounds:
        for name, fn in arms.items():
            start = time.perf_counter()
            fn()
            times[name] += time.perf_counter() - start
            calls[name] += 1
            if after_each is not None:
                after_each()
        done += 1
    return times, calls


def missing(reason: str) -> str:
    """The value recorded for a row that could not run (never drop a row silently)."""
    return f"missing: {reason}"


def fmt(value: object) -> str:
    """A table cell: floats with thousands separators, everything else as is."""
    return f"{value:,.3f}" if isinstance(value, float) else str(value)


# --- one composed config for every learner ----------------------------------------------------


def compose_train(overrides: list[str]) -> tuple[Any, str, str]:
    """Compose ``robotrl train <overrides>`` as the CLI does: (typed config, resolved YAML, config hash).

    The hash is the one ``robotrl train`` with the same overrides records in its checkpoints.
    """
    from omegaconf import OmegaConf

    from robotrl.config import compose_train as compose
    from robotrl.runners.base import config_hash

    cfg = compose(overrides)
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    return OmegaConf.to_object(cfg), config_yaml, config_hash(config_yaml)


def task_hash(task_cfg: Any) -> str:
    """Short sha256 of a task config's fields: equal hashes mean the same environment settings."""
    return hashlib.sha256(json.dumps(asdict(task_cfg), sort_keys=True).encode()).hexdigest()[:16]


# --- SB3 PPO with robotrl's hyperparameters ----------------------------------------------------

SB3_DIFFERENCES = (
    "SB3 keeps a fixed learning rate (robotrl PPO adapts it to a KL target); "
    "SB3's critic sees the policy observation only (robotrl's critic also sees the task's privileged critic terms); "
    "SB3's clipped value loss uses the clipped prediction only (robotrl takes the max of clipped and unclipped, "
    "as rsl_rl does)"
)


def sb3_ppo(cfg: Any, venv: Any) -> tuple[Any, Any]:
    """SB3 PPO on the SB3 ``venv`` with the PPO settings of the composed ``cfg``; returns ``(model, venv)``.

    Rollout size (``num_steps x sim.num_envs`` env steps per update, split over however many
    worlds ``venv`` has), epochs, mini-batch size, learning rate, discount, GAE lambda, clip
    ranges, loss weights, gradient clip, network sizes, activation and initial action std all
    come from ``cfg.algo``, ``cfg.sim`` and ``cfg.policy``. Observations are normalized by
    ``VecNormalize`` (the returned venv) when ``cfg.policy.normalize_obs`` is set, as robotrl's
    running normalization does, and rewards when ``cfg.algo.normalize_rewards`` is; SB3's
    orthogonal initialization is on exactly when ``cfg.policy.init`` is ``orthogonal``.
    What cannot be matched is listed in ``SB3_DIFFERENCES``; SB3 has no Beta policy, so a config
    with ``policy.distribution=beta`` (driving's) gets SB3's Gaussian (see ``sb3_distribution``).
    The caller sets torch's thread count (``sb3_budget`` switches it between collection and update).
    """
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    from robotrl.policies.mlp import ACTIVATIONS

    algo, pol = cfg.algo, cfg.policy
    if pol.distribution not in ("gaussian", "beta"):
        raise ValueError(f"SB3 PPO has no {pol.distribution!r} distribution; compose policy.distribution=gaussian")
    rollout = algo.num_steps * cfg.sim.num_envs
    if rollout % venv.num_envs:
        raise ValueError(f"a rollout of {rollout} env steps does not split over {venv.num_envs} worlds")
    # reward scaling and orthogonal init follow robotrl's switches, so both learners get the same recipe
    venv = VecNormalize(venv, norm_obs=pol.normalize_obs, norm_reward=algo.normalize_rewards, gamma=algo.gamma)
    model = PPO(
        "MlpPolicy", venv, n_steps=rollout // venv.num_envs, batch_size=rollout // algo.num_minibatches,
        n_epochs=algo.num_epochs, learning_rate=algo.lr, gamma=algo.gamma, gae_lambda=algo.lam,
        clip_range=algo.clip, clip_range_vf=algo.value_clip if algo.value_clip > 0 else None,
        vf_coef=algo.value_coef, ent_coef=algo.entropy_coef, max_grad_norm=algo.max_grad_norm,
        normalize_advantage=algo.normalize_advantages, device="cpu", seed=cfg.seed, verbose=0,
        policy_kwargs={"net_arch": {"pi": list(pol.actor_hidden), "vf": list(pol.critic_hidden)},
                       "activation_fn": ACTIVATIONS[pol.activation], "log_std_init": math.log(pol.init_std),
                       "ortho_init": pol.init == "orthogonal"},
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes an empty /tmp/SB3-<date> dir
    return model, venv


def sb3_distribution(cfg: Any) -> str:
    """What SB3's policy distribution is for ``cfg``, in words, for the results JSON."""
    if cfg.policy.distribution == "beta":
        return "gaussian (SB3 has no Beta policy; robotrl's learner uses the config's beta, clipped-Gaussian in SB3)"
    if cfg.policy.max_std > 0:
        return (f"gaussian with an unbounded std (SB3 has no bound; robotrl projects its std onto "
                f"policy.max_std={cfg.policy.max_std:g})")
    return cfg.policy.distribution


def sb3_budget(cfg: Any) -> Any:
    """SB3 callback: stop at the first rollout that *starts* after ``cfg.max_time_s`` of training.

    That is robotrl's ``max_time_s`` rule (an iteration is finished, then the budget is checked),
    so neither learner gets a partial last update. It also keeps a learning curve: after each
    update, ``(wall_s, env_steps, mean return of the last 100 finished episodes)``, the point
    and window robotrl's runner logs as ``time_s``, ``env_steps`` and ``episode/return``.
    Its torch threads follow robotrl's runner too: ``cfg.torch_threads`` while collecting and
    ``cfg.update_threads`` (resolved the same way) while training on a rollout.
    """
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from robotrl.runners.base import resolve_update_threads

    seconds = cfg.max_time_s
    collect_threads = cfg.torch_threads if cfg.torch_threads > 0 else torch.get_num_threads()
    update_threads = resolve_update_threads(getattr(cfg, "update_threads", 0))

    class Budget(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start = time.perf_counter()
            self.over = False
            self.trained_steps = 0  # env steps of the rollouts that were trained on
            self.curve: list[tuple[float, int, float]] = []

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_rollout_start(self) -> None:  # the previous rollout has been trained on
            torch.set_num_threads(collect_threads)
            wall = time.perf_counter() - self.start
            self.over = wall >= seconds
            self.trained_steps = self.model.num_timesteps
            buf = self.model.ep_info_buffer
            if buf:
                self.curve.append((wall, self.trained_steps, sum(ep["r"] for ep in buf) / len(buf)))

        def _on_rollout_end(self) -> None:  # SB3 trains on the rollout next
            torch.set_num_threads(update_threads)

        def _on_step(self) -> bool:
            return not self.over

    return Budget()
