"""Velocity-tracking humanoid locomotion task."""
