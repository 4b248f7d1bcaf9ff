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


def module_cached(src: str, name: str) -> bool:
    """Whether Triton's cache already holds the C module ``name`` built from ``src``, under the key
    Triton's ``compile_module_from_src`` uses. Then it need not be loaded here: loading it links
    libcuda, a cost for nothing on a machine that has built it before."""
    import hashlib
    import sysconfig

    from triton.runtime.build import platform_key
    from triton.runtime.cache import get_cache_manager

    key = hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest()
    return get_cache_manager(key).get_file(f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}") is not None


def build_driver_module() -> bool:
    """Triton's own CUDA helper module (C, built once per machine and cached). True when built
    now, False when it was in the cache already."""
    from pathlib import Path

    from triton.backends.nvidia import driver

    if module_cached((Path(driver.__file__).parent / "driver.c").read_text(), "cuda_utils"):
        return False
    driver.CudaUtils()
    return True


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


def launcher_source(compiled: Any) -> str | None:
    """The C source of ``compiled``'s launcher, as ``CudaLauncher`` generates it (None if that moved)."""
    try:
        from triton.backends.nvidia.driver import make_launcher

        src = compiled.src
        arg_index = {name: i for i, name in enumerate(src.fn.arg_names)}
        constants = {(arg_index[k],) if isinstance(k, str) else k: v for k, v in getattr(src, "constants", {}).items()}
        return make_launcher(constants, dict(src.signature), getattr(compiled.metadata, "tensordesc_meta", None))
    except Exception:
        return None


def build_launcher(compiled: Any) -> bool:
    """Build the compiled kernel's launcher module into the cache (it links libcuda). True when
    built now, False when it was in the cache already."""
    from triton.backends.nvidia.driver import CudaLauncher

    source = launcher_source(compiled)
    if source is not None and module_cached(source, "__triton_launcher"):
        return False
    CudaLauncher(compiled.src, compiled.metadata)
    return True


def fill(kernel: Any, args: tuple, options: dict[str, Any], capability: tuple[int, int] | list[int]) -> bool:
    """:func:`compile_kernel` (a cache hit when compiled before) then :func:`build_launcher`. True
    when the launcher was built now, False when the cache held it."""
    return build_launcher(compile_kernel(kernel, args, options, capability))
