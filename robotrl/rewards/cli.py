"""``robotrl rewards <command> key=value ...``.

robotrl rewards train-encoder task=humanoid            # render, caption, train the lit heads (minutes on a CPU)
robotrl rewards train-encoder task=humanoid frames=600 steps=300 out=/tmp/lit_small
robotrl rewards train-encoder task=humanoid text_mix=false            # the earlier training (one paraphrase per pair)
robotrl rewards train-encoder task=driving text_head=residual dim=384  # near-identity text head (keeps MiniLM geometry)
"""

from __future__ import annotations

import json
import logging
import sys

from omegaconf import OmegaConf

from robotrl.monitoring import setup_logging

log = logging.getLogger(__name__)
USAGE = __doc__ or ""


def main(argv: list[str]) -> int:
    """Entry point of ``robotrl rewards``; returns the exit code."""
    if not argv or argv[0] in ("-h", "--help") or argv[0] != "train-encoder":
        sys.stderr.write(USAGE)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    from robotrl.rewards.train import TrainEncoderConfig, train_encoder

    bad = [a for a in argv[1:] if "=" not in a]
    if bad:
        sys.stderr.write(f"arguments must be key=value, got {bad}\n{USAGE}")
        return 2
    schema = OmegaConf.structured(TrainEncoderConfig)
    cfg = OmegaConf.to_object(OmegaConf.merge(schema, OmegaConf.from_dotlist(argv[1:])))
    setup_logging("INFO")
    path, stats = train_encoder(cfg)  # type: ignore[arg-type]
    sys.stdout.write(json.dumps({"artefact": str(path), **{k: v for k, v in stats.items() if k != "classes"}},
                                indent=2) + "\n")
    return 0
