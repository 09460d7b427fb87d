"""VLA supervised fine-tuning: behaviour cloning on teacher demonstrations, then DAgger.

Data: ``robotrl.data.collect.collect(..., extra_obs=("image", "instruction"))`` rolls a
privileged teacher (the task's ``scripted_action`` or an RL checkpoint) in the batched sim;
``robotrl.storage.demos.write_demos`` stores it as the project's HDF5 demos plus
``obs/image`` and ``obs/instruction``. ``build_dataset`` runs the frozen vision tower once per
frame and keeps ``(vision tokens, proprio, instruction, action)`` rows, so training never
re-runs the backbone. The action targets are the teacher's clean actions (``teacher_actions``,
recorded when the collection adds noise) in the noise-perturbed states: DART.

DAgger (tokens head): the student acts (with probability ``1 - beta`` per world and round,
the teacher otherwise), the teacher relabels every visited state with its own action, and
the rows are added to the dataset before training continues.

Everything here is math and data: no files, no logging sinks (runners own those).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from robotrl.envs.base import VecEnv
from robotrl.policies.vla import VLA, VLAConfig

Dataset = dict[str, torch.Tensor]


@dataclass
class VLASFTConfig:
    """``algo=vla_sft``: behaviour cloning (+ DAgger) of a VLA on teacher demonstrations.

    Attributes:
        name: registered algorithm name.
        dataset: HDF5 demos with ``obs/image`` and ``obs/instruction``; empty collects them first.
        teacher: ``scripted`` (the task's privileged controller) when collecting.
        demo_episodes: episodes to collect when ``dataset`` is empty (128 were too few for the
            instruction to matter: 1024 at 6000 steps give a clear shuffled-instruction gap).
        demo_noise: std of Gaussian noise on the teacher's actions while collecting (state diversity;
            the labels stay the teacher's clean actions, see ``demo_labels``).
        steps: gradient steps of behaviour cloning.
        batch_size: rows per step.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        dagger_rounds: DAgger rounds after the first cloning (0: BC only).
        dagger_episodes: student episodes relabelled per round.
        dagger_beta: probability that the teacher (not the student) acts in a world during a round.
        dagger_steps: gradient steps after each round.
        image_size: rendered frame side (pixels).
        eval_episodes: episodes per success measurement.
        vla: the model architecture.

    """

    name: str = "vla_sft"
    dataset: str = ""
    teacher: str = "scripted"
    demo_episodes: int = 1024
    demo_noise: float = 0.1
    steps: int = 6000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    dagger_rounds: int = 0
    dagger_episodes: int = 64
    dagger_beta: float = 0.3
    dagger_steps: int = 500
    image_size: int = 64
    eval_episodes: int = 64
    vla: VLAConfig = field(default_factory=VLAConfig)


@torch.no_grad()
def vision_in_batches(model: VLA, images: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """``(M, H, W, 3)`` uint8 -> ``(M, V, C)`` frozen vision tokens, in batches."""
    return torch.cat([model.vision_tokens(images[i:i + batch]) for i in range(0, len(images), batch)])


def chunk_targets(actions: torch.Tensor, chunk: int) -> torch.Tensor:
    """ACT targets: ``(T, A)`` -> ``(T, chunk, A)``; step ``t`` gets actions ``t..t+chunk-1``, the last one repeated."""
    T = actions.shape[0]
    idx = (torch.arange(T)[:, None] + torch.arange(chunk)[None]).clamp(max=T - 1)
    return actions[idx]


def demo_labels(episode: dict) -> torch.Tensor:
    """``(T, A)`` cloning targets of a demo: the teacher's own actions when recorded, else the applied ones.

    Demos collected with action noise (``collect(noise=...)``) visit perturbed states, which is
    what cloning needs, but their applied ``actions`` carry the noise; ``teacher_actions`` are
    the teacher's clean responses in those states (DART). Cloning the noise instead puts about
    one bin of label noise on every action token and slows learning to use the instruction.
    """
    return episode.get("teacher_actions", episode["actions"]).float()


def build_dataset(model: VLA, episodes: list[dict]) -> Dataset:
    """Rows ``vision (M, V, C)``, ``proprio (M, P)``, ``instruction (M,)``, ``action (M, A)`` or ``(M, chunk, A)``.

    Args:
        model: the VLA (its frozen tower encodes the frames; its head decides the action target).
        episodes: demos with ``extra_obs["image"]`` and ``extra_obs["instruction"]``.

    """
    if not episodes or "extra_obs" not in episodes[0]:
        raise ValueError("VLA demos need obs/image and obs/instruction: collect with "
                         "extra_obs=('image', 'instruction').")
    chunked = model.cfg.head == "chunk"
    labels = [demo_labels(ep) for ep in episodes]
    acts = [chunk_targets(a, model.cfg.chunk) if chunked else a for a in labels]
    images = torch.cat([ep["extra_obs"]["image"] for ep in episodes])
    return {
        "vision": vision_in_batches(model, images),
        "proprio": torch.cat([ep["obs"].float() for ep in episodes]),
        "instruction": torch.cat([ep["extra_obs"]["instruction"].long() for ep in episodes]),
        "action": torch.cat(acts),
    }


def merge(a: Dataset, b: Dataset) -> Dataset:
    """Row-wise concatenation of two datasets with the same keys."""
    return {k: torch.cat([a[k], b[k]]) for k in a}


def train_bc(model: VLA, data: Dataset, steps: int, batch_size: int, lr: float, weight_decay: float = 1e-4,
             gen: torch.Generator | None = None, optimizer: torch.optim.Optimizer | None = None) -> list[float]:
    """Minimize ``model.bc_loss`` on random minibatches of ``data``; returns the loss of every step."""
    model.train()
    opt = optimizer or torch.optim.AdamW(model.trainable_parameters(), lr=lr, weight_decay=weight_decay)
    table = model.instruction_table
    n, losses = data["proprio"].shape[0], []
    for _ in range(steps):
        idx = torch.randint(0, n, (min(batch_size, n),), generator=gen)
        loss = model.bc_loss(data["vision"][idx], data["proprio"][idx], table[data["instruction"][idx]],
                             data["action"][idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.trainable_parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def evaluate(env: VecEnv, model: VLA, episodes: int, temperature: float = 1.0, deterministic: bool = True,
             shuffle_instructions: bool = False, gen: torch.Generator | None = None,
             policy: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None = None) -> dict[str, float]:
    """Success rate over the first ``ceil(episodes / N)`` episodes of every world.

    Args:
        env: a VecEnv with ``image`` and ``instruction`` observations.
        model: the VLA.
        episodes: episodes to count.
        temperature: sampling temperature when not ``deterministic``.
        deterministic: arg-max tokens (or the chunk head's mean).
        shuffle_instructions: the wrong-instruction control: for a whole episode the model sees a
            uniformly random instruction of the env's list instead of the world's own (drawn at
            each reset; success is still judged against the world's own instruction).
        gen: generator for sampling and shuffling.
        policy: act with this ``obs -> action`` instead of the model (e.g. the teacher).

    Returns:
        ``success`` (rate) and ``episodes``; ``wrong_tool`` (rate) only when the task's episodes report it.

    """
    per_world = -(-episodes // env.num_envs)
    counted = torch.zeros(env.num_envs, dtype=torch.long)
    success, wrong, total, reports_wrong = 0.0, 0.0, 0, False
    obs = env.reset()
    n_instr = max(len(getattr(env, "instructions", [])), 1)
    shown = torch.randint(0, n_instr, (env.num_envs,), generator=gen)
    for _ in range(per_world * env.max_episode_length * 2 + 1):
        if policy is not None:
            action = policy(obs)
        else:
            seen = dict(obs)
            if shuffle_instructions:
                seen["instruction"] = shown.to(obs["instruction"].device)
            action = model.act(seen, temperature, deterministic, generator=gen)["action"]
        obs, _, term, trunc, info = env.step(action)
        done = (term | trunc).nonzero().squeeze(1)
        if done.numel():
            keep = counted[done] < per_world
            ep = info["episode"]
            success += float(ep["success"][keep].sum())
            if "wrong_tool" in ep:
                reports_wrong = True
                wrong += float(ep["wrong_tool"][keep].sum())
            total += int(keep.sum())
            counted[done] += 1
            shown[done] = torch.randint(0, n_instr, (done.numel(),), generator=gen)
        if bool((counted >= per_world).all()):
            break
    out = {"success": success / max(total, 1), "episodes": float(total)}
    if reports_wrong:
        out["wrong_tool"] = wrong / max(total, 1)
    return out


@torch.no_grad()
def dagger_rows(env: VecEnv, model: VLA, teacher: Callable[[dict[str, torch.Tensor]], torch.Tensor],
                steps: int, beta: float, gen: torch.Generator | None = None) -> Dataset:
    """Roll a student/teacher mixture for ``steps`` env steps; label every visited state with the teacher.

    Each world is driven by the teacher with probability ``beta`` (redrawn when its episode
    ends), else by the student (arg-max). Only ``tokens`` heads: a chunk target would need
    the teacher's future actions from states the student never reaches.
    """
    if model.cfg.head != "tokens":
        raise ValueError("DAgger here relabels single actions: use the tokens head (vla.head=tokens).")
    rows: dict[str, list[torch.Tensor]] = {k: [] for k in ("vision", "proprio", "instruction", "action")}
    obs = env.reset()
    use_teacher = torch.rand(env.num_envs, generator=gen) < beta
    for _ in range(steps):
        out = model.act(obs, deterministic=True)
        label = teacher(obs)
        rows["vision"].append(out["vision"])
        rows["proprio"].append(obs["policy"].float())
        rows["instruction"].append(obs["instruction"])
        rows["action"].append(label)
        action = torch.where(use_teacher[:, None], label, out["action"])
        obs, _, term, trunc, _ = env.step(action)
        done = term | trunc
        use_teacher = torch.where(done, torch.rand(env.num_envs, generator=gen) < beta, use_teacher)
    return {k: torch.cat(v) for k, v in rows.items()}
