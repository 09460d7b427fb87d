"""The one place that makes ``torchvision`` importable beside a CPU torch whose CUDA twin it was built for.

The only torchvision wheel reachable here (0.28.0+cu130) ships a ``_C.so`` compiled against
CUDA. Beside torch 2.13.0+cpu that library does not load; torchvision then imports its
``_meta_registrations``, which register fake kernels for ``torchvision::nms`` and
``torchvision::qnms``, and those fail with ``operator torchvision::nms does not exist``.
Anything that imports torchvision (``timm``, ``open_clip``, ``transformers.CLIPModel``)
fails with it.

``prepare_torchvision()`` first tries to load torchvision's compiled ops the way
torchvision itself does. Only when that fails does it *declare* the two operator schemas
with ``torch.library`` so the registrations succeed. Transforms and model builders then
work; the compiled ops (``nms``, ``roi_align``, ...) stay unavailable and raise when called.
Call it before the first ``import torchvision`` (``robotrl.rewards.encoders`` does).
"""

from __future__ import annotations

import importlib.util
import logging
import os

import torch

log = logging.getLogger(__name__)

# Kept alive for the process: a ``torch.library.Library`` deregisters its definitions when collected.
_LIBRARY: torch.library.Library | None = None
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
STATE = {"compiled_ops": False, "declared_schemas": False}


def _compiled_ops_path() -> str | None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise ImportError(
            "torchvision is not installed; the VLM reward encoders need it: pip install 'robotrl[vlm]'"
        )
    path = os.path.join(os.path.dirname(spec.origin), "_C.so")
    return path if os.path.exists(path) else None


def prepare_torchvision() -> dict[str, bool]:
    """Make ``import torchvision`` work; idempotent. Returns what was done.

    Returns:
        ``{"compiled_ops": bool, "declared_schemas": bool}``: whether torchvision's compiled
        ops loaded, and whether the ``nms``/``qnms`` schemas had to be declared instead.

    Raises:
        ImportError: torchvision is not installed (names the ``vlm`` extra).

    """
    global _LIBRARY
    if STATE["compiled_ops"] or STATE["declared_schemas"]:
        return dict(STATE)
    if hasattr(torch.ops.torchvision, "nms"):
        STATE["compiled_ops"] = True
        return dict(STATE)
    path = _compiled_ops_path()
    if path is not None:
        try:
            torch.ops.load_library(path)
        except OSError as err:
            log.info("torchvision's compiled ops do not load beside torch %s (%s); declaring the nms/qnms "
                     "schemas so transforms and model builders work", torch.__version__, str(err)[:120])
    if hasattr(torch.ops.torchvision, "nms"):
        STATE["compiled_ops"] = True
        return dict(STATE)
    _LIBRARY = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _LIBRARY.define(schema)
    STATE["declared_schemas"] = True
    return dict(STATE)
