"""GPU targets of the kernels that installed FP4-capable libraries ship (G7).

For each distribution that is installed, every shared object and cubin its RECORD lists is
read with :mod:`spark_gotchas.fatbin` (headers only). ``TORCH_CUDA_ARCH_LIST`` is read too:
it decides the targets of anything built from source in this environment.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import time
from typing import Optional

from .. import fatbin
from ..readings.env import Fp4KernelScan, LibraryKernels
from . import ReadContext, reader

# Distributions whose NVFP4 paths are their own CUDA kernels: on GB10 they need sm_121a
# (or a family sm_12Xf) entries, else FP4 runs without cvt.e2m1x2 and block-scaled MMA.
FP4_KERNEL_LIBRARIES = {
    "vllm": "vLLM",
    "flashinfer-python": "FlashInfer",
    "flashinfer-cubin": "FlashInfer cubins",
    "flashinfer-jit-cache": "FlashInfer JIT cache",
    "tensorrt-llm": "TensorRT-LLM",
    "transformer-engine": "Transformer Engine",
    "transformer-engine-cu12": "Transformer Engine (cu12)",
    "transformer-engine-cu13": "Transformer Engine (cu13)",
    "transformer-engine-torch": "Transformer Engine (torch)",
    "sgl-kernel": "SGLang kernels",
}
# Read for context, not required: torch's FP4 GEMM goes through cuBLAS (measured instead),
# and bitsandbytes' 4-bit formats (nf4, its own fp4) dequantise in software.
CONTEXT_LIBRARIES = {"torch": "PyTorch", "bitsandbytes": "bitsandbytes"}
SUFFIXES = (".so", ".cubin")


def kernel_files(dist: md.Distribution) -> list[str]:
    """Shared objects and cubins a distribution installed (from its RECORD)."""
    out = []
    for entry in dist.files or ():
        name = entry.name
        if name.endswith(SUFFIXES) or ".so." in name:
            path = str(entry.locate())
            if os.path.isfile(path):
                out.append(path)
    return sorted(set(out))


def scan_distribution(name: str, label: str, role: str) -> Optional[LibraryKernels]:
    """The kernel targets of one installed distribution; None when it is not installed."""
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return None
    t0 = time.perf_counter()
    lib = LibraryKernels(distribution=name, label=label, version=dist.version, role=role)
    for path in kernel_files(dist):
        lib.files_scanned += 1
        found = fatbin.read_file(path)
        if found.error and found.error != "not an ELF file":
            lib.errors.append(f"{os.path.basename(path)}: {found.error}")
        if found.entries:
            lib.files_with_kernels += 1
            for target, count in found.counts().items():
                lib.targets[target] = lib.targets.get(target, 0) + count
    lib.targets = dict(sorted(lib.targets.items(), key=lambda kv: target_order(kv[0])))
    lib.seconds = time.perf_counter() - t0
    return lib


def target_order(target: str) -> tuple:
    """Sort sm_* before compute_*, then by SM number, plain before a before f."""
    entry = fatbin.entry_from_target(target)
    if entry is None:
        return (2, 0, target)
    return (entry.kind == "ptx", entry.sm, entry.suffix)


@reader("env.fp4_kernels")
def read_fp4_kernels(ctx: ReadContext) -> Fp4KernelScan:
    """Kernel targets of installed FP4-capable libraries, and TORCH_CUDA_ARCH_LIST."""
    t0 = time.perf_counter()
    libraries = []
    for table, role in ((FP4_KERNEL_LIBRARIES, "fp4"), (CONTEXT_LIBRARIES, "context")):
        for name, label in table.items():
            lib = scan_distribution(name, label, role)
            if lib is not None:
                libraries.append(lib)
    return Fp4KernelScan(libraries=libraries, torch_cuda_arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST"),
                         seconds=time.perf_counter() - t0)
