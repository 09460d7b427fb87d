"""``robotrl rewards train-encoder task=<task>``: train the ``lit`` projection heads on this project's renders.

1. Render ``frames`` states of the task (lean settings) and caption each from its *measured*
   state (``robotrl.rewards.captions``); a fraction is held out.
2. Run the frozen towers once: EfficientNet-Lite0 features of every frame, MiniLM embeddings
   of every seen caption wording.
3. Train the two heads contrastively: each frame is paired with a random paraphrase of its
   class; the target of an image row is uniform over the batch captions of its class (a
   multi-positive InfoNCE, both directions).
4. Score zero-shot classification of the held-out frames with one prompt per class, in seen
   and in unseen (never trained on) wording; save ``lit_<task>.safetensors`` + ``.json``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robotrl.rewards import captions as cap
from robotrl.rewards.encoders import FrozenTowers, LitEncoder, LitHeads, default_encoder_dir

log = logging.getLogger(__name__)


@dataclass
class TrainEncoderConfig:
    """Settings of ``train-encoder`` (``key=value`` on the command line).

    Attributes:
        task: task whose renders and captions to train on (``humanoid``, ``driving``).
        frames: rendered frames in all (train + held-out).
        heldout: fraction of frames held out for the zero-shot accuracy.
        image_size: side of the square renders, pixels.
        dim: joint embedding size.
        hidden: hidden width of the heads.
        steps: optimizer steps.
        batch_size: frame-caption pairs per step.
        lr: AdamW learning rate.
        seed: seeds rendering, splits and training.
        out: artefact path without suffix; empty: ``<encoder dir>/lit_<task>``.
        threads: torch CPU threads.

    """

    task: str = "humanoid"
    frames: int = 2400
    heldout: float = 0.2
    image_size: int = 96
    dim: int = 128
    hidden: int = 512
    steps: int = 1500
    batch_size: int = 256
    lr: float = 1e-3
    seed: int = 0
    out: str = ""
    threads: int = 2


def all_wordings(key: cap.Key, split: str, wordings: cap.Wordings = cap.HUMANOID_WORDINGS) -> list[str]:
    """Every distinct sentence the templates, subjects and phrases of ``split`` make for ``key``."""
    first, second = key
    return list(dict.fromkeys(t.format(s=s, p=p, a=a) for t, s, p, a in product(
        wordings.templates[split], wordings.subjects[split], wordings.phrases[first][split],
        wordings.phrases[second][split])))


def multi_positive_nce(img: torch.Tensor, txt: torch.Tensor, labels: torch.Tensor, scale: torch.Tensor
                       ) -> torch.Tensor:
    """Symmetric InfoNCE whose targets are uniform over same-class pairs.

    Args:
        img: ``(B, D)`` unit image embeddings.
        txt: ``(B, D)`` unit caption embeddings (row ``i`` describes frame ``i``).
        labels: ``(B,)`` class index of each pair.
        scale: logit scale (inverse temperature).

    Returns:
        Scalar loss.

    """
    logits = scale * img @ txt.T
    same = (labels[:, None] == labels[None, :]).float()
    target = same / same.sum(1, keepdim=True)
    loss_i = -(target * logits.log_softmax(1)).sum(1).mean()
    loss_t = -(target * logits.log_softmax(0)).sum(0).mean()
    return 0.5 * (loss_i + loss_t)


@torch.no_grad()
def zero_shot_accuracy(encoder: LitEncoder | Any, image_emb: torch.Tensor, labels: torch.Tensor,
                       prompts: list[str]) -> float:
    """Fraction of frames whose most similar prompt is their class's (``prompts[c]`` for class ``c``)."""
    text = encoder.encode_text(prompts)
    return float(((image_emb @ text.T).argmax(1) == labels).float().mean())


def train_encoder(cfg: TrainEncoderConfig) -> tuple[Path, dict[str, Any]]:
    """Render, caption, train the heads and save the artefact; returns its path and statistics."""
    if cfg.task not in cap.SOURCES:
        raise KeyError(f"No caption source for task {cfg.task!r}. Tasks with one: {', '.join(cap.SOURCES)}.")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    classes, wordings = cap.CLASSES[cfg.task], cap.WORDINGS[cfg.task]
    t0 = time.perf_counter()
    frames, keys = cap.SOURCES[cfg.task](cfg.frames, rng, (cfg.image_size, cfg.image_size))
    t_render = time.perf_counter() - t0
    log.info("rendered %d %s frames in %.1f s", len(frames), cfg.task, t_render)
    labels = torch.tensor([classes.index(k) for k in keys])
    towers = FrozenTowers(cfg.image_size)
    t0 = time.perf_counter()
    feats = towers.image_features(frames)
    t_feat = time.perf_counter() - t0
    log.info("image tower: %d frames in %.1f s (%.0f frames/s)", len(frames), t_feat, len(frames) / t_feat)
    perm = torch.from_numpy(rng.permutation(len(frames)))
    n_held = int(round(cfg.heldout * len(frames)))
    held, train = perm[:n_held], perm[n_held:]
    pools = [all_wordings(k, "seen", wordings) for k in classes]
    vocab = [s for pool in pools for s in pool]
    text_feats = towers.text_features(vocab)
    offsets = np.cumsum([0] + [len(p) for p in pools])
    heads = LitHeads(cfg.dim, cfg.hidden)
    opt = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(cfg.seed)
    t0 = time.perf_counter()
    losses = []
    for step in range(cfg.steps):
        idx = train[torch.randint(len(train), (cfg.batch_size,), generator=gen)]
        lab = labels[idx]
        lo, hi = torch.as_tensor(offsets[lab.numpy()]), torch.as_tensor(offsets[lab.numpy() + 1])
        pick = lo + (torch.rand(cfg.batch_size, generator=gen) * (hi - lo)).long()
        loss = multi_positive_nce(heads.embed_image(feats[idx]), heads.embed_text(text_feats[pick]), lab,
                                  heads.logit_scale.exp().clamp(max=100.0))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if step % 250 == 0 or step == cfg.steps - 1:
            log.info("step %d/%d: loss %.3f", step + 1, cfg.steps, float(np.mean(losses[-50:])))
    t_train = time.perf_counter() - t0
    heads.eval()
    encoder = LitEncoder(heads, towers)
    with torch.no_grad():
        emb = heads.embed_image(feats)
    stats = {
        "frames": len(frames), "heldout_frames": n_held, "classes": [list(k) for k in classes],
        "class_counts": torch.bincount(labels, minlength=len(classes)).tolist(),
        "final_loss": float(np.mean(losses[-50:])),
        "zero_shot_accuracy_train_seen": zero_shot_accuracy(encoder, emb[train], labels[train],
                                                            [cap.class_prompt(k, "seen", wordings) for k in classes]),
        "zero_shot_accuracy_heldout_seen": zero_shot_accuracy(encoder, emb[held], labels[held],
                                                              [cap.class_prompt(k, "seen", wordings)
                                                               for k in classes]),
        "zero_shot_accuracy_heldout_unseen": zero_shot_accuracy(encoder, emb[held], labels[held],
                                                                [cap.class_prompt(k, "unseen", wordings)
                                                                 for k in classes]),
        "chance_accuracy": 1.0 / len(classes),
        "render_s": t_render, "image_tower_s": t_feat, "train_heads_s": t_train,
    }
    log.info("zero-shot accuracy on held-out frames: seen wording %.3f, unseen wording %.3f (chance %.3f)",
             stats["zero_shot_accuracy_heldout_seen"], stats["zero_shot_accuracy_heldout_unseen"],
             stats["chance_accuracy"])
    encoder.meta = {"task": cfg.task, "train_config": asdict(cfg), "vocabulary": vocab,
                    "unseen_wordings": {"subjects": wordings.subjects["unseen"],
                                        "templates": wordings.templates["unseen"]},
                    "statistics": stats}
    out = Path(cfg.out) if cfg.out else default_encoder_dir() / f"lit_{cfg.task}"
    path = encoder.save(out)
    log.info("saved %s (+ .json)", path)
    return path, stats
