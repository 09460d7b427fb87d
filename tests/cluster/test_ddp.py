"""torch DDP through torchrun: 2 CPU ranks (gloo, loopback) stay identical; the checkpoint resumes in one process."""

import ipaddress
import json
import socket
import subprocess
import sys
import time

import psutil
import torch
from safetensors.torch import load_file

from robotrl.cluster.ddp import merge_running_stats, rank_seed
from robotrl.monitoring import read_metrics
from robotrl.policies.normalizer import RunningNorm


def _state(norm):
    return norm.count.clone(), norm.mean.clone(), norm.var.clone()


def test_merge_running_stats_equals_one_normalizer_fed_every_ranks_batches():
    gen = torch.Generator().manual_seed(0)
    x0, x1, x2 = (torch.randn(n, 3, generator=gen) * 2 + 5 for n in (50, 32, 32))
    prior = RunningNorm(3)
    prior.update(x0)
    posts = []
    for x in (x1, x2):
        rank = RunningNorm(3)
        rank.load_state_dict(prior.state_dict())
        rank.update(x[:16])
        rank.update(x[16:])  # two updates in one iteration (e.g. the return normalizer, per step)
        posts.append(_state(rank))
    c, m, v = merge_running_stats(_state(prior), posts)
    whole = torch.cat([x0, x1, x2])
    assert abs(float(c) - (50 + 32 + 32 + prior.eps)) < 1e-3
    torch.testing.assert_close(m.float(), whole.mean(0), atol=1e-5, rtol=0)
    torch.testing.assert_close(v.float(), whole.var(0, unbiased=False), atol=1e-4, rtol=0)


def test_rank_seed_keeps_the_seed_on_rank_0_and_gives_other_ranks_their_own():
    assert rank_seed(7, 0) == 7
    seeds = {rank_seed(7, r) for r in range(1, 5)} | {rank_seed(7, 0, iteration=3)}
    assert len(seeds) == 5 and 7 not in seeds
    assert rank_seed(7, 1) == rank_seed(7, 1) and rank_seed(7, 1) != rank_seed(8, 1)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_args(run_dir, iters, *extra):
    return ["-m", "robotrl.cli", "train", "task=humanoid", f"run_dir={run_dir}", f"max_iterations={iters}",
            "save_interval=1", "sim.num_envs=4", "sim.nthread=1", "algo.num_steps=8", "progress=false",
            "tensorboard=false", "eval_at_end=false", "max_time_s=0", *extra]


def _is_loopback(ip):
    addr = ipaddress.ip_address(ip)
    return (getattr(addr, "ipv4_mapped", None) or addr).is_loopback


def _nameservers():
    try:
        with open("/etc/resolv.conf") as f:
            return {line.split()[1] for line in f if line.startswith("nameserver") and len(line.split()) > 1}
    except OSError:  # no resolver configured: nothing is exempt
        return set()


def _off_loopback(endpoints):
    """The endpoints that left loopback, minus the system resolver's PTR lookups of 127.0.0.1.

    libtorch's c10d ``formatSockAddr`` calls ``getnameinfo`` without ``NI_NUMERICHOST`` on every TCPStore
    connect and accept. The store socket is IPv6 (``::ffff:127.0.0.1``), which ``/etc/hosts`` does not
    match, so glibc asks the nameserver for ``1.0.0.127.in-addr.arpa`` (found with gdb, session 26). That
    query is a UDP datagram to port 53 of a ``/etc/resolv.conf`` nameserver, carries no rank data, and
    cannot be turned off from Python; anything else off loopback (any TCP peer, any other UDP) still fails.
    """
    resolvers = _nameservers()
    return {e for e in endpoints
            if not _is_loopback(e[1]) and not (e[0] == socket.SOCK_DGRAM and e[2] == 53 and e[1] in resolvers)}


def _run_watching_connections(cmd, timeout):
    """Run ``cmd``; return (rc, output, every (socket type, remote ip, remote port) its process tree used)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = set()
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            for p in tree:
                for conn in p.net_connections(kind="inet"):
                    if conn.raddr:
                        seen.add((conn.type, conn.raddr.ip, conn.raddr.port))
        except psutil.Error:
            pass
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    out = proc.communicate()[0]
    return proc.returncode, out, seen


def test_two_ranks_stay_identical_rank_0_writes_and_the_checkpoint_resumes_in_one_process(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", *_train_args(run_dir, 3)]
    rc, out, addresses = _run_watching_connections(cmd, timeout=150)
    assert rc == 0, out[-3000:]
    # every checkpoint (save_interval=1) first checks that both ranks hold bit-identical weights
    assert "diverged" not in out
    assert any(t == socket.SOCK_STREAM for t, _, _ in addresses), addresses  # the ranks' TCP links were seen
    assert not _off_loopback(addresses), addresses
    meta = json.loads((run_dir / "checkpoints" / "ckpt_000003.json").read_text())
    assert meta["world_size"] == 2
    assert meta["env_steps"] == 3 * 2 * 4 * 8  # both ranks' worlds count
    assert [r["iteration"] for r in read_metrics(run_dir)] == [1, 2, 3]  # rank 0 alone logs
    weights = load_file(run_dir / "checkpoints" / "ckpt_000003.safetensors")
    # the observation normalizer saw both ranks' data: 3 iterations x 2 ranks x 32 steps
    assert abs(float(weights["policy.obs_norm.count"]) - 3 * 2 * 32) < 1e-2

    single = subprocess.run([sys.executable, *_train_args(run_dir, 5, "resume=true")], capture_output=True,
                            text=True, timeout=150)
    assert single.returncode == 0, single.stderr[-3000:]
    assert "resumed from ckpt_000003" in single.stdout + single.stderr
    assert [r["iteration"] for r in read_metrics(run_dir)] == [1, 2, 3, 4, 5]
    meta5 = json.loads((run_dir / "checkpoints" / "ckpt_000005.json").read_text())
    assert meta5["world_size"] == 1 and meta5["env_steps"] == meta["env_steps"] + 2 * 4 * 8


def test_off_loopback_filter_passes_only_resolver_lookups_and_flags_every_other_remote_peer():
    ns = next(iter(_nameservers()), None)
    tcp, udp = socket.SOCK_STREAM, socket.SOCK_DGRAM
    loop = {(tcp, "127.0.0.1", 29500), (tcp, "::ffff:127.0.0.1", 29500), (udp, "127.0.0.1", 7400)}
    assert not _off_loopback(loop)
    assert _off_loopback({(tcp, "10.0.0.5", 29500)}) == {(tcp, "10.0.0.5", 29500)}
    assert _off_loopback({(udp, "10.0.0.5", 7400)}) == {(udp, "10.0.0.5", 7400)}
    if ns is not None:
        assert not _off_loopback({(udp, ns, 53)})
        assert _off_loopback({(tcp, ns, 53), (udp, ns, 54)}) == {(tcp, ns, 53), (udp, ns, 54)}
