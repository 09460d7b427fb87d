"""Batched simulation backends: the only place that decides devices and backends."""

from robotrl.sim.backend import BACKENDS, BatchSim, SimConfig, default_device, make_sim

__all__ = ["BACKENDS", "BatchSim", "SimConfig", "default_device", "make_sim"]
