"""Batched environments: the VecEnv contract, the generic task env and library adapters."""
