"""Triage: a failure the twin reproduces is a policy weakness, one it does not is a dynamics gap."""

import json

import numpy as np
import pytest
import torch

from robotrl.twin.episode import load_episode
from robotrl.twin.physics import Physics


@pytest.fixture(scope="module")
def policies():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(63, 17), torch.nn.Tanh())

    def torch_policy(obs, k):
        return net(obs) * 0.5

    def numpy_policy(obs):
        with torch.no_grad():
            return (net(torch.as_tensor(obs)) * 0.5).numpy()

    return torch_policy, numpy_policy


def test_triage_separates_policy_weakness_from_dynamics_gap(tmp_path, humanoid_profile, policies):
    from robotrl.twin.record import record_episode
    from robotrl.twin.scenarios import ScenarioFile
    from robotrl.twin.triage import DYNAMICS_GAP, POLICY_WEAKNESS, triage, write_triage

    torch_policy, numpy_policy = policies
    strong = Physics(actuator_gain=3.0)  # the robot whose failures the twin must explain
    bags = {name: record_episode("humanoid", tmp_path / "bags", torch_policy, 30, physics=phys,
                                 profile=humanoid_profile, scenario=scenario, name=name)
            for name, phys, scenario in (("hard_command", strong, {"cmd_vx": 1.5, "cmd_yaw": 0.0}),
                                         ("weak_robot", Physics(), {"cmd_vx": 0.0, "cmd_yaw": 0.0}),
                                         ("fine", strong, {"cmd_vx": 0.0, "cmd_yaw": 0.0}))}
    episodes = [load_episode(b) for b in bags.values()]
    assert [e.success for e in episodes] == [False, False, True]
    assert episodes[0].metadata["scenario.cmd_vx"] == "1.5"
    # the twin models the strong robot: it reproduces the hard-command failure, not the weak robot's
    results = triage("humanoid", episodes, numpy_policy, physics=strong)
    verdicts = {r.bag.rsplit("/", 1)[-1]: r.verdict for r in results}
    assert verdicts == {"hard_command": POLICY_WEAKNESS, "weak_robot": DYNAMICS_GAP}
    written = write_triage(tmp_path / "triage", "humanoid", results)
    body = json.loads((tmp_path / "triage" / "triage.json").read_text())
    assert body["counts"] == {POLICY_WEAKNESS: 1, DYNAMICS_GAP: 1}
    weakness = ScenarioFile.load(tmp_path / "triage" / "policy_weakness.yaml")
    assert weakness.regions[0].bounds["cmd_vx"][0] == pytest.approx(1.5 - 0.015)
    gap = tmp_path / "triage" / "dynamics_gap" / "weak_robot"
    assert gap.is_symlink() and (gap / "metadata.yaml").is_file() and gap.parent in written


def test_closed_loop_applies_the_bags_scenario_from_metadata_or_read_off_the_bag(tmp_path, humanoid_profile, policies,
                                                                                 monkeypatch):
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.twin.record import record_episode
    from robotrl.twin.replay import Twin

    torch_policy, numpy_policy = policies
    pushes = {"push_interval_s": 0.06}  # a push every 4 steps (randomize is off: only scenario pushes)
    bag = record_episode("humanoid", tmp_path, torch_policy, 20, profile=humanoid_profile, overrides=pushes,
                         scenario={"push_vel": 1.0, "push_dir": 0.5})
    ep = load_episode(bag)
    roll = Twin("humanoid", [ep], overrides=pushes, nthread=1).closed_loop(numpy_policy)
    n = int(roll.length[0])
    assert n > 8 and np.abs(roll.q[0, :n] - ep.q[:n]).max() < 1e-6
    # a bag without scenario metadata (a real robot's): the twin replays the push it reads off the bag
    ep.metadata = {k: v for k, v in ep.metadata.items() if not k.startswith("scenario.")}
    read = Twin("humanoid", [ep], overrides=pushes, nthread=1).closed_loop(numpy_policy)
    read_err = np.abs(read.q[0, :n] - ep.q[:n]).max()
    # and without that reading (the task measures nothing), no push: the replay leaves the bag
    monkeypatch.setattr(HumanoidTask, "scenario_from_episode", staticmethod(lambda episode: {}))
    unpushed = Twin("humanoid", [ep], overrides=pushes, nthread=1).closed_loop(numpy_policy)
    unpushed_err = np.abs(unpushed.q[0, :n] - ep.q[:n]).max()
    assert unpushed_err > 1e-3 and read_err < 0.1 * unpushed_err


def test_weakness_file_clips_out_of_range_scenarios_and_rejects_unknown_names():
    from robotrl.twin.triage import POLICY_WEAKNESS, TriageResult, weakness_scenarios

    def result(scenario):
        return TriageResult("bags/ep1", POLICY_WEAKNESS, False, False, 0.1, scenario)

    # friction 0.2 is below the humanoid's 0.4..1.4: the box sits at the edge instead of inverting
    box = weakness_scenarios("humanoid", [result({"friction": 0.2, "cmd_vx": 0.75})]).regions[0].bounds
    assert box["friction"] == pytest.approx([0.4, 0.41]) and box["cmd_vx"] == pytest.approx([0.735, 0.765])
    with pytest.raises(ValueError, match=r"bags/ep1: metadata scenario.\*: \['grip'\] are not scenario parameters"):
        weakness_scenarios("humanoid", [result({"grip": 1.0})])


def test_a_bag_without_scenario_metadata_gets_its_command_and_push_from_the_recording(tmp_path, humanoid_profile,
                                                                                      policies):
    from robotrl.twin.record import record_episode
    from robotrl.twin.scenarios import ScenarioFile
    from robotrl.twin.triage import POLICY_WEAKNESS, episode_scenario, triage, write_triage

    torch_policy, numpy_policy = policies
    pushes = {"push_interval_s": 0.3}
    bag = record_episode("humanoid", tmp_path / "bags", torch_policy, 120, profile=humanoid_profile,
                         overrides=pushes, scenario={"push_vel": 1.0, "push_dir": 0.5, "cmd_vx": 1.2, "cmd_yaw": 0.3})
    ep = load_episode(bag)
    assert ep.success is False
    # the operator's metadata wins where it names a parameter; the recording fills in the rest
    ep.metadata = {k: v for k, v in ep.metadata.items() if k not in ("scenario.push_vel", "scenario.push_dir")}
    ep.metadata["scenario.cmd_vx"] = "0.8"
    scenario, source = episode_scenario("humanoid", ep)
    assert scenario["cmd_vx"] == 0.8 and source["cmd_vx"] == "metadata" and source["push_vel"] == "bag"
    assert scenario["push_vel"] == pytest.approx(1.0, abs=0.03) and scenario["push_dir"] == pytest.approx(0.5, abs=0.04)
    # a real robot's bag: no scenario metadata at all
    ep.metadata = {k: v for k, v in ep.metadata.items() if not k.startswith("scenario.")}
    results = triage("humanoid", [ep], numpy_policy, overrides=pushes)
    assert [r.verdict for r in results] == [POLICY_WEAKNESS]
    assert set(results[0].scenario_source.values()) == {"bag"}
    assert results[0].scenario["cmd_vx"] == pytest.approx(1.2)
    write_triage(tmp_path / "triage", "humanoid", results)
    box = ScenarioFile.load(tmp_path / "triage" / "policy_weakness.yaml").regions[0].bounds
    assert sum(box["push_vel"]) / 2 == pytest.approx(1.0, abs=0.03) and box["cmd_yaw"][0] < 0.3 < box["cmd_yaw"][1]
    body = json.loads((tmp_path / "triage" / "triage.json").read_text())
    assert body["episodes"][0]["scenario_source"]["push_dir"] == "bag"
