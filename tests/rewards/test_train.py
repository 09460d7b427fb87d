"""The lit heads' training: the near-identity text head, its pull toward the identity, seen-only wordings."""

import re

import numpy as np
import pytest
import torch

from robotrl.rewards import captions as cap
from robotrl.rewards.encoders import LitHeads
from robotrl.rewards.train import TrainEncoderConfig, all_wordings, fit_heads


def _unit(n, d, seed):
    return torch.nn.functional.normalize(torch.randn(n, d, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_residual_text_head_at_init_keeps_every_cosine_similarity():
    t = _unit(20, 384, 0)
    emb = LitHeads(dim=384, text_head="residual").embed_text(t)
    torch.testing.assert_close(emb @ emb.T, t @ t.T, atol=1e-6, rtol=0)
    # the earlier MLP head scrambles them: the check above can fail
    torch.manual_seed(0)
    mlp = LitHeads(dim=128, text_head="mlp").embed_text(t)
    assert (mlp @ mlp.T - t @ t.T).abs().max() > 0.1


def test_residual_text_head_needs_minilm_width_and_names_the_valid_heads():
    with pytest.raises(ValueError, match="dim must be 384"):
        LitHeads(dim=128, text_head="residual")
    with pytest.raises(ValueError, match="mlp, residual"):
        LitHeads(text_head="transformer")


def _toy_data(classes=3, per_class=4, frames=60):
    """Image features that carry the class, and a seen vocabulary of ``per_class`` embeddings per class."""
    gen = torch.Generator().manual_seed(1)
    labels = torch.arange(frames) % classes
    centres = torch.randn(classes, 1280, generator=gen)
    feats = centres[labels] + 0.5 * torch.randn(frames, 1280, generator=gen)
    text = _unit(classes * per_class, 384, 2)
    offsets = np.arange(0, classes * per_class + 1, per_class)
    return feats, labels, torch.arange(frames), text, offsets


@pytest.mark.parametrize("mix", [False, True])
def test_text_decay_pulls_the_residual_head_toward_the_identity(mix):
    feats, labels, train, text, offsets = _toy_data()
    dev = {}
    for decay in (0.0, 1.0):
        cfg = TrainEncoderConfig(steps=40, batch_size=32, text_head="residual", dim=384, text_decay=decay,
                                 text_mix=mix)
        heads, losses = fit_heads(cfg, feats, labels, train, text, offsets)
        assert np.isfinite(losses).all() and losses[-1] < losses[0]
        dev[decay] = heads.text_deviation().item()
    assert 0.0 < dev[1.0] < 0.5 * dev[0.0]


def test_fit_heads_is_deterministic_given_the_seed():
    feats, labels, train, text, offsets = _toy_data()
    cfg = TrainEncoderConfig(steps=5, batch_size=16)  # the default: mlp head, mixed paraphrases
    a, _ = fit_heads(cfg, feats, labels, train, text, offsets)
    b, _ = fit_heads(cfg, feats, labels, train, text, offsets)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, msg=name)


@pytest.mark.parametrize("task", ["humanoid", "driving"])
def test_training_vocabulary_holds_no_held_out_wording(task):
    # what fit_heads mixes is drawn from these pools only: no unseen subject, template or phrase leaks in
    w = cap.WORDINGS[task]
    seen = [s for k in cap.CLASSES[task] for s in all_wordings(k, "seen", w)]
    unseen_parts = [*w.subjects["unseen"], *(ph for v in w.phrases.values() for ph in v["unseen"])]
    assert not [(s, u) for s in seen for u in unseen_parts if u in s]
    fixed = [c.strip(" ,;:") for t in w.templates["unseen"] for c in re.split(r"\{[spa]\}", t)]
    fixed = [c for c in fixed if len(c) > 3]  # "here", "a picture showing", "seen from behind", ...
    assert len(fixed) >= 2 and not [(s, f) for s in seen for f in fixed if f in s]


def test_word_dropout_only_drops_words_of_the_seen_sentence():
    from robotrl.rewards.train import word_dropout

    pool = ["a robot kneeling on the ground", "the humanoid with both arms up"]
    out = word_dropout(pool, 0.3, 5, np.random.default_rng(0))
    assert out[:2] == pool and len(out) == len(set(out)) > 2
    for variant in out[2:]:
        # a sub-sequence of one seen sentence: no word that sentence does not have, in its order
        assert any(_subsequence(variant.split(), s.split()) for s in pool), variant
    assert word_dropout(pool, 0.0, 3, np.random.default_rng(0)) == pool


def _subsequence(words, sentence):
    it = iter(sentence)
    return all(w in it for w in words)
