"""VLA runner: ``robotrl train algo=vla_sft | grpo | vla_ppo task=tool_use_language``.

``vla_sft``: collect teacher demonstrations with images and instructions (or read
``algo.dataset``), write them to ``<run>/demos.hdf5``, behaviour-clone the VLA, optionally run
DAgger rounds, and save ``<run>/vla.safetensors`` + ``vla.json``. ``grpo``/``vla_ppo``: load
``algo.init`` (an SFT run directory or its ``vla.safetensors``), fine-tune for
``max_iterations`` or ``max_time_s``, save the same two files. Every phase appends to
``metrics.jsonl``; the final line holds the deterministic success on the seen wording.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from robotrl.algos import grpo as G
from robotrl.algos import vla_sft as S
from robotrl.envs.task_env import make_env
from robotrl.monitoring import MetricsLogger
from robotrl.policies.vla import VLA, MiniLMEncoder, VLAConfig

log = logging.getLogger(__name__)


def save_vla(model: VLA, run_dir: Path, meta: dict[str, Any]) -> Path:
    """``vla.safetensors`` (weights, instruction table included) and ``vla.json`` (architecture + meta)."""
    from safetensors.torch import save_file

    path = run_dir / "vla.safetensors"
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))
    cfg = dataclasses.asdict(model.cfg) | {"proprio_dim": model.proprio_dim, "action_dim": model.action_dim}
    (run_dir / "vla.json").write_text(json.dumps({"vla": cfg, **meta}, indent=2))
    return path


def load_vla(path: str | Path) -> VLA:
    """A VLA from a run directory or its ``vla.safetensors`` (``vla.json`` beside it)."""
    from safetensors.torch import load_file

    p = Path(path)
    weights = p / "vla.safetensors" if p.is_dir() else p
    if not weights.is_file():
        raise FileNotFoundError(f"No VLA weights at {weights}; train one with robotrl train algo=vla_sft.")
    spec = json.loads((weights.parent / "vla.json").read_text())["vla"]
    proprio, action = spec.pop("proprio_dim"), spec.pop("action_dim")
    model = VLA(VLAConfig(**spec), proprio, action)
    state = load_file(str(weights))
    model.set_instructions(state["instruction_table"])
    model.load_state_dict(state)
    return model.eval()


class VLARunner:
    """Runs one ``vla_sft``, ``grpo`` or ``vla_ppo`` training job (see module docstring); single process."""

    is_main = True

    def __init__(self, cfg: Any, run_dir: str | Path, config_yaml: str = "") -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(config_yaml)
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(max(1, cfg.torch_threads))
        size = cfg.algo.image_size
        self.env = make_env(cfg.task, cfg.sim, seed=cfg.seed, image_size=(size, size))
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.logger = MetricsLogger(self.run_dir, tensorboard=False)

    def _eval_env(self) -> Any:
        size = self.cfg.algo.image_size
        return make_env(self.cfg.task, self.cfg.sim, seed=self.cfg.seed + 1000, image_size=(size, size))

    def learn(self) -> dict[str, Any]:
        """Run the job; returns the final metrics."""
        try:
            if self.cfg.algo.name == "vla_sft":
                return self._sft()
            return self._rl()
        finally:
            self.logger.close()

    def _sft(self) -> dict[str, Any]:
        from robotrl.data.collect import collect
        from robotrl.storage.demos import read_demos, write_demos

        a, env, start = self.cfg.algo, self.env, time.perf_counter()
        if a.dataset:
            episodes, _ = read_demos(a.dataset)
        else:
            if a.teacher != "scripted":
                raise ValueError("algo.teacher: only 'scripted' (the task's privileged controller) is wired up here.")
            episodes = collect(env, lambda o: env.task.scripted_action(), a.demo_episodes, noise=a.demo_noise,
                               extra_obs=("image", "instruction"), seed=self.cfg.seed)
            write_demos(self.run_dir / "demos.hdf5", episodes, {"task": self.cfg.task.name, "teacher": a.teacher,
                                                                 "noise": a.demo_noise})
        model = VLA(a.vla, env.obs_dims["policy"], env.num_actions)
        model.set_instructions(env.instruction_embeddings(MiniLMEncoder()))
        data = S.build_dataset(model, episodes)
        opt = torch.optim.AdamW(model.trainable_parameters(), lr=a.lr, weight_decay=a.weight_decay)
        losses = S.train_bc(model, data, a.steps, a.batch_size, a.lr, gen=self.gen, optimizer=opt)
        self.logger.log(0, {"iteration": 0, "loss/bc_first": losses[0], "loss/bc_last": losses[-1]})
        teacher = lambda obs: env.task.scripted_action()  # noqa: E731
        for r in range(a.dagger_rounds):
            rows = S.dagger_rows(env, model, teacher, a.dagger_episodes * env.max_episode_length // env.num_envs,
                                 a.dagger_beta, self.gen)
            data = S.merge(data, rows)
            losses = S.train_bc(model, data, a.dagger_steps, a.batch_size, a.lr, gen=self.gen, optimizer=opt)
            self.logger.log(r + 1, {"iteration": r + 1, "dagger/rows": float(data["proprio"].shape[0]),
                                    "loss/bc_last": losses[-1]})
        return self._finish(model, a.dagger_rounds, start)

    def _rl(self) -> dict[str, Any]:
        a, start = self.cfg.algo, time.perf_counter()
        if not a.init:
            raise ValueError("algo.init must name an SFT run (robotrl train algo=vla_sft ...) to fine-tune.")
        model = load_vla(a.init)
        opt = torch.optim.AdamW(model.trainable_parameters(), lr=a.lr, weight_decay=0.0)
        update = G.grpo_update if a.method == "grpo" else G.ppo_update
        it = 0
        while it < self.cfg.max_iterations and not (self.cfg.max_time_s and
                                                    time.perf_counter() - start > self.cfg.max_time_s):
            batch = G.rollout(self.env, model, a.temperature, a.group_size if a.method == "grpo" else None, self.gen)
            metrics = update(model, opt, batch, a, self.gen)
            it += 1
            self.logger.log(it, {"iteration": it, "time_s": time.perf_counter() - start,
                                 **{f"train/{k}": v for k, v in metrics.items()}})
            log.info("%s iteration %d: %s", a.method, it, {k: round(v, 3) for k, v in metrics.items()})
        return self._finish(model, it, start)

    def _finish(self, model: VLA, iteration: int, start: float) -> dict[str, Any]:
        ev = S.evaluate(self._eval_env(), model, self.cfg.algo.eval_episodes, gen=self.gen)
        save_vla(model, self.run_dir, {"task": self.cfg.task.name, "algo": self.cfg.algo.name})
        out = {"iteration": iteration, "time_s": time.perf_counter() - start, "episode/success": ev["success"]}
        if "wrong_tool" in ev:  # tasks with several objects to pick from
            out["episode/wrong_tool"] = ev["wrong_tool"]
        self.logger.log(iteration, out)
        return out
