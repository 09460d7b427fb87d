"""Instruction templates for the language-conditioned tool-use task.

Each instruction is a template filled with a tool name. The *training* templates are the
only wordings used to collect demonstrations and fine-tune; the *held-out* paraphrases are
never used in training and measure whether the policy understands the request rather than
memorizing its wording. The instruction list of an env is every ``(template, tool)`` pair of
its split, in a fixed order, so an instruction index is stable across runs.
"""

from __future__ import annotations

TRAIN_TEMPLATES: tuple[str, ...] = (
    "pick up the {tool}",
    "lift the {tool}",
    "grab the {tool} and lift it",
    "raise the {tool} off the table",
    "take the {tool}",
)
HELDOUT_TEMPLATES: tuple[str, ...] = (
    "could you hoist the {tool} into the air",
    "i need the {tool} up high",
    "get hold of the {tool} and bring it upward",
)
TEMPLATE_SPLITS: dict[str, tuple[str, ...]] = {"train": TRAIN_TEMPLATES, "heldout": HELDOUT_TEMPLATES}


def instruction_list(tools: tuple[str, ...], split: str) -> tuple[list[str], list[int]]:
    """All instructions of ``split`` and the tool each one names.

    Args:
        tools: tool names on the table, in slot-body order (``tool0``, ``tool1``, ...).
        split: ``train`` or ``heldout`` templates.

    Returns:
        ``(texts, tool_index)``: ``L`` instruction strings (template-major), and for each the
        index into ``tools`` of the tool it names.

    Raises:
        ValueError: unknown split (valid ones listed).

    """
    if split not in TEMPLATE_SPLITS:
        raise ValueError(f"Unknown instruction split {split!r}; valid: {', '.join(TEMPLATE_SPLITS)}.")
    texts, target = [], []
    for template in TEMPLATE_SPLITS[split]:
        for k, tool in enumerate(tools):
            texts.append(template.format(tool=tool))
            target.append(k)
    return texts, target
