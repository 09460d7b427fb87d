"""The ``--ros-args`` tail and ``/**: ros__parameters:`` files that ROS 2 launch passes."""

import pytest
from robotrl.deploy.params import check_known, parse_args
from robotrl.deploy.profile import load_profile


def test_launch_tail_with_params_file(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("/**:\n  ros__parameters:\n    policy: /a.json\n    rate_hz: 50.0\n"
                 "robotrl_deploy:\n  ros__parameters:\n    auto_arm: true\n")
    args = parse_args(["robot:=example_arm", "--ros-args", "-r", "__node:=robotrl_deploy", "-r", "__ns:=/r1",
                       "--params-file", str(f), "-p", "rate_hz:=40", "-r", "/joint_states:=/r1/joint_states",
                       "--log-level", "info"], "default_name")
    assert args.node_name == "robotrl_deploy" and args.namespace == "/r1"
    assert args.params == {"policy": "/a.json", "rate_hz": 40, "auto_arm": True, "robot": "example_arm"}
    assert args.remap("/joint_states") == "/r1/joint_states" and args.remap("/imu/data") == "/imu/data"


def test_params_file_without_section_names_the_fix(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("policy: x\n")
    with pytest.raises(ValueError, match="ros__parameters"):
        parse_args(["--ros-args", "--params-file", str(f)], "n")


def test_unknown_parameter_lists_valid_ones():
    with pytest.raises(ValueError, match="valid"):
        check_known({"polcy": 1}, {"policy": ""}, "robotrl-deploy")


def test_bad_argument():
    with pytest.raises(ValueError, match="name:=value"):
        parse_args(["oops"], "n")


def test_profiles_load_and_typos_fail(tmp_path):
    assert load_profile("humanoid_sim").command_kind == "torque"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsafety:\n  delta_capp: 1\n")
    with pytest.raises(ValueError, match="delta_capp"):
        load_profile(str(bad))
    with pytest.raises(FileNotFoundError, match="humanoid_sim"):
        load_profile("no_such_robot")


def test_scenario_param_reads_a_mapping_or_a_yaml_file_and_rejects_non_numbers(tmp_path):
    from robotrl.deploy.params import scenario_param

    args = parse_args(['scenario:={friction: 0.6, tool_family: 2}'], "robotrl_deploy")
    assert scenario_param(args.params["scenario"], "robotrl-deploy") == {"friction": 0.6, "tool_family": 2.0}
    (tmp_path / "s.yaml").write_text("cmd_vx: 1.2\nmass: 1\n")
    assert scenario_param(str(tmp_path / "s.yaml"), "x") == {"cmd_vx": 1.2, "mass": 1.0}
    assert scenario_param("", "x") == {}
    with pytest.raises(ValueError, match=r"scenario.friction='slippery' is not a number"):
        scenario_param({"friction": "slippery"}, "x")
    with pytest.raises(ValueError, match="neither a mapping nor a readable YAML file"):
        scenario_param(str(tmp_path / "missing.yaml"), "x")
    with pytest.raises(ValueError, match="must map scenario parameter names"):
        scenario_param([0.6], "x")
