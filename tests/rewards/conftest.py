"""Declare torchvision's op schemas before any test here imports timm, open_clip or transformers."""

import importlib.util

if importlib.util.find_spec("torchvision") is not None:
    from robotrl.rewards.torchvision_compat import prepare_torchvision

    prepare_torchvision()
