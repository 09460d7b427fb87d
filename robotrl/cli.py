"""``robotrl`` command line: Hydra apps per subcommand.

robotrl train task=tool_use                 # train (Hydra overrides: algo=, sim=, policy=, key=value)
robotrl train task=humanoid --cfg job       # print the composed config
robotrl eval checkpoint=runs/humanoid/...   # metrics JSON, MP4 and learning-curve PNG
robotrl export checkpoint=...               # ONNX + JSON spec for robotrl-deploy
robotrl tools preview                       # contact sheet of procedural tools
robotrl rewards train-encoder task=humanoid # train the lit image-text encoder's heads on our renders
robotrl batch eval checkpoint=... workers=2  # one job over many scenarios, in-process or on Ray
robotrl warp-compile task=tool_use_gpu      # MuJoCo Warp's CUDA kernels into Warp's cache, on a CPU node
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import cast

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from robotrl.config import TrainConfig, register_configs
from robotrl.monitoring import setup_logging

log = logging.getLogger("robotrl.cli")

CONFIG_PATH = "pkg://robotrl.configs"
USAGE = __doc__ or ""

# subcommand -> "module:function" taking argv (plain, non-Hydra subcommands)
_PLAIN: dict[str, str] = {
    "export": "robotrl.export.cli:main",
    "collect": "robotrl.cli:collect_main",
    "rewards": "robotrl.rewards.cli:main",
    "batch": "robotrl.cluster.cli:main",
    "twin": "robotrl.twin.cli:main",
    "warp-compile": "robotrl.cli:warp_compile_main",
}


def collect_main(argv: list[str]) -> int:
    """Entry point of ``robotrl collect`` (usage: the docstring of ``robotrl.data.collect``)."""
    import torch

    from robotrl.data import collect as C
    from robotrl.storage.demos import write_demos

    setup_logging("INFO")
    if not argv or argv[0] in ("-h", "--help"):
        print(C.__doc__)
        return 0
    try:
        opts, overrides = C.parse_args(argv)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    torch.manual_seed(opts["seed"])
    env, env_args = C.build_env(opts["task"], opts["num_envs"], opts["seed"], overrides, opts["image_size"])
    teacher = C._teacher(env, opts["teacher"])
    extra: tuple[str, ...] = ("image", "instruction") if opts["image_size"] > 0 else ()
    if extra and not getattr(env, "instructions", None):
        extra = ("image",)
    episodes = C.collect(env, teacher, opts["episodes"], opts["noise"], opts["success_only"], opts["seed"],
                         extra_obs=extra)
    env_args |= {"teacher": opts["teacher"], "noise": opts["noise"]}
    write_demos(opts["out"], episodes, env_args)
    rate = sum(ep["success"] for ep in episodes) / len(episodes)
    steps = sum(ep["actions"].shape[0] for ep in episodes)
    print(f"wrote {len(episodes)} demos ({steps} steps, success {rate:.2f}) to {opts['out']}")
    return 0


def warp_compile_main(argv: list[str]) -> int:
    """Entry point of ``robotrl warp-compile`` (usage: the docstring of ``robotrl.runners.warp_compile``)."""
    from robotrl.runners.warp_compile import parse_args, warp_compile

    setup_logging("INFO")
    args, overrides = parse_args(argv)
    summary = warp_compile(overrides, args.arch, args.steps, args.worlds, args.cache_dir, args.seed)
    print(json.dumps(summary, indent=2))
    return 0


def _user_errors() -> tuple[type[Exception], ...]:
    """Errors of the plain subcommands that report bad input (a missing file or bag, an unknown config key)."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    from robotrl.twin.episode import BagError  # core imports only (numpy, yaml): no extra needed

    # ImportError: an optional extra is missing; robotrl's own messages name it (pip install 'robotrl[gpu]')
    return (FileNotFoundError, ImportError, ConfigKeyError, ConfigAttributeError, ValidationError, BagError)


_RUN_STAMP: list[str] = []  # under torchrun: rank 0's time stamp, so that every rank uses one run dir


def _run_dir(run_dir: str, task: str) -> str:
    stamp = _RUN_STAMP[0] if _RUN_STAMP else f"{datetime.now():%Y-%m-%d_%H-%M-%S}"
    return run_dir or f"runs/{task}/{stamp}"


def _torchrun_args(argv: list[str]) -> list[str]:
    """Under ``torchrun``: join the process group, share rank 0's run-dir stamp; only rank 0 writes Hydra files."""
    from robotrl.cluster import ddp

    info = ddp.from_env()
    if info is None:
        return argv
    if "-m" in argv or "--multirun" in argv:
        raise SystemExit("robotrl train under torchrun runs one job; drop -m/--multirun")
    ddp.init(info)
    _RUN_STAMP.append(ddp.broadcast_object(f"{datetime.now():%Y-%m-%d_%H-%M-%S}"))
    return argv if info.is_main else [*argv, "hydra.output_subdir=null", "hydra/job_logging=disabled"]


def _leave_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _register_resolvers() -> None:
    if not OmegaConf.has_resolver("robotrl.run_dir"):
        OmegaConf.register_new_resolver("robotrl.run_dir", _run_dir, use_cache=True)


def _train(cfg: DictConfig) -> None:
    from robotrl.cluster.ddp import from_env
    from robotrl.runners import make_runner

    dist_info = from_env()
    setup_logging(cfg.log_level if dist_info is None or dist_info.is_main else "WARNING")
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    typed = cast(TrainConfig, OmegaConf.to_object(cfg))  # the train_schema root (to_object returns a wide union)
    run_dir = HydraConfig.get().runtime.output_dir
    runner = make_runner(typed, run_dir, config_yaml=config_yaml)
    last = runner.learn()
    if not runner.is_main:
        return
    summary = {k: round(v, 4) if isinstance(v, float) else v for k, v in last.items()
               if k.startswith(("episode/", "perf/steps", "iteration", "time_s"))}
    print(f"run dir: {run_dir}\n{json.dumps(summary, indent=2)}")
    if typed.eval_at_end:
        from robotrl.config import EvalConfig
        from robotrl.runners.evaluate import evaluate

        result = evaluate(EvalConfig(checkpoint=run_dir, sim=typed.sim, num_envs=8, episodes=8, video_steps=200))
        shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()
                 if k in ("return", "length", "success", "video", "learning_curve")}
        print(f"eval (8 episodes, deterministic):\n{json.dumps(shown, indent=2)}")
    print(f"next: robotrl eval checkpoint={run_dir}")


def _eval(cfg: DictConfig) -> None:
    from robotrl.runners.evaluate import evaluate

    setup_logging("INFO")
    result = evaluate(OmegaConf.to_object(cfg))
    print(json.dumps(result, indent=2))


def _eval_task_override(arg: str) -> str:
    """``task.<field>=<value>`` adds a key to eval's open ``task`` dict (Hydra spells that ``+task...``).

    The checkpoint's own task config is the base; ``task_config_from_meta`` then rejects
    unknown fields and wrong types against the task's schema.
    """
    return f"+{arg}" if arg.startswith("task.") and "=" in arg else arg


def _hydra_app(fn: Callable[[DictConfig], None], config_name: str, argv: list[str]) -> int:
    register_configs()
    _register_resolvers()
    app = hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name=config_name)(fn)
    saved = sys.argv
    sys.argv = [f"robotrl {config_name}", *argv]
    try:
        app()
    finally:
        sys.argv = saved
    return 0


def _tools(argv: list[str]) -> int:
    if not argv or argv[0] != "preview":
        print("usage: robotrl tools preview [--seed N] [--n N] [--out FILE]", file=sys.stderr)
        return 2
    return importlib.import_module("robotrl.tasks.tool_use.preview").main(argv[1:])


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``robotrl`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "train":
        if "+launcher=ray" in rest and not any(a.startswith("hydra.launcher.ray.init.address=") for a in rest):
            from robotrl.cluster.batch import ray_loopback_only

            ray_loopback_only()  # the preset's local Ray instance: 127.0.0.1 for every address
        try:
            return _hydra_app(_train, "train", _torchrun_args(rest))
        finally:
            _leave_process_group()
    if cmd == "eval":
        return _hydra_app(_eval, "eval", [_eval_task_override(a) for a in rest])
    if cmd == "tools":
        return _tools(rest)
    if cmd in _PLAIN:
        module, fn = _PLAIN[cmd].split(":")
        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError as err:
            print(f"robotrl {cmd} is not available in this install ({err}).", file=sys.stderr)
            return 2
        try:
            return int(getattr(target, fn)(rest) or 0)
        except _user_errors() as err:  # bad input: its message says what and how to fix it, no traceback
            if os.environ.get("ROBOTRL_FULL_ERROR"):
                raise
            print(f"robotrl {cmd}: {type(err).__name__}: {err}\nSet ROBOTRL_FULL_ERROR=1 for the traceback.",
                  file=sys.stderr)
            return 1
    valid = ", ".join(["train", "eval", "tools", *_PLAIN])
    print(f"Unknown command {cmd!r}. Valid commands: {valid}.\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
