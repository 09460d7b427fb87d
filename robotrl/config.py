"""Typed config schemas, registered with Hydra's ConfigStore.

YAML groups live in ``configs/`` (shipped as ``robotrl.configs``): ``task/``, ``algo/``,
``sim/``, ``policy/``, ``tuning/`` (per task-and-algorithm overrides, selected by the
defaults-list interpolation ``${task}_${algo}``) and ``launcher/``. Each YAML file of a
group names its schema in its defaults list, so every key and type is validated and a
typo is an error that lists the valid keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from robotrl.algos.ppo import PPOConfig
from robotrl.policies.mlp import PolicyConfig
from robotrl.rewards.config import VLMRewardConfig
from robotrl.sim.backend import SimConfig
from robotrl.tasks import available, config_class


@dataclass
class TrainConfig:
    """``robotrl train``: one training run.

    Attributes:
        task: the task config (group ``task``; schema from ``tasks/<name>/config.py``).
        algo: the algorithm config (group ``algo``).
        sim: backend, world count and threads (group ``sim``).
        policy: network sizes and action distribution (group ``policy``).
        reward: VLM reward term added to the task's (group ``reward``: none, vlm_rm, clg).
        seed: seeds torch and the env's generator.
        max_iterations: algorithm iterations to run at most (a secondary stop by default).
        max_time_s: wall-clock budget in seconds, the primary stop: the run stops cleanly after the
            iteration that spends it (0: none). 600 s gives each task's best CPU result in about
            10 minutes; set it higher on a bigger machine.
        save_interval: iterations between checkpoints.
        keep_checkpoints: the newest checkpoints a run keeps (0: all of them, e.g. for ``robotrl twin
            select`` to choose among a retraining's checkpoints afterwards).
        resume: continue from the newest checkpoint in ``run_dir``.
        run_dir: output directory; empty means ``runs/<task>/<timestamp>``.
        progress: show the rich progress bar.
        tensorboard: also write TensorBoard event files (JSONL metrics are always written).
        log_level: Python logging level for robotrl.
        torch_threads: torch intra-op threads on the CPU while collecting (0: torch's default). 1 is
            fastest for the small per-step tensors of a few hundred worlds, beside the simulator's threads.
        update_threads: torch threads on the CPU during an update (PPO's, or an off-policy gradient
            step), when the simulator is idle (0: every CPU this process may use, shared among the
            node's torchrun ranks). On 2 cores the tool_use PPO update took 0.18 s with 2 threads
            against 0.31 s with 1.
        cuda_matmul: float32 matmul precision of the policy and its updates when they run on a CUDA
            device: ``tf32`` (TensorFloat-32 tensor cores, torch's ``high``) or ``fp32`` (torch's
            ``highest``, its default). Ignored on the CPU.
        save_replay: off-policy runs also write their replay buffer with each checkpoint (one
            file, the newest only), so that a resumed run does not start from an empty buffer.
        replay_save_max_gb: ... unless the buffer is larger than this (then a warning says so).
        base: ``algo=residual`` only: frozen base policy, a checkpoint or an HDF5 dataset
            (shorthand for ``algo.base``, which wins when both are set).

    """

    task: Any = MISSING
    algo: Any = MISSING
    sim: SimConfig = field(default_factory=SimConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    reward: VLMRewardConfig = field(default_factory=VLMRewardConfig)
    seed: int = 0
    max_iterations: int = 1_000_000
    max_time_s: float = 600.0
    save_interval: int = 25
    keep_checkpoints: int = 5
    resume: bool = False
    run_dir: str = ""
    progress: bool = True
    tensorboard: bool = True
    log_level: str = "INFO"
    eval_at_end: bool = True
    torch_threads: int = 1
    update_threads: int = 0
    cuda_matmul: str = "tf32"
    save_replay: bool = True
    replay_save_max_gb: float = 1.0
    base: str = ""


@dataclass
class EvalConfig:
    """``robotrl eval``: roll out a checkpoint, write metrics, a video and a learning curve.

    Attributes:
        checkpoint: run directory, its ``checkpoints/`` directory, or a ``ckpt_*.safetensors``.
        sim: backend and threads (group ``sim``, as in training); its ``num_envs`` is replaced
            by ``num_envs`` below.
        task: overrides of the checkpoint's task config, to stress a policy on conditions it
            never saw: ``task.min_turn_radius=1.0 task.num_obstacles=5``. Unknown fields and
            wrong types are errors naming the valid fields.
        num_envs: parallel worlds for the statistics.
        episodes: episodes to average over (at least): every world contributes its first
            ``ceil(episodes / num_envs)`` episodes, so short episodes are not over-weighted.
        split: task instance set: ``train`` (at the curriculum stage the run reached) or ``heldout``.
        video: write ``eval.mp4`` of world 0.
        video_steps: control steps in the video.
        video_size: ``[height, width]`` of the video.
        camera: camera name or id (-1: free camera); empty uses the task's ``eval_camera``.
        deterministic: use the mean action.
        out_dir: where to write outputs; empty means ``<run>/eval`` (``<run>/eval_pybullet`` with
            ``engine=pybullet``).
        seed: env seed.
        randomize: keep domain randomization on.
        engine: physics engine of the rollout: ``mujoco``, or ``pybullet`` for a sim-to-sim check of a
            MuJoCo-trained policy (``robotrl.twin.bullet``: the same model rebuilt in PyBullet, the task's
            observations, rewards and episode ends unchanged; humanoid and tool_use; CPU backend only).
            Outputs then go to ``<run>/eval_pybullet`` unless ``out_dir`` is given.

    """

    checkpoint: str = MISSING
    sim: SimConfig = field(default_factory=SimConfig)
    task: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 16
    episodes: int = 16
    split: str = "train"
    video: bool = True
    video_steps: int = 300
    video_size: list[int] = field(default_factory=lambda: [360, 480])
    camera: str = ""
    deterministic: bool = True
    out_dir: str = ""
    seed: int = 1
    randomize: bool = False
    engine: str = "mujoco"


def register_configs() -> None:
    """Register the root, algorithm and task schemas with Hydra's ConfigStore."""
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(group="algo", name="ppo_schema", node=PPOConfig)
    cs.store(group="reward", name="vlm_reward_schema", node=VLMRewardConfig)
    for name, node in extra_algo_schemas().items():
        cs.store(group="algo", name=f"{name}_schema", node=node)
    for name in available():
        cs.store(group="task", name=f"{name}_schema", node=config_class(name))


def compose_train(overrides: list[str]) -> Any:
    """Compose ``robotrl train <overrides>`` as the CLI does, without running it: a ``DictConfig``.

    ``OmegaConf.to_object`` of it is the typed ``TrainConfig``. Bad overrides raise Hydra's errors,
    which name the key and the valid choices.
    """
    from hydra import compose, initialize_config_module

    register_configs()
    with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


def extra_algo_schemas() -> dict[str, type]:
    """Schemas of algorithms beyond PPO that are installed in ``robotrl.algos``."""
    from robotrl.algos.bc import BCConfig
    from robotrl.algos.fasttd3 import FastTD3Config
    from robotrl.algos.grpo import GRPOConfig
    from robotrl.algos.residual import ResidualConfig
    from robotrl.algos.sac import SACConfig
    from robotrl.algos.vla_sft import VLASFTConfig

    return {"sac": SACConfig, "fasttd3": FastTD3Config,
            "bc": BCConfig, "residual": ResidualConfig, "vla_sft": VLASFTConfig, "grpo": GRPOConfig,
            "vla_ppo": GRPOConfig}
