"""``robotrl twin`` arguments: a missing or unknown key stops with the command's usage, before any work."""

import pytest

from robotrl.twin.cli import main


@pytest.mark.parametrize(("argv", "message"), [
    (["triage"], "robotrl twin triage: missing bags=, policy="),
    (["triage", "bags=b"], "robotrl twin triage: missing policy="),
    (["mine", "checkpoint=runs/x", "budget=8", "bogus=1"], "robotrl twin mine: unknown argument 'bogus'"),
    (["report", "bags"], "robotrl twin report: expected key=value, got 'bags'"),
    (["calibrate", "bags=b", "physics=p.yaml"], "robotrl twin calibrate: unknown argument 'physics'"),
])
def test_bad_arguments_exit_naming_the_key_and_printing_that_commands_usage(argv, message):
    with pytest.raises(SystemExit) as err:
        main(argv)
    text = str(err.value)
    assert text.startswith(message)
    assert f"robotrl twin {argv[0]} " in text.split("\n", 1)[1]  # the usage paragraph of that command
    assert "robotrl twin " + next(c for c in ("report", "calibrate", "mine", "triage") if c != argv[0]) not in text


def test_mine_takes_task_overrides_and_unknown_commands_print_the_usage(capsys):
    with pytest.raises(SystemExit, match="missing budget="):
        main(["mine", "checkpoint=runs/x", "task.friction_range=[1.0,1.2]"])
    assert main(["replay"]) == 2
    assert "robotrl twin triage bags=" in capsys.readouterr().err
