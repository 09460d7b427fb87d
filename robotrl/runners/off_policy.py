"""Off-policy and offline runner: SAC, residual RL (ResFiT / RLPD) and behaviour cloning.

The loop, per iteration: ``steps_per_iteration`` times (act, env step, process step, and
the owed gradient steps when the algorithm is ready); then log, checkpoint. BC is offline:
one ``update`` per iteration and a periodic success evaluation in the env.

For ``algo=residual`` the runner builds the frozen base from ``algo.base`` (a checkpoint,
or an HDF5 dataset to fit a BC base on first), wraps the env in ``BaseActionEnv`` and loads
the demonstrations with relabelled base actions.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from robotrl.algos.base import Algorithm
from robotrl.envs.base import VecEnv
from robotrl.logging import MetricsLogger, TrainProgress
from robotrl.policies.frozen import ChunkExecutor, FrozenPolicy, load_frozen
from robotrl.runners.checkpoint import load_checkpoint, prefixed, save_checkpoint
from robotrl.runners.on_policy import EpisodeStats, config_hash

log = logging.getLogger(__name__)

DATASET_SUFFIXES = (".hdf5", ".h5")


@torch.no_grad()
def evaluate_success(
    env: VecEnv, act: Any, reset: Any = None, max_steps: int | None = None
) -> dict[str, float]:
    """Mean statistics of the *first* episode of every world (no bias toward short episodes).

    Args:
        env: the env (``num_envs`` episodes are scored).
        act: ``obs dict -> (N, A)`` deterministic action.
        reset: optional ``ids -> None`` called for worlds whose episode ended (chunk state).
        max_steps: step limit (default ``2 * max_episode_length``).

    Returns:
        ``success``, ``return`` and ``length`` means over the ``N`` first episodes.

    """
    obs = env.reset()
    n = env.num_envs
    if reset is not None:
        reset(torch.arange(n, device=env.device))
    scored = torch.zeros(n, dtype=torch.bool, device=env.device)
    sums = {k: torch.zeros(n, device=env.device) for k in ("success", "return", "length")}
    for _ in range(max_steps or 2 * env.max_episode_length):
        obs, _, terminated, truncated, info = env.step(act(obs))
        done = (terminated | truncated).nonzero().squeeze(1)
        if done.numel():
            fresh = ~scored[done]
            for key in sums:
                sums[key][done[fresh]] = info["episode"][key][fresh].float()
            scored[done] = True
            if reset is not None:
                reset(done)
        if scored.all():
            break
    if not scored.any():
        raise RuntimeError("evaluate_success: no episode finished; raise max_steps.")
    return {k: float(v[scored].mean()) for k, v in sums.items()} | {"episodes": float(scored.sum())}


def is_dataset(path: str) -> bool:
    """Whether ``path`` names an HDF5 demonstration file rather than a checkpoint."""
    return str(path).endswith(DATASET_SUFFIXES)


class OffPolicyRunner:
    """Trains ``cfg.algo`` (``sac``, ``residual`` or ``bc``) and writes everything to ``run_dir``.

    Args:
        cfg: the typed ``TrainConfig``.
        run_dir: output directory.
        config_yaml: the resolved config, stored in checkpoints.
        env: an already built VecEnv (tests, benchmarks); default builds ``cfg.task`` on ``cfg.sim``.

    """

    def __init__(
        self, cfg: Any, run_dir: str | Path, config_yaml: str = "", env: VecEnv | None = None
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.config_yaml = config_yaml or OmegaConf.to_yaml(OmegaConf.structured(cfg))
        torch.manual_seed(cfg.seed)
        threads = getattr(cfg, "torch_threads", 0)
        if threads > 0 and (env is None or env.device.type == "cpu"):
            torch.set_num_threads(threads)
        if env is None:
            from robotrl.envs.task_env import make_env

            env = make_env(cfg.task, cfg.sim, seed=cfg.seed)
        self.task_env = env
        self.env: VecEnv = env
        self.base_path = ""
        self.base_module: torch.nn.Module | None = None
        self.base_meta: dict[str, Any] = {}
        self.algo: Algorithm = self._build_algo(cfg.algo)
        self.iteration = 0
        self.env_steps = 0
        self.elapsed_s = 0.0

    # --- construction --------------------------------------------------------------
    def _build_algo(self, acfg: Any) -> Algorithm:
        env, dev = self.env, self.env.device
        if acfg.name == "sac":
            from robotrl.algos.sac import SAC

            return SAC(env.obs_dims["policy"], env.num_actions, acfg, env.num_envs, dev, seed=self.cfg.seed)
        if acfg.name == "bc":
            from robotrl.algos.bc import BC
            from robotrl.storage.demos import read_demos

            if not acfg.dataset:
                raise ValueError(
                    "algo=bc needs a dataset: add algo.dataset=<file.hdf5> (record it with robotrl collect)."
                )
            episodes, _ = read_demos(acfg.dataset, success_only=acfg.success_only)
            return BC(episodes, acfg, dev, num_envs=env.num_envs, seed=self.cfg.seed)
        if acfg.name == "residual":
            return self._build_residual(acfg)
        raise KeyError(f"OffPolicyRunner cannot run algo {acfg.name!r}; valid: sac, residual, bc.")

    def _fit_bc_base(self, dataset: str, acfg: Any) -> FrozenPolicy:
        from robotrl.algos.bc import BC, BCConfig
        from robotrl.storage.demos import read_demos

        episodes, _ = read_demos(dataset, success_only=True)
        bc_cfg = BCConfig(dataset=dataset, execution=acfg.base_execution or "ensemble")
        bc = BC(episodes, bc_cfg, self.env.device, num_envs=self.env.num_envs, seed=self.cfg.seed)
        stats = {"loss/bc": float("nan")}
        for _ in range(acfg.bc_iterations):
            stats = bc.update()
        self.base_module, self.base_meta = bc.policy, bc.policy_meta()
        log.info(
            "fitted a BC base on %s (%d demos): final loss %.4f", dataset, len(episodes), stats["loss/bc"]
        )
        return bc.executor

    def _build_residual(self, acfg: Any) -> Algorithm:
        from robotrl.algos.residual import Residual, relabel_base_actions
        from robotrl.envs.residual import BaseActionEnv
        from robotrl.policies.frozen import ZeroPolicy
        from robotrl.storage.demos import demos_to_buffer, read_demos

        base: FrozenPolicy | None = None
        base_path = acfg.base or getattr(self.cfg, "base", "")
        if base_path and is_dataset(base_path):
            base = self._fit_bc_base(base_path, acfg)
        elif base_path:
            base, base_ckpt = load_frozen(
                base_path, self.env.num_envs, self.env.device, acfg.base_execution or None
            )
            self.base_module = base.policy if isinstance(base, ChunkExecutor) else base.module  # type: ignore
            self.base_meta = base_ckpt["policy"]
            want, have = self.base_meta["obs_dim"], self.task_env.obs_dims["policy"]
            if want != have:
                raise ValueError(
                    f"Base {base_path!r} was trained on {want}-D observations but this "
                    f"{self.cfg.task.name if hasattr(self.cfg.task, 'name') else 'env'} gives {have}; "
                    "train the base on the same task settings (see its config_yaml)."
                )
        self.base_path = base_path
        self.env = BaseActionEnv(self.task_env, base, acfg.reward)
        demos_path = acfg.demos or (base_path if base_path and is_dataset(base_path) else "")
        demos = None
        if demos_path:
            episodes, _ = read_demos(demos_path, success_only=acfg.demos_success_only)
            labeller = base if base is not None else ZeroPolicy(self.env.num_actions)
            base_actions, next_base_actions = relabel_base_actions(labeller, episodes, self.env.device)
            demos = demos_to_buffer(
                episodes, self.env.device, acfg.reward == "sparse", base_actions, next_base_actions
            )
            log.info(
                "loaded %d demonstrations (%d transitions) from %s", len(episodes), len(demos), demos_path
            )
        return Residual(
            self.env.obs_dims["policy"],
            self.env.num_actions,
            acfg,
            self.env.num_envs,
            self.env.device,
            demos=demos,
            has_base=base is not None,
            seed=self.cfg.seed,
        )

    # --- checkpoints -----------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """JSON metadata stored beside the weights."""
        task = getattr(self.task_env, "task", None)
        task_cfg = self.cfg.task
        meta: dict[str, Any] = {
            "task": {
                "name": getattr(task_cfg, "name", type(self.task_env).__name__),
                "config": asdict(task_cfg) if is_dataclass(task_cfg) and not isinstance(task_cfg, type) else {},
            },
            "policy": self.algo.policy_meta(),  # type: ignore[attr-defined]
            "algo": self.cfg.algo.name,
            "base": self.base_path,
            "base_policy": self.base_meta,
            "step_dt": self.env.step_dt,
            "config_yaml": self.config_yaml,
            "config_hash": config_hash(self.config_yaml),
            "env_steps": self.env_steps,
            "elapsed_s": self.elapsed_s,
            "algo_state": self.algo.state_meta(),
        }
        if task is not None:
            meta |= {
                "obs_layout": [list(x) for x in task.obs_layout()],
                "joint_names": task.joint_names,
                "action_spec": task.action_spec(),
            }
        return meta

    def save(self) -> Path:
        """Atomically write a checkpoint of the current iteration (the replay is not saved)."""
        tensors = {**self.algo.state_tensors(), "rng.torch": torch.get_rng_state()}
        if self.base_module is not None:
            tensors.update(prefixed(self.base_module.state_dict(), "base"))
        gen = getattr(self.task_env, "gen", None)
        if gen is not None:
            tensors["rng.env"] = gen.get_state()
        return save_checkpoint(self.run_dir / "checkpoints", self.iteration, tensors, self.meta())

    def restore(self) -> bool:
        """Continue from the newest checkpoint in ``run_dir``; False if there is none."""
        if not (self.run_dir / "checkpoints" / "latest.json").is_file():
            log.warning("resume=true but %s has no checkpoint yet; starting fresh", self.run_dir)
            return False
        tensors, meta = load_checkpoint(self.run_dir)
        self.algo.load_state_tensors(tensors, meta)
        torch.set_rng_state(tensors["rng.torch"])
        gen = getattr(self.task_env, "gen", None)
        if gen is not None and "rng.env" in tensors:
            gen.set_state(tensors["rng.env"])
        self.iteration, self.env_steps = meta["iteration"], meta["env_steps"]
        self.elapsed_s = meta.get("elapsed_s", 0.0)
        log.info("resumed from %s at iteration %d (replay restarts empty)", meta["name"], self.iteration)
        return True

    # --- loop --------------------------------------------------------------------------
    def learn(self) -> dict[str, float]:
        """Run until ``max_iterations`` or ``max_time_s``; return the last logged metrics."""
        cfg = self.cfg
        if cfg.resume:
            self.restore()
        logger = MetricsLogger(self.run_dir, tensorboard=cfg.tensorboard)
        stats = EpisodeStats()
        obs = self.env.reset()
        last: dict[str, float] = {}
        start_wall = time.perf_counter() - self.elapsed_s
        log.info(
            "training %s with %s: %d worlds on %s, run dir %s",
            getattr(cfg.task, "name", "env"),
            cfg.algo.name,
            self.env.num_envs,
            self.env.device,
            self.run_dir,
        )
        try:
            with TrainProgress(cfg.max_iterations, enabled=cfg.progress, start=self.iteration) as bar:
                while self.iteration < cfg.max_iterations:
                    t0 = time.perf_counter()
                    obs, update, steps = self._iterate(obs, stats)
                    self.iteration += 1
                    self.elapsed_s = time.perf_counter() - start_wall
                    self.env_steps += steps
                    last = {
                        "iteration": self.iteration,
                        "time_s": self.elapsed_s,
                        "perf/steps_per_s": steps / max(time.perf_counter() - t0, 1e-9),
                        "episodes": stats.count,
                        **stats.means(),
                        **update,
                    }
                    last |= self._maybe_eval()
                    logger.log(self.env_steps, last)
                    bar.update(self.iteration, last)
                    if self.iteration % cfg.save_interval == 0:
                        self.save()
                    if cfg.max_time_s > 0 and self.elapsed_s >= cfg.max_time_s:
                        log.info(
                            "time budget of %.0f s reached at iteration %d", cfg.max_time_s, self.iteration
                        )
                        break
        except KeyboardInterrupt:
            log.warning("interrupted: saving a checkpoint at iteration %d", self.iteration)
        finally:
            self.save()
            logger.close()
        log.info(
            "done: %d iterations, %d env steps in %.0f s; checkpoint in %s",
            self.iteration,
            self.env_steps,
            self.elapsed_s,
            self.run_dir / "checkpoints",
        )
        return last

    def _iterate(
        self, obs: dict[str, torch.Tensor], stats: EpisodeStats
    ) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
        if self.cfg.algo.name == "bc":
            return obs, self.algo.update(obs), 0
        totals: dict[str, float] = {}
        n_updates = 0
        for _ in range(self.cfg.algo.steps_per_iteration):
            action = self.algo.act(obs)
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.algo.process_step(obs, reward, terminated, truncated, info)
            if "episode" in info:
                stats.add(info["episode"])
            if self.algo.ready():
                for k, v in self.algo.update(obs).items():
                    totals[k] = totals.get(k, 0.0) + v
                n_updates += 1
        update = {k: v / n_updates for k, v in totals.items()} if n_updates else {}
        update["updates"] = float(getattr(self.algo, "num_updates", 0))
        return obs, update, self.cfg.algo.steps_per_iteration * self.env.num_envs

    def _maybe_eval(self) -> dict[str, float]:
        if self.cfg.algo.name != "bc":
            return {}
        interval = self.cfg.algo.eval_interval
        final = self.iteration >= self.cfg.max_iterations
        if not final and (interval <= 0 or self.iteration % interval):
            return {}
        algo = self.algo
        result = evaluate_success(self.env, algo.act, reset=algo.executor.reset)  # type: ignore[attr-defined]
        return {f"eval/{k}": v for k, v in result.items()}
