"""Console front end of the deploy scripts: a missing required parameter or file stops before any node exists."""

from robotrl.deploy.node import main as deploy_main


def test_deploy_without_policy_or_robot_names_both_and_exits_2(capsys):
    assert deploy_main([]) == 2
    assert capsys.readouterr().err.strip() == ("robotrl-deploy needs policy:=<policy.json from robotrl export> and "
                                               "robot:=<profile name or YAML>.")


def test_deploy_with_an_absent_policy_file_names_it_and_exits_2(tmp_path, capsys):
    missing = tmp_path / "policy.json"
    assert deploy_main([f"policy:={missing}", "robot:=humanoid_sim"]) == 2
    assert capsys.readouterr().err.strip() == f"robotrl-deploy: policy:={missing}: no such file."


def test_help_exits_0_with_the_usage(capsys):
    assert deploy_main(["--help"]) == 0
    assert "robot:=" in capsys.readouterr().out
