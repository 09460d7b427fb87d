"""robotrl.sim.warp_aot: trace the Warp modules a CPU-device run loads, compile them for sm_90 without a GPU."""

import pytest

wp = pytest.importorskip("warp", reason="needs the gpu extra (warp-lang)")

from robotrl.sim.warp_aot import cache_files, compile_traced, trace_launches  # noqa: E402


@wp.kernel
def _double(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] * 2.0


def _launch_twice() -> None:
    a = wp.ones(8, dtype=float, device="cpu")
    wp.launch(_double, dim=8, inputs=[a], device="cpu")
    wp.launch(_double, dim=8, inputs=[a], device="cpu", block_dim=64)
    assert a.numpy().tolist() == [4.0] * 8


def test_trace_launches_records_cuda_block_dims_and_restores_warp():
    import warp._src.context as ctx

    load = ctx.Module.load
    with trace_launches() as seen:
        _launch_twice()
    assert ctx.Module.load is load
    assert sorted(bd for module, bd in seen.values() if module.name == _double.module.name) == [64, 256]


def test_compile_traced_writes_sm90_cubins_then_finds_them_cached(tmp_path):
    with trace_launches() as seen:
        _launch_twice()
    before = wp.config.kernel_cache_dir
    first = compile_traced(seen, [90], cache_dir=str(tmp_path))
    assert wp.config.kernel_cache_dir == before
    assert (first.compiled, first.cached, first.failed) == (2, 0, [])
    cubins = cache_files(tmp_path, 90)
    assert len(cubins) == 2 and all(p.parent.parent.name == wp.config.version for p in cubins)
    again = compile_traced(seen, [90], cache_dir=str(tmp_path))
    assert (again.compiled, again.cached) == (0, 2)


def test_compile_traced_rejects_arch_below_70():
    with pytest.raises(ValueError, match="70, 80"):
        compile_traced({}, [52])
