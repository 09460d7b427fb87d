"""MuJoCo Warp's CUDA kernels compiled ahead of time, on a machine without a GPU.

A fresh GPU machine spends minutes compiling MuJoCo Warp's kernels before the first step: 305 s for
``task=tool_use_gpu`` on an H200, whose convex-collision kernels are large. On a cluster every job
on a new node pays that again. Warp can compile a module for a CUDA architecture without a GPU
(NVRTC ships inside ``warp-lang``), but it has to know which modules and block sizes a run
launches: MuJoCo Warp builds many kernels per model. ``trace_launches`` records them while the
same model runs on Warp's CPU device (the same kernel source), and ``compile_traced`` writes
``.sm<arch>.cubin`` files for them into Warp's kernel cache, where a CUDA run finds them by hash.

With a cache written this way for ``task=tool_use_gpu`` (by a prototype of ``robotrl warp-compile``
with the same tracing, session 39), an H200's build took 45 s instead of 305 s: 42 of 52 modules
loaded from the cache. The rest are kernels that Warp links at load time
(cuSOLVERDx tile Cholesky, which needs the device), and modules whose CUDA hash differs from the CPU
trace's, likely because MuJoCo Warp specializes some kernels by device in Python
(``wp.get_device().is_cuda`` picks threads per group, graph-conditional loops and grid sizes); those
still compile on the GPU, and the report lists the ones that failed here. Session 42's H200 run of the
command's own cache: 43 of 52 modules cached, 5 tile-Cholesky and 4 hash-differing ones compiled there,
build 36 s.

Warp's module tracing uses its internal launch path (``warp._src.context``), which is why the
``gpu`` extra pins the Warp version this was written against; a Warp without those functions is
a RuntimeError naming the version.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_BLOCK_DIM = 256  # Warp's block size for a CUDA launch that names none


@dataclass
class AotReport:
    """What ``compile_traced`` did.

    Attributes:
        arch: the CUDA architectures compiled for (90: H100/H200).
        cache_dir: Warp's kernel cache that received the binaries.
        variants: (module, CUDA block size) pairs the traced run launched.
        compiled: binaries written now.
        cached: binaries that were already in the cache.
        failed: ``"<module> (block <n>): <error>"`` for each variant that did not compile here; a CUDA
            run compiles those itself.

    """

    arch: list[int]
    cache_dir: str
    variants: int = 0
    compiled: int = 0
    cached: int = 0
    failed: list[str] = field(default_factory=list)


def _warp_internals() -> Any:
    try:
        import warp as wp
        import warp._src.context as ctx
    except ImportError as err:
        raise ImportError("robotrl warp-compile needs MuJoCo Warp: pip install 'robotrl[gpu]'.") from err
    if not all(hasattr(ctx, name) for name in ("_resolve_launch_block_dim", "_ResolvedBlockDim", "Module")):
        raise RuntimeError(
            f"warp-lang {wp.__version__} lacks the launch internals robotrl warp-compile traces "
            "(written against 1.19); install that version or compile on the GPU as usual."
        )
    return ctx


@contextmanager
def trace_launches() -> Iterator[dict[tuple[int, int], tuple[Any, int]]]:
    """Record every Warp module a launch loads, with the block size the launch would use on CUDA.

    Yields a dict ``{(id(module), block_dim): (module, block_dim)}`` filled while the block runs. On
    Warp's CPU device every launch runs with block size 1; the CUDA size is the launch's own
    ``block_dim`` argument, or Warp's default of 256.
    """
    ctx = _warp_internals()
    seen: dict[tuple[int, int], tuple[Any, int]] = {}
    pending = threading.local()
    resolve, load = ctx._resolve_launch_block_dim, ctx.Module.load

    def traced_resolve(device: Any, block_dim: int | None) -> int:
        if not isinstance(block_dim, ctx._ResolvedBlockDim):
            pending.block_dim = DEFAULT_BLOCK_DIM if block_dim is None or block_dim <= 0 else int(block_dim)
        return resolve(device, block_dim)

    def traced_load(module: Any, device: Any, block_dim: int | None = None, *args: Any, **kwargs: Any) -> Any:
        cuda_block_dim = getattr(pending, "block_dim", None) or DEFAULT_BLOCK_DIM
        pending.block_dim = None
        seen[(id(module), cuda_block_dim)] = (module, cuda_block_dim)
        return load(module, device, block_dim, *args, **kwargs)

    ctx._resolve_launch_block_dim, ctx.Module.load = traced_resolve, traced_load
    try:
        yield seen
    finally:
        ctx._resolve_launch_block_dim, ctx.Module.load = resolve, load


def compile_traced(seen: dict[tuple[int, int], tuple[Any, int]], arch: list[int],
                   cache_dir: str | None = None) -> AotReport:
    """Compile each traced (module, block size) for each CUDA ``arch`` into Warp's kernel cache.

    Args:
        seen: what ``trace_launches`` recorded.
        arch: compute capabilities, e.g. ``[90]`` for an H100 or H200, ``[80]`` for an A100.
        cache_dir: the directory a GPU job names with ``WARP_CACHE_PATH`` (binaries go to its
            ``<warp version>/`` subfolder, as Warp reads them); ``None`` keeps Warp's own cache.

    Returns:
        The report; variants that fail to compile here are listed in ``failed`` and logged as warnings.

    Raises:
        ValueError: an ``arch`` below 70 (Warp's oldest CUDA target).

    """
    import warp as wp

    bad = [a for a in arch if a < 70]
    if bad:
        raise ValueError(f"arch={bad}: CUDA compute capabilities are written 70, 80, 86, 89, 90 (sm_XX).")
    wp.init()
    before = wp.config.kernel_cache_dir
    if cache_dir is not None:
        wp.config.kernel_cache_dir = os.path.join(os.path.realpath(cache_dir), wp.config.version)
    report = AotReport(arch=list(arch), cache_dir=str(wp.config.kernel_cache_dir), variants=len(seen))
    try:
        _compile_all(seen, arch, report)
    finally:
        wp.config.kernel_cache_dir = before
    return report


def _compile_all(seen: dict[tuple[int, int], tuple[Any, int]], arch: list[int], report: AotReport) -> None:
    for module, block_dim in seen.values():
        module.get_module_hash(block_dim)
        options = module.resolved_options[block_dim]
        for a in arch:
            try:
                if module._compile(None, None, output_arch=a, use_ptx=False, options=options):
                    report.compiled += 1
                else:
                    report.cached += 1
            except Exception as err:  # noqa: BLE001 - reported per module below; the GPU compiles it instead
                first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
                report.failed.append(f"{module.name} (block {block_dim}, sm_{a}): {first}")
                log.warning("not compiled ahead of time, the GPU will compile it: %s (block %d, sm_%d): %s",
                            module.name, block_dim, a, first)


def cache_files(cache_dir: str | Path, arch: int) -> list[Path]:
    """The ``.sm<arch>.cubin`` binaries under a kernel cache (``<cache_dir>/<version>/<module>/*.cubin``)."""
    return sorted(Path(cache_dir).glob(f"**/*.sm{arch}.cubin"))
