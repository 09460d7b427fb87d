"""Twin report: report.json per episode and per rollout, overlays, and the summary's arithmetic."""

import pytest


def test_twin_report_cli_writes_json_and_overlays(nominal_bag, tmp_path):
    import json

    from robotrl.cli import main

    assert main(["twin", "report", f"bags={nominal_bag.parent}", "task=humanoid", f"out={tmp_path}"]) == 0
    body = json.loads((tmp_path / "report.json").read_text())
    row = body["rollouts"]["nominal"][0]
    assert max(row["q"]["max"]) < 1e-6 and row["divergence_time_s"] > 0
    assert list(tmp_path.glob("*_overlay.png"))
    # the summary: a never-diverging replay keeps the whole episode, and reproduces q and tau
    summary = body["summary"]["nominal"]
    assert summary["q_rmse"] < 1e-6 and summary["tau_rmse"] < 1e-6
    assert summary["divergence_time_s"] == pytest.approx(row["divergence_time_s"])


def test_report_summary_averages_joint_rmse_and_divergence_over_episodes():
    from robotrl.twin.report import summarize_rollouts

    rows = [{"q": {"rmse": [0.1, 0.3]}, "dq": {"rmse": [1.0, 1.0]}, "tau": {"rmse": [2.0, 4.0]},
             "divergence_time_s": 0.5, "base_drift_m": {"final": 0.2, "max": 0.3}},
            {"q": {"rmse": [0.0, 0.2]}, "dq": {"rmse": [3.0, 1.0]}, "tau": {"rmse": [0.0, 0.0]},
             "divergence_time_s": 1.5, "base_drift_m": {"final": 0.4, "max": 0.4}}]
    got = summarize_rollouts({"nominal": rows})["nominal"]
    assert got == pytest.approx({"q_rmse": 0.15, "dq_rmse": 1.5, "tau_rmse": 1.5, "divergence_time_s": 1.0,
                                 "base_drift_final_m": 0.3})


def test_report_measures_the_tools_path_and_only_the_true_physics_replays_it(tool_push_bags, tool_profile, tmp_path):
    import json

    from robotrl.twin.episode import load_episode
    from robotrl.twin.replay import Twin
    from robotrl.twin.report import write_report

    _, perturbed, truth = tool_push_bags
    ep = load_episode(perturbed, tool_profile)
    rolls = {name: Twin("tool_use", [ep], [phys], nthread=1).open_loop() for name, phys in
             (("nominal", type(truth)()), ("truth", truth))}
    report, pngs = write_report(tmp_path, [ep], rolls)
    summary = json.loads(report.read_text())["summary"]
    assert summary["truth"]["object_pos_rmse_m"] < 1e-6
    assert summary["nominal"]["object_pos_rmse_m"] > 2e-3
    assert summary["truth"]["object_divergence_time_s"] == pytest.approx(ep.num_steps * ep.dt)  # never diverges
    assert len(pngs) == 1 and pngs[0].stat().st_size > 0


def test_report_summary_averages_the_objects_error_only_over_episodes_that_have_one():
    from robotrl.twin.report import summarize_rollouts

    base = {"q": {"rmse": [0.0]}, "dq": {"rmse": [0.0]}, "tau": {"rmse": [0.0]}, "divergence_time_s": 1.0}
    rows = [{**base, "object_pos_rmse_m": 0.02, "object_divergence_time_s": 0.4},
            {**base, "object_pos_rmse_m": 0.04, "object_divergence_time_s": 0.8}, dict(base)]
    got = summarize_rollouts({"r": rows})["r"]
    assert got["object_pos_rmse_m"] == pytest.approx(0.03) and got["object_divergence_time_s"] == pytest.approx(0.6)
