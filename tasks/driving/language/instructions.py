"""Instruction templates for the language-conditioned driving task.

An *intent* is a pace (``slow`` or ``fast``, each a speed band in the config) and a side of
the road (``left`` or ``right``). Every instruction is a template filled with the intent's
words. The *training* templates are the only wordings used to collect demonstrations and to
fine-tune; the *held-out* paraphrases share no template with them and measure whether a
policy understands the request rather than its wording. The instruction list of an env is
every ``(template, intent)`` pair of its split, template-major, so an index is stable across runs.
"""

from __future__ import annotations

PACES: tuple[str, ...] = ("slow", "fast")
"""Paces, in intent order (their speed bands are config fields ``slow_band`` and ``fast_band``)."""
SIDES: tuple[str, ...] = ("left", "right")
"""Sides of the road, in intent order; ``left`` is the positive lateral offset."""
PACE_WORDS: dict[str, dict[str, str]] = {
    "slow": {"adv": "slowly", "adj": "slow"},
    "fast": {"adv": "fast", "adj": "fast"},
}
"""Words of each pace: an adverb (``drive slowly``) and an adjective (``at a slow pace``)."""

TRAIN_TEMPLATES: tuple[str, ...] = (
    "drive {adv} on the {side} side of the road",
    "keep to the {side} edge and drive {adv}",
    "go {adv} and stay {side}",
    "stay in the {side} half of the road, driving {adv}",
    "drive at a {adj} speed along the {side} edge",
)
HELDOUT_TEMPLATES: tuple[str, ...] = (
    "could you cruise {adv} close to the {side} kerb",
    "i want you on the {side} of the lane, moving at a {adj} pace",
    "hug the {side} border of the track and keep it {adj}",
)
TEMPLATE_SPLITS: dict[str, tuple[str, ...]] = {"train": TRAIN_TEMPLATES, "heldout": HELDOUT_TEMPLATES}


INTENTS: tuple[tuple[str, str], ...] = tuple((p, s) for p in PACES for s in SIDES)
"""All ``(pace, side)`` pairs, pace-major: intent ``k`` is pace ``k // 2`` and side ``k % 2``."""


def instruction_list(split: str) -> tuple[list[str], list[int]]:
    """All instructions of ``split`` and the intent each one asks for.

    Args:
        split: ``train`` or ``heldout`` templates.

    Returns:
        ``(texts, intent)``: ``L`` instruction strings (template-major), and for each the index
        of its ``(pace, side)`` pair in ``INTENTS``.

    Raises:
        ValueError: unknown split (valid ones listed).

    """
    if split not in TEMPLATE_SPLITS:
        raise ValueError(f"Unknown instruction split {split!r}; valid: {', '.join(TEMPLATE_SPLITS)}.")
    texts, target = [], []
    for template in TEMPLATE_SPLITS[split]:
        for k, (pace, side) in enumerate(INTENTS):
            texts.append(template.format(side=side, **PACE_WORDS[pace]))
            target.append(k)
    return texts, target
