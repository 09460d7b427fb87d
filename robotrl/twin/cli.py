"""``robotrl twin <report|calibrate>``: key=value arguments.

robotrl twin report bags=<dir> task=humanoid [robot=<profile>] [physics=<yaml>] [out=twin_report]
open-loop replay of every bag under the nominal (and, if given, the calibrated) physics;
writes report.json and overlay PNGs.
robotrl twin calibrate bags=<dir> task=humanoid [robot=<profile>] [params=body_mass,dof_damping,actuator_gain]
[delays=0,1,2] [out=twin_calibration]
mujoco.sysid fit; writes <out>/physics.yaml and sysid's results (confidence intervals).
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger(__name__)


def _args(argv: list[str]) -> dict[str, str]:
    out = {}
    for a in argv:
        if "=" not in a:
            raise SystemExit(f"robotrl twin: expected key=value, got {a!r}.\n{__doc__}")
        k, v = a.split("=", 1)
        out[k] = v
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``robotrl twin``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("report", "calibrate"):
        sys.stderr.write(__doc__ or "")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cmd, args = argv[0], _args(argv[1:])
    from robotrl.twin.episode import load_episodes
    from robotrl.twin.physics import Physics, load_physics
    from robotrl.twin.replay import Twin

    episodes = load_episodes(args["bags"], args.get("robot") or None)
    task = args.get("task") or episodes[0].task
    if cmd == "report":
        from robotrl.twin.report import write_report

        candidates = {"nominal": Physics()}
        if args.get("physics"):
            candidates["calibrated"] = load_physics(args["physics"])
        rolls = {}
        for name, phys in candidates.items():
            rolls[name] = Twin(task, episodes, [phys]).open_loop()
        report, pngs = write_report(args.get("out", "twin_report"), episodes, rolls)
        log.info("wrote %s and %d overlays", report, len(pngs))
        return 0
    from pathlib import Path

    from robotrl.twin.calibrate import DEFAULT_PARAMS, calibrate

    out = Path(args.get("out", "twin_calibration"))
    params = tuple(args["params"].split(",")) if args.get("params") else DEFAULT_PARAMS
    delays = tuple(int(d) for d in args.get("delays", "0").split(","))
    result = calibrate(task, episodes, params=params, delays=delays, out_dir=out)
    log.info("calibrated physics: %s -> %s", result.physics, result.save(out / "physics.yaml"))
    return 0
