"""Reading types of the ``torch.*`` keys (G1, and every check that needs a GPU through torch): the build
torch is, and its first CUDA kernel launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Bytes, Seconds


# -- torch.build ----------------------------------------------------------------------------------
@dataclass
class TorchDevice:
    index: int
    name: str
    capability: tuple[int, int]
    total_memory_bytes: Bytes
    multiprocessors: int = 0
    l2_bytes: Optional[Bytes] = None


@dataclass
class TorchBuild:
    """``python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list())'``"""

    installed: bool
    version: Optional[str] = None
    cuda: Optional[str] = None  # torch.version.cuda, e.g. "13.0"; None for a CPU build
    git_version: Optional[str] = None
    compiled_with_cuda: bool = False
    arch_list: list[str] = field(default_factory=list)
    cuda_available: bool = False
    device_count: int = 0
    devices: list[TorchDevice] = field(default_factory=list)
    import_seconds: Optional[Seconds] = None
    import_error: Optional[str] = None  # import raised (e.g. libcudart.so.12 missing)
    import_error_file: Optional[str] = None  # the file it was raised in: torch's own, or another package's
    cuda_error: Optional[str] = None
    cuda_query_seconds: Optional[Seconds] = None
    worker_problem: Optional[str] = None  # the child died or hung while importing/querying

    @property
    def cuda_major(self) -> Optional[int]:
        if not self.cuda:
            return None
        try:
            return int(self.cuda.split(".")[0])
        except ValueError:
            return None

    @property
    def usable(self) -> bool:
        return self.installed and not self.import_error and not self.worker_problem

    @property
    def has_device(self) -> bool:
        return self.usable and self.cuda_available and self.device_count > 0

    @property
    def gpu_unavailable(self) -> str:
        """'' when torch can run CUDA work here, else why not, in words (for SKIP lines)."""
        if not self.installed:
            return "torch is not installed"
        if self.import_error:
            return f"import torch fails: {self.import_error}"
        if self.worker_problem:
            return f"import torch crashed or hung: {self.worker_problem}"
        if not self.compiled_with_cuda:
            return f"torch {self.version} is a CPU build"
        if not self.cuda_available or not self.device_count:
            return self.cuda_error or f"torch {self.version} (CUDA {self.cuda}) sees no CUDA device"
        return ""


# -- torch.first_launch ---------------------------------------------------------------------------
@dataclass
class FirstLaunch:
    """The first CUDA kernel launch, tried in the worker: a segfault or hang is a reading."""

    attempted: bool
    ok: bool = False
    reason: str = ""  # why not attempted, or what went wrong
    signal: str = ""
    timed_out: bool = False
    seconds: Optional[Seconds] = None
    mem_get_info: Optional[tuple[int, int]] = None  # (free, total) bytes from cudaMemGetInfo
