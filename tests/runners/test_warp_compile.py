"""robotrl warp-compile: argument checks (the compile itself: tests/sim/test_warp_aot.py)."""

import pytest

from robotrl.runners.warp_compile import parse_args


def test_parse_args_splits_options_from_hydra_overrides():
    args, overrides = parse_args(["task=tool_use_gpu", "--arch", "80,90", "task.integrator=euler", "--steps", "4"])
    assert args.arch == [80, 90] and args.steps == 4 and args.worlds == 0
    assert overrides == ["task=tool_use_gpu", "task.integrator=euler"]


@pytest.mark.parametrize("argv, message", [
    (["--arch", "90"], "task=tool_use_gpu"),
    (["task=humanoid_gpu", "--arch", "52"], "compute capabilities"),
    (["task=humanoid_gpu", "--steps", "0"], "at least 1"),
    (["task=humanoid_gpu", "--worlds", "-1"], "at least 0"),
    (["task=humanoid_gpu", "--bogus"], "unknown options"),
    (["task=humanoid_gpu", "sim=cpu"], "MuJoCo Warp runs"),
    (["task=humanoid_gpu", "--arch", "sm90"], "80,90"),
])
def test_parse_args_rejects_bad_input_naming_the_fix(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err
