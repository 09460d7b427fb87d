"""Authored assets shipped as ``robotrl.assets`` (see README.md)."""
