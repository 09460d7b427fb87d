"""algos."""
