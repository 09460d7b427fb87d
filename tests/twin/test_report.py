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
