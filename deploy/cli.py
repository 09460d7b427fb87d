"""Console front end of the deploy scripts: ``--help``, argument errors, logging, signals.

Used by ``robotrl-deploy``, ``robotrl-sim-robot`` and ``robotrl-object-pose``. The CLI layer of
``robotrl.deploy``: the only deploy module that writes to the terminal directly; the rest logs.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from robotrl.deploy.params import RosArgs, check_known, parse_args


def console_front(
    argv: list[str], doc: str, node_name: str, defaults: dict[str, Any], program: str,
    required: dict[str, str] | None = None,
) -> tuple[RosArgs, dict[str, Any]] | int:
    """Shared front end of the console scripts: ``--help``, the ROS tail, known and required keys, logging.

    ``required`` maps each parameter the script cannot run without to what it takes; their files
    must exist when the value looks like a path (ends in ``.json``, ``.yaml`` or ``.onnx``).

    Returns:
        ``(args, params)`` to run with, or an exit code (0 after ``--help``, 2 on bad arguments).

    """
    if "-h" in argv or "--help" in argv:
        print(doc)
        return 0
    try:
        args = parse_args(argv, node_name)
        params = check_known(args.params, defaults, program)
        check_required(params, required or {}, program)
    except ValueError as exc:
        message = str(exc) if str(exc).startswith(program) else f"{program}: {exc}"
        print(message, file=sys.stderr)
        return 2
    logging.basicConfig(level=str(params["log_level"]).upper(), format="[%(name)s] %(levelname)s %(message)s")
    return args, params


def check_required(params: dict[str, Any], required: dict[str, str], program: str) -> None:
    """A ``ValueError`` naming every missing ``required`` parameter, or a file one of them names that is absent."""
    from pathlib import Path

    missing = [f"{k}:=<{what}>" for k, what in required.items() if not params.get(k)]
    if missing:
        raise ValueError(f"{program} needs {' and '.join(missing)}.")
    for key in required:
        value = str(params[key])
        if value.endswith((".json", ".yaml", ".yml", ".onnx")) and not Path(value).is_file():
            raise ValueError(f"{program}: {key}:={value}: no such file.")


class StopSignals:
    """SIGINT/SIGTERM handling for a console script, from before its node exists.

    A signal that arrives while the node is still being built (transport, subscriptions) is
    remembered instead of raising ``KeyboardInterrupt`` half-way through set-up; ``attach`` then
    hands it, and every later signal, to the node's ``request_stop`` so the node still shuts down
    the normal way (safe command, final status). The rclpy transport initializes rclpy without its
    own signal handlers for the same reason.
    """

    def __init__(self) -> None:
        import signal

        self.pending: int | None = None
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._remember)

    def _remember(self, signum: int, _frame: Any = None) -> None:
        self.pending = signum

    def attach(self, request_stop: Any) -> None:
        """Route SIGINT/SIGTERM to ``request_stop(signum, frame)``; replay one that came during set-up."""
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, request_stop)
        if self.pending is not None:
            request_stop(self.pending, None)
