"""Hydra config groups shipped as ``robotrl.configs`` (found via ``pkg://robotrl.configs``)."""
