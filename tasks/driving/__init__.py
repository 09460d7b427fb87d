"""Driving: an Ackermann RC car on procedural closed tracks, with CaRL-style rewards."""
