"""``robotrl export checkpoint=<run dir|ckpt> [out=<dir>] [tol=1e-5]``: ONNX + JSON spec."""

from __future__ import annotations

import logging

USAGE = "usage: robotrl export checkpoint=<run dir or ckpt_*.safetensors> [out=<dir>] [tol=1e-5]"


def parse_kv(argv: list[str], allowed: set[str]) -> dict[str, str]:
    """Parse ``key=value`` arguments; raise ``ValueError`` naming a bad or unknown one."""
    out = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in allowed:
            raise ValueError(f"bad argument {arg!r}; expected one of {sorted(allowed)} as key=value")
        out[key] = value
    return out


def main(argv: list[str]) -> int:
    """Export a checkpoint; print the written paths. Returns the exit status."""
    try:
        args = parse_kv(argv, {"checkpoint", "out", "tol"})
    except ValueError as exc:
        print(f"{exc}\n{USAGE}")  # noqa: T201
        return 2
    if "checkpoint" not in args:
        print(USAGE)  # noqa: T201
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from robotrl.export.onnx import PARITY_TOL, export_policy

    onnx_path, spec_path = export_policy(args["checkpoint"], args.get("out"), float(args.get("tol", PARITY_TOL)))
    print(f"onnx: {onnx_path}\nspec: {spec_path}\nnext: robotrl-deploy policy:={spec_path} robot:=<profile>")  # noqa: T201
    return 0
