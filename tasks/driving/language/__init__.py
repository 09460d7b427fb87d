"""Language-conditioned driving: the instruction sets the speed band and the side of the road to keep to."""
