"""robotrl batch: scenarios, deterministic merging, Ray retries after a killed worker, loopback only."""

import dataclasses
import ipaddress
import json
import os
from pathlib import Path

import pytest

from robotrl.cluster import EvalJob, Scenario, grid, run_batch, sample, write_results
from robotrl.cluster.batch import run_scenario


def test_grid_combines_axes_once_per_seed_with_sorted_ids():
    out = grid({"b": [1, 2], "a": ["x"]}, seeds=[7, 8])
    assert [s.id for s in out] == ["000000", "000001", "000002", "000003"]
    assert [(s.task, s.seed) for s in out] == [({"a": "x", "b": 1}, 7), ({"a": "x", "b": 1}, 8),
                                               ({"a": "x", "b": 2}, 7), ({"a": "x", "b": 2}, 8)]


def test_sample_is_reproducible_and_respects_ranges():
    a = sample({"f": [0.5, 1.5], "n": [0, 3], "c": ["u", "v"]}, 20, seed=3)
    assert a == sample({"f": [0.5, 1.5], "n": [0, 3], "c": ["u", "v"]}, 20, seed=3)
    assert a != sample({"f": [0.5, 1.5], "n": [0, 3], "c": ["u", "v"]}, 20, seed=4)
    assert all(0.5 <= s.task["f"] <= 1.5 and s.task["n"] in range(4) and s.task["c"] in "uv" for s in a)
    assert isinstance(a[0].task["n"], int) and len({s.seed for s in a}) == 20


def test_run_batch_rejects_duplicate_ids():
    with pytest.raises(ValueError, match="unique"):
        run_batch(_Echo(), [Scenario("a", 0), Scenario("a", 1)], progress=False)


@dataclasses.dataclass
class _Echo:
    def __call__(self, scenario):
        return {"pid": os.getpid(), "seed": scenario.seed}


def test_in_process_results_are_sorted_by_scenario_id():
    out = run_batch(_Echo(), [Scenario("b", 2), Scenario("a", 1), Scenario("c", 3)], progress=False)
    assert [r["scenario"]["id"] for r in out] == ["a", "b", "c"]
    assert [r["result"]["seed"] for r in out] == [1, 2, 3]
    assert {r["result"]["pid"] for r in out} == {os.getpid()}


def _eval_job(checkpoint):
    return EvalJob(checkpoint=checkpoint, num_envs=2, episodes=2)


def _scenarios():
    return grid({"episode_length_s": [0.2, 0.4], "push_vel": [0.0, 1.0]}, seeds=[0, 1])  # 8 scenarios


def test_eval_job_seed_and_overrides_change_the_result(humanoid_checkpoint):
    job = _eval_job(humanoid_checkpoint)
    base = run_scenario(job, Scenario("a", 0, {"episode_length_s": 0.4}))["result"]
    again = run_scenario(job, Scenario("a", 0, {"episode_length_s": 0.4}))["result"]
    other_seed = run_scenario(job, Scenario("a", 5, {"episode_length_s": 0.4}))["result"]
    shorter = run_scenario(job, Scenario("a", 0, {"episode_length_s": 0.2}))["result"]
    assert base == again
    assert base["return"] != other_seed["return"]
    assert shorter["length"] < base["length"]


@dataclasses.dataclass
class CrashOnce:
    """Wraps a job; the first attempt at ``crash_id`` kills its worker process (no exception, no cleanup)."""

    inner: EvalJob
    marker_dir: str
    crash_id: str

    def __call__(self, scenario):
        d = Path(self.marker_dir)
        (d / f"attempt_{scenario.id}_{os.getpid()}_{os.urandom(4).hex()}").touch()
        if scenario.id == self.crash_id and not (d / "crashed").exists():
            (d / "crashed").write_text(str(os.getpid()))
            os._exit(1)
        return self.inner(scenario)


def test_local_ray_uses_loopback_only(local_ray):
    import psutil

    assert local_ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    assert {n["NodeManagerAddress"] for n in local_ray.nodes()} == {"127.0.0.1"}
    run_batch(_Echo(), [Scenario(str(i), i) for i in range(4)], workers=2, progress=False)
    procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
    assert len(procs) > 3  # GCS, raylet, workers
    remote = set()
    for proc in procs:
        for conn in proc.net_connections(kind="inet"):
            remote |= {conn.laddr.ip} if conn.status == psutil.CONN_ESTABLISHED else set()
            remote |= {conn.raddr.ip} if conn.raddr else set()
    assert remote and all(_is_loopback(ip) for ip in remote), remote


def _is_loopback(ip):
    addr = ipaddress.ip_address(ip)
    return (getattr(addr, "ipv4_mapped", None) or addr).is_loopback


def test_two_ray_workers_and_one_process_write_byte_identical_files(humanoid_checkpoint, local_ray, tmp_path):
    job, scenarios = _eval_job(humanoid_checkpoint), _scenarios()
    local = run_batch(job, scenarios, workers=0, progress=False)
    remote = run_batch(job, scenarios, workers=2, progress=False)
    meta = {"job": "eval"}
    a = write_results(tmp_path / "local.json", local, meta).read_bytes()
    b = write_results(tmp_path / "ray.json", remote, meta).read_bytes()
    assert a == b
    assert [r["scenario"]["id"] for r in json.loads(a)["results"]] == [s.id for s in scenarios]


def test_killed_worker_is_retried_and_no_scenario_is_lost_or_duplicated(humanoid_checkpoint, local_ray, tmp_path):
    scenarios = _scenarios()
    reference = run_batch(_eval_job(humanoid_checkpoint), scenarios, workers=0, progress=False)
    markers = tmp_path / "markers"
    markers.mkdir()
    crash = CrashOnce(_eval_job(humanoid_checkpoint), str(markers), crash_id="000003")
    out = run_batch(crash, scenarios, workers=2, max_retries=2, progress=False)
    crashed_pid = int((markers / "crashed").read_text())
    assert crashed_pid != os.getpid()
    attempts = sorted(p.name.split("_")[1] for p in markers.glob("attempt_*"))
    assert attempts.count("000003") == 2  # killed once, rerun once
    assert sorted(set(attempts)) == [s.id for s in scenarios]
    assert [r["scenario"]["id"] for r in out] == [s.id for s in scenarios]
    assert out == reference


def test_without_retries_a_killed_worker_fails_the_batch(humanoid_checkpoint, local_ray, tmp_path):
    crash = CrashOnce(_eval_job(humanoid_checkpoint), str(tmp_path), crash_id="000000")
    with pytest.raises(local_ray.exceptions.RayError):
        run_batch(crash, _scenarios()[:2], workers=2, max_retries=0, progress=False)


def test_ray_loopback_only_sets_single_machine_mode_and_turns_usage_stats_off_unless_set(monkeypatch):
    from robotrl.cluster.batch import LOOPBACK_ENV, USAGE_STATS_ENV, ray_loopback_only

    monkeypatch.delenv(USAGE_STATS_ENV, raising=False)
    monkeypatch.delenv(LOOPBACK_ENV, raising=False)
    ray_loopback_only()
    assert os.environ[LOOPBACK_ENV] == "0" and os.environ[USAGE_STATS_ENV] == "0"
    monkeypatch.setenv(USAGE_STATS_ENV, "1")  # a user's explicit choice stands
    ray_loopback_only()
    assert os.environ[USAGE_STATS_ENV] == "1"
