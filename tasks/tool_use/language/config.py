"""Typed config of the language-conditioned tool-use task (Hydra ``task/tool_use_language_schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robotrl.tasks.base import TaskConfig


def _default_scales() -> dict[str, float]:
    return {"success": 1.0, "wrong_tool": 0.0, "approach": 0.0}


@dataclass
class ToolUseLanguageConfig(TaskConfig):
    """Several procedural tools lie on the table; the instruction names the one to pick up and lift.

    The robot is a position-controlled gripper on three slide joints with a *suction* grasp: a
    grip command within ``grasp_radius`` of a tool's top activates a weld between gripper and
    tool (a MuJoCo equality, per world). This is a deliberate simplification of the task's
    16-joint hand, so that scripted teachers and a CPU-trained VLA can solve it; the
    instruction, the tools and their family shapes are the tool_use task's own.

    Attributes:
        tools: tool families on the table (one instance each, from ``tools.sample_tool``).
        tool_seed: seed of the tool instances.
        instruction_split: ``train`` templates or ``heldout`` paraphrases (never trained on).
        slot_y: nominal y of the table slots (m); every reset permutes which tool lies where.
        slot_x: nominal x of the slots (m).
        slot_jitter: ``[x, y]`` half-widths of uniform placement noise (m).
        yaw_jitter: half-width of the tool yaw noise (rad).
        start_height: gripper tip height at reset (m above the table).
        action_scale: gripper target change per control step at action 1 (m).
        grasp_radius: horizontal distance (m) from the tip to a tool's centre within which a grip attaches.
        grasp_height: vertical distance (m) from the tip to the tool's top within which a grip attaches.
        lift_height: m above its resting height that the named tool must reach, attached, to succeed.
        reward_scales: ``success`` 1 on the success step; ``wrong_tool`` on attaching a tool that is not
            named (the episode ends, a failure); ``approach`` dense decrease of tip distance to the named tool.

    """

    name: str = "tool_use_language"
    frame_skip: int = 10
    episode_length_s: float = 3.0
    reward_scales: dict[str, float] = field(default_factory=_default_scales)
    tools: list[str] = field(default_factory=lambda: ["hammer", "screwdriver", "spatula", "eraser"])
    tool_seed: int = 0
    instruction_split: str = "train"
    slot_y: list[float] = field(default_factory=lambda: [-0.21, -0.07, 0.07, 0.21])
    slot_x: float = 0.55
    slot_jitter: list[float] = field(default_factory=lambda: [0.04, 0.015])
    yaw_jitter: float = 0.3
    start_height: float = 0.18
    action_scale: float = 0.03
    grasp_radius: float = 0.03
    grasp_height: float = 0.03
    lift_height: float = 0.08


CONFIG = ToolUseLanguageConfig
