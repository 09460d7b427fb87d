"""``robotrl rewards train-encoder task=<task>``: train the ``lit`` projection heads on this project's renders.

1. Render ``frames`` states of the task (lean settings) and caption each from its *measured*
   state (``robotrl.rewards.captions``); a fraction is held out.
2. Run the frozen towers once: EfficientNet-Lite0 features of every frame, MiniLM embeddings
   of every seen caption wording.
3. Train the two heads contrastively: each frame is paired with a random paraphrase of its
   class (by default a random convex mix of the MiniLM embeddings of two of them, ``text_mix``);
   the target of an image row is uniform over the batch captions of its class (a multi-positive
   InfoNCE, both directions). Only seen wordings are ever used.
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
        dim: joint embedding size (``text_head=residual`` needs MiniLM's 384).
        hidden: hidden width of the image head (and of the ``mlp`` text head).
        text_head: ``mlp`` (default): a two-layer MLP; ``residual``: a near-identity linear map of the
            MiniLM embedding, pulled toward the identity by ``text_decay`` (with ``dim=384``).
        text_decay: weight of ``|W|^2`` of the ``residual`` head (its distance from the identity).
        text_mix: mix two paraphrase embeddings of the pair's class, ``l u + (1 - l) v`` with
            ``l ~ U(0, 1)``, renormalized, instead of using one paraphrase (default): the head is trained
            on the span between seen wordings, not only on the wordings themselves. ``text_mix=false``
            is the earlier training.
        text_dropout: add ``text_dropout_copies`` variants of every seen wording with each word dropped
            with this probability (``word_dropout``): only seen words, never a held-out one. Measured
            to hurt unseen wording (``benchmarks/vlm_rewards.py text_heads``), so off by default.
        text_dropout_copies: variants per seen wording when ``text_dropout > 0``.
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
    text_head: str = "mlp"
    text_decay: float = 1e-2
    text_mix: bool = True
    text_dropout: float = 0.0
    text_dropout_copies: int = 2
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


def _pick(lo: torch.Tensor, hi: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One uniform index in ``[lo_i, hi_i)`` per row."""
    return lo + (torch.rand(len(lo), generator=gen) * (hi - lo)).long()


def fit_heads(cfg: TrainEncoderConfig, feats: torch.Tensor, labels: torch.Tensor, train: torch.Tensor,
              text_feats: torch.Tensor, offsets: np.ndarray) -> tuple[LitHeads, list[float]]:
    """Train fresh heads (``cfg.dim``, ``cfg.hidden``, ``cfg.text_head``) for ``cfg.steps`` steps.

    Args:
        cfg: training settings; ``seed`` seeds the head init and the batches.
        feats: ``(N, 1280)`` image-tower features of every frame.
        labels: ``(N,)`` class of every frame.
        train: indices of the frames to train on.
        text_feats: ``(V, 384)`` MiniLM embeddings of the seen vocabulary, grouped by class.
        offsets: ``(C + 1,)``: class ``c``'s wordings are rows ``offsets[c]:offsets[c + 1]``.

    Returns:
        The heads (eval mode) and the loss of every step.

    """
    torch.manual_seed(cfg.seed)
    heads = LitHeads(cfg.dim, cfg.hidden, text_head=cfg.text_head)
    opt = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(cfg.seed)
    losses = []
    for step in range(cfg.steps):
        idx = train[torch.randint(len(train), (cfg.batch_size,), generator=gen)]
        lab = labels[idx]
        lo, hi = torch.as_tensor(offsets[lab.numpy()]), torch.as_tensor(offsets[lab.numpy() + 1])
        text = text_feats[_pick(lo, hi, gen)]
        if cfg.text_mix:
            lam = torch.rand(cfg.batch_size, 1, generator=gen)
            text = torch.nn.functional.normalize(lam * text + (1 - lam) * text_feats[_pick(lo, hi, gen)], dim=-1)
        loss = multi_positive_nce(heads.embed_image(feats[idx]), heads.embed_text(text), lab,
                                  heads.logit_scale.exp().clamp(max=100.0))
        total = loss + cfg.text_decay * heads.text_deviation()
        opt.zero_grad(set_to_none=True)
        total.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if step % 250 == 0 or step == cfg.steps - 1:
            log.info("step %d/%d: loss %.3f", step + 1, cfg.steps, float(np.mean(losses[-50:])))
    return heads.eval(), losses


def word_dropout(pool: list[str], p: float, copies: int, rng: np.random.Generator) -> list[str]:
    """``pool`` followed by ``copies`` variants of each sentence, each word dropped with probability ``p``.

    A variant keeps at least one word; duplicates (and variants equal to a sentence of ``pool``) are removed.
    """
    out = list(pool)
    for sentence in pool:
        words = sentence.split()
        for _ in range(copies):
            keep = rng.random(len(words)) >= p
            if not keep.any():
                keep[int(rng.integers(len(words)))] = True
            out.append(" ".join(w for w, k in zip(words, keep, strict=True) if k))
    return list(dict.fromkeys(out))


def text_vocabulary(cfg: TrainEncoderConfig, towers: FrozenTowers) -> tuple[list[str], torch.Tensor, np.ndarray]:
    """Seen wordings of every class, their MiniLM embeddings ``(V, 384)`` and the class offsets ``(C + 1,)``.

    With ``cfg.text_dropout > 0`` each class's pool also holds its word-dropout variants.
    """
    wordings = cap.WORDINGS[cfg.task]
    rng = np.random.default_rng(cfg.seed + 1)
    pools = [all_wordings(k, "seen", wordings) for k in cap.CLASSES[cfg.task]]
    if cfg.text_dropout > 0:
        pools = [word_dropout(pool, cfg.text_dropout, cfg.text_dropout_copies, rng) for pool in pools]
    vocab = [s for pool in pools for s in pool]
    return vocab, towers.text_features(vocab), np.cumsum([0] + [len(p) for p in pools])


@dataclass
class EncoderData:
    """Everything the heads train on: image features, labels, the split and the seen vocabulary.

    Attributes:
        feats: ``(N, 1280)`` image-tower features.
        labels: ``(N,)`` class of every frame.
        train: indices of the training frames.
        held: indices of the held-out frames.
        vocab: every seen wording (and word-dropout variant), grouped by class.
        text_feats: ``(V, 384)`` MiniLM embeddings of ``vocab``.
        offsets: ``(C + 1,)``: class ``c``'s wordings are ``vocab[offsets[c]:offsets[c + 1]]``.
        timings: ``render_s`` and ``image_tower_s``.

    """

    feats: torch.Tensor
    labels: torch.Tensor
    train: torch.Tensor
    held: torch.Tensor
    vocab: list[str]
    text_feats: torch.Tensor
    offsets: np.ndarray
    timings: dict[str, float]


def encoder_data(cfg: TrainEncoderConfig, towers: FrozenTowers) -> EncoderData:
    """Render and caption ``cfg.frames`` states (seeded by ``cfg.seed``), run the frozen towers once, split."""
    if cfg.task not in cap.SOURCES:
        raise KeyError(f"No caption source for task {cfg.task!r}. Tasks with one: {', '.join(cap.SOURCES)}.")
    rng = np.random.default_rng(cfg.seed)
    classes = cap.CLASSES[cfg.task]
    t0 = time.perf_counter()
    frames, keys = cap.SOURCES[cfg.task](cfg.frames, rng, (cfg.image_size, cfg.image_size))
    t_render = time.perf_counter() - t0
    log.info("rendered %d %s frames in %.1f s", len(frames), cfg.task, t_render)
    labels = torch.tensor([classes.index(k) for k in keys])
    t0 = time.perf_counter()
    feats = towers.image_features(frames)
    t_feat = time.perf_counter() - t0
    log.info("image tower: %d frames in %.1f s (%.0f frames/s)", len(frames), t_feat, len(frames) / t_feat)
    perm = torch.from_numpy(rng.permutation(len(frames)))
    n_held = int(round(cfg.heldout * len(frames)))
    vocab, text_feats, offsets = text_vocabulary(cfg, towers)
    return EncoderData(feats, labels, perm[n_held:], perm[:n_held], vocab, text_feats, offsets,
                       {"render_s": t_render, "image_tower_s": t_feat})


def train_encoder(cfg: TrainEncoderConfig) -> tuple[Path, dict[str, Any]]:
    """Render, caption, train the heads and save the artefact; returns its path and statistics."""
    torch.set_num_threads(cfg.threads)
    classes, wordings = cap.CLASSES[cfg.task], cap.WORDINGS[cfg.task]
    towers = FrozenTowers(cfg.image_size)
    data = encoder_data(cfg, towers)
    feats, labels, train, held, vocab = data.feats, data.labels, data.train, data.held, data.vocab
    n_held = len(held)
    t0 = time.perf_counter()
    heads, losses = fit_heads(cfg, feats, labels, train, data.text_feats, data.offsets)
    t_train = time.perf_counter() - t0
    encoder = LitEncoder(heads, towers)
    with torch.no_grad():
        emb = heads.embed_image(feats)
    stats = {
        "frames": len(labels), "heldout_frames": n_held, "classes": [list(k) for k in classes],
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
        **data.timings, "train_heads_s": t_train,
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
