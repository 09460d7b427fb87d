"""Off-policy and offline runner: SAC, FastTD3, residual RL (ResFiT / RLPD) and behaviour cloning.

The loop, per iteration: ``steps_per_iteration`` times (act, env step, process step, and
the owed gradient steps when the algorithm is ready); then log, checkpoint. BC is offline:
one ``update`` per iteration and a periodic success evaluation in the env.

For ``algo=residual`` the runner builds the frozen base from ``algo.base`` (a checkpoint,
or an HDF5 dataset to fit a BC base on first), wraps the env in ``BaseActionEnv`` and loads
the demonstrations with relabelled base actions.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from robotrl.algos.base import Algorithm
from robotrl.envs.base import VecEnv
from robotrl.policies.frozen import ChunkExecutor, FrozenPolicy, load_frozen
from robotrl.rewards.env import wrap_vlm_rewards
from robotrl.runners.base import EpisodeStats, Runner
from robotrl.storage.checkpoint import load_tensors, prefixed, save_tensors
from robotrl.storage.replay import ReplayBuffer

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


class OffPolicyRunner(Runner):
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
        super().__init__(cfg, run_dir, config_yaml)
        if env is None:
            from robotrl.envs.task_env import make_env

            env = make_env(cfg.task, cfg.sim, seed=cfg.seed)
        self.task_env = env
        # reward=vlm_rm|clg: a VLM reward term scored from rendered frames (robotrl.rewards.env); none: no-op
        self.env: VecEnv = wrap_vlm_rewards(env, getattr(cfg, "reward", None))
        self._relabel = getattr(self.env, "relabel_replay", None)  # late async scores -> their replay slots
        self.base_path = ""
        self.base_module: torch.nn.Module | None = None
        self.base_meta: dict[str, Any] = {}
        self._configure_torch(env.device)
        self.algo: Algorithm = self._build_algo(cfg.algo)

    # --- construction --------------------------------------------------------------
    def _build_algo(self, acfg: Any) -> Algorithm:
        env, dev = self.env, self.env.device
        if acfg.name == "sac":
            from robotrl.algos.sac import SAC

            return SAC(env.obs_dims["policy"], env.num_actions, acfg, env.num_envs, dev, seed=self.cfg.seed)
        if acfg.name == "fasttd3":
            from robotrl.algos.fasttd3 import FastTD3

            return FastTD3(env.obs_dims["policy"], env.num_actions, acfg, env.num_envs, dev, seed=self.cfg.seed)
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
        raise KeyError(f"OffPolicyRunner cannot run algo {acfg.name!r}; valid: sac, fasttd3, residual, bc.")

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
        self.env = BaseActionEnv(self.env, base, acfg.reward)
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
    def extra_meta(self) -> dict[str, Any]:
        """The base policy a residual learner acts on top of."""
        return {"base": self.base_path, "base_policy": self.base_meta}

    def extra_tensors(self) -> dict[str, torch.Tensor]:
        """The frozen base's weights, so a residual checkpoint is self-contained."""
        return prefixed(self.base_module.state_dict(), "base") if self.base_module is not None else {}

    def _replay_path(self, iteration: int) -> Path:
        return self.run_dir / "checkpoints" / f"replay_{iteration:06d}.safetensors"

    def save(self) -> Path:
        """The checkpoint, preceded by the replay buffer (``replay_<iteration>.safetensors``, newest only).

        The buffer is written first, so ``latest`` never names a checkpoint whose buffer is
        missing; older buffers are removed only after the new checkpoint is complete.
        """
        replay = getattr(self.algo, "replay", None)
        written = None
        if self.cfg.save_replay and isinstance(replay, ReplayBuffer) and len(replay):
            if replay.nbytes > self.cfg.replay_save_max_gb * 1e9:
                log.warning("replay buffer is %.2f GB, over replay_save_max_gb=%.2f: not saved (a resumed run "
                            "starts with an empty buffer)", replay.nbytes / 1e9, self.cfg.replay_save_max_gb)
            else:
                (self.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
                written = save_tensors(self._replay_path(self.iteration), replay.state_tensors())
        path = super().save()
        for old in (self.run_dir / "checkpoints").glob("replay_*.safetensors"):
            if old != written:
                old.unlink(missing_ok=True)
        return path

    def restore_extra(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Refill the replay buffer saved with this checkpoint, if there is one."""
        replay = getattr(self.algo, "replay", None)
        if not isinstance(replay, ReplayBuffer):
            return
        path = self._replay_path(meta["iteration"])
        if not path.is_file():
            log.warning("no saved replay buffer for %s (save_replay was off or it was too large): "
                        "resuming with an empty buffer", meta["name"])
            return
        replay.load_state_tensors(load_tensors(path, replay.device))
        log.info("restored %d replay transitions from %s", len(replay), path.name)

    def _iterate(
        self, obs: dict[str, torch.Tensor], stats: EpisodeStats
    ) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
        if self.cfg.algo.name == "bc":
            with self.update_threads():
                return obs, self.algo.update(obs), 0
        totals: dict[str, float] = {}
        vlm: dict[str, float] = {}
        n_updates = 0
        for _ in range(self.cfg.algo.steps_per_iteration):
            action = self.algo.act(obs)
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.algo.process_step(obs, reward, terminated, truncated, info)
            stats.observe(info)
            if self._relabel is not None:  # before any gradient step samples these transitions
                for k, v in self._relabel(self.algo.replay).items():  # type: ignore[attr-defined]
                    vlm[k] = vlm.get(k, 0.0) + v
            if self.algo.ready():
                with self.update_threads():
                    update_stats = self.algo.update(obs)
                for k, v in update_stats.items():
                    totals[k] = totals.get(k, 0.0) + v
                n_updates += 1
        update = ({k: v / n_updates for k, v in totals.items()} if n_updates else {}) | vlm
        update["updates"] = float(getattr(self.algo, "num_updates", 0))
        return obs, update, self.cfg.algo.steps_per_iteration * self.env.num_envs

    def _after_iteration(self) -> dict[str, float]:
        if self.cfg.algo.name != "bc":
            return {}
        interval = self.cfg.algo.eval_interval
        final = self.finishing
        if not final and (interval <= 0 or self.iteration % interval):
            return {}
        algo = self.algo
        result = evaluate_success(self.env, algo.act, reset=algo.executor.reset)  # type: ignore[attr-defined]
        return {f"eval/{k}": v for k, v in result.items()}
