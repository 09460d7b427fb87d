"""Tasks, one folder each. Shipped as ``robotrl.tasks``.

The registry maps a task name to the module that defines it; modules import lazily, so
``robotrl train task=humanoid`` never imports the driving task's dependencies.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from robotrl.tasks.base import Task, TaskConfig

_REGISTRY: dict[str, str] = {
    "humanoid": "robotrl.tasks.humanoid",
    "tool_use": "robotrl.tasks.tool_use",
    "driving": "robotrl.tasks.driving",
    "tool_use_language": "robotrl.tasks.tool_use.language",
    "driving_language": "robotrl.tasks.driving.language",
}


def available() -> list[str]:
    """Names of the tasks that can be built here (their module imports)."""
    names = []
    for name, module in _REGISTRY.items():
        if importlib.util.find_spec(module) is None:
            continue
        if all(importlib.util.find_spec(f"{module}.{part}") is not None for part in ("config", "task")):
            names.append(name)
    return sorted(names)


def task_class(name: str) -> type[Task]:
    """The Task subclass registered as ``name``.

    Raises:
        KeyError: with the list of valid task names.

    """
    if name not in _REGISTRY or name not in available():
        raise KeyError(f"Unknown task {name!r}. Valid tasks: {', '.join(available())}.")
    return importlib.import_module(_REGISTRY[name] + ".task").TASK


def robot_io(name: str) -> Any:
    """The deploy hook module of task ``name`` (``<task module>.robot_io``), or None if it has none.

    ``robotrl export``, ``robotrl-sim-robot`` and the twin recorder read a task's observation
    terms, sim inputs and scan/route from it.

    Raises:
        KeyError: ``name`` is not a registered task (with the list of valid names).

    """
    if name not in _REGISTRY:
        raise KeyError(f"Unknown task {name!r}. Valid tasks: {', '.join(available())}.")
    module = f"{_REGISTRY[name]}.robot_io"
    return importlib.import_module(module) if importlib.util.find_spec(module) is not None else None


def config_class(name: str) -> type[TaskConfig]:
    """The typed config dataclass of task ``name`` (``tasks/<name>/config.py``)."""
    if name not in _REGISTRY or name not in available():
        raise KeyError(f"Unknown task {name!r}. Valid tasks: {', '.join(available())}.")
    return importlib.import_module(_REGISTRY[name] + ".config").CONFIG


def task_config_from_meta(meta: dict[str, Any], **overrides: Any) -> TaskConfig:
    """Rebuild the typed task config stored in a checkpoint's metadata, with ``overrides`` applied.

    Raises:
        KeyError: an override names a field the task's config does not have (valid fields listed).
        omegaconf.errors.ValidationError: an override has the wrong type for its field.

    """
    from omegaconf import OmegaConf

    name = meta["task"]["name"]
    schema = config_class(name)
    known = set(getattr(schema, "__dataclass_fields__", {}))
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise KeyError(f"Task {name!r} has no config field(s) {unknown}. Valid fields: {', '.join(sorted(known))}.")
    base = OmegaConf.structured(schema(**meta["task"]["config"]))
    return OmegaConf.to_object(OmegaConf.merge(base, overrides))  # type-checked against the schema


__all__ = ["Task", "TaskConfig", "available", "config_class", "robot_io", "task_class", "task_config_from_meta"]
