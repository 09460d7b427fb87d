"""Datasets produced from simulation: demonstration collection (``robotrl collect``)."""
