"""Instruction templates for the language-conditioned driving task.

An *intent* is a pace (``slow`` or ``fast``, each a speed band in the config) and a side of
the road (``left`` or ``right``). Every instruction is a template filled with the intent's
words. The *training* templates are the only wordings used to collect demonstrations and to
fine-tune; the *held-out* paraphrases share no template with them and measure whether a
policy understands the request rather than its wording. The instruction list of an env is
every ``(template, intent)`` pair of its split, template-major, so an index is stable across runs.
"""

from __future__ import annotations

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


def intents(paces: tuple[str, ...]) -> list[tuple[int, int]]:
    """All ``(pace index, side index)`` pairs, pace-major: intent ``k`` is ``(k // 2, k % 2)``."""
    return [(p, s) for p in range(len(paces)) for s in range(len(SIDES))]


def instruction_list(paces: tuple[str, ...], split: str) -> tuple[list[str], list[int]]:
    """All instructions of ``split`` and the intent each one asks for.

    Args:
        paces: pace names (keys of ``PACE_WORDS``), in the config's order.
        split: ``train`` or ``heldout`` templates.

    Returns:
        ``(texts, intent)``: ``L`` instruction strings (template-major), and for each the index
        of its ``(pace, side)`` pair in ``intents(paces)``.

    Raises:
        ValueError: unknown split or pace (valid ones listed).

    """
    if split not in TEMPLATE_SPLITS:
        raise ValueError(f"Unknown instruction split {split!r}; valid: {', '.join(TEMPLATE_SPLITS)}.")
    unknown = [p for p in paces if p not in PACE_WORDS]
    if unknown:
        raise ValueError(f"Unknown pace(s) {unknown}; valid: {', '.join(PACE_WORDS)}.")
    texts, target = [], []
    for template in TEMPLATE_SPLITS[split]:
        for k, (p, s) in enumerate(intents(paces)):
            texts.append(template.format(side=SIDES[s], **PACE_WORDS[paces[p]]))
            target.append(k)
    return texts, target
