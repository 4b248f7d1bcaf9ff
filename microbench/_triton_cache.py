"""Put a Triton kernel's binary and launcher into Triton's on-disk cache, without torch or a GPU context.

Why: a machine's first launch of a Triton kernel compiles it (MLIR passes, ``ptxas``) and
builds its launcher and Triton's own driver module with the C compiler, about 2 s for the
bandwidth probe's four kernels. In the suite's GPU worker that work can only start once torch
has imported, because Triton's CUDA driver asks torch for the current device. Done here, in a
process that never imports torch, it overlaps the worker's import; the worker's own compile
then finds every file in the cache (same source, signature, options and target give the same
cache keys).

The steps follow ``JITFunction.run(..., warmup=True)`` and ``CompiledKernel._init_handles``
(Triton 3.x) but stop before anything touches the device. They use Triton internals that may
move between versions: any failure here only means the worker compiles as it would anyway.
"""

from __future__ import annotations

import sys
from typing import Any


def block_torch() -> None:
    """Make ``import torch`` fail in this process: Triton's argument specialisation imports torch
    when it can (to recognise tensors), and a torch import is the seconds this work must not wait for."""
    if sys.modules.get("torch") is not None:
        raise RuntimeError("torch is already imported in this process: fill the cache from a process without it")
    sys.modules["torch"] = None  # type: ignore[assignment]


def target(capability: tuple[int, int] | list[int]) -> Any:
    """Triton's CUDA target for a device of this compute capability (as the driver would give it)."""
    from triton.backends.compiler import GPUTarget

    major, minor = capability
    return GPUTarget("cuda", major * 10 + minor, 32)


def mock_pointer() -> Any:
    """An fp32 pointer argument, aligned to 16 bytes: what a fresh torch allocation specialises to."""
    import triton.language as tl
    from triton.runtime.jit import MockTensor

    return MockTensor(tl.float32)


def build_driver_module() -> None:
    """Triton's own CUDA helper module (C, built once per machine and cached)."""
    from triton.backends.nvidia.driver import CudaUtils

    CudaUtils()


def compile_kernel(kernel: Any, args: tuple, options: dict[str, Any], capability: tuple[int, int] | list[int]) -> Any:
    """Compile ``kernel`` for ``args`` (:func:`mock_pointer` for pointers) and ``options`` (its
    constexprs and launch options, as passed at launch) for ``capability``: Triton's
    ``CompiledKernel``, now in the cache under the key the JIT computes for the same launch."""
    import triton
    from triton import knobs
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    tgt = target(capability)
    backend = make_backend(tgt)
    kwargs = dict(options)
    kwargs["debug"] = kwargs.get("debug", kernel.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, bound_options = binder(*args, **kwargs)
    parsed, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization, bound_options)
    return triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=tgt, options=parsed.__dict__)


def build_launcher(compiled: Any) -> None:
    """Build (or find) the compiled kernel's launcher module in the cache; it links libcuda."""
    from triton.backends.nvidia.driver import CudaLauncher

    CudaLauncher(compiled.src, compiled.metadata)


def fill(kernel: Any, args: tuple, options: dict[str, Any], capability: tuple[int, int] | list[int]) -> str:
    """:func:`compile_kernel` then :func:`build_launcher`; the compiled kernel's cache hash."""
    compiled = compile_kernel(kernel, args, options, capability)
    build_launcher(compiled)
    return compiled.hash
