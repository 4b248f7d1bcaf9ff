"""The bandwidth probe's kernels through the CUDA driver alone (ctypes): no torch, no Triton.

Why: through torch the probe waits for ``import torch`` and, with Triton, reads Triton's 400 MB
compiler from disk to build four kernels: on a cold H200 that was 1.3 s of a preflight and 0.46 GB
read (docs/benchmarks.md). Here the kernels are PTX (package data read by :mod:`._stream_ptx`, built from
``stream_kernels.cu``) that the driver compiles for the GPU at hand, so the probe runs in the
load worker while torch is still importing. Arrays, counting and checks are the torch path's:
``b`` and ``c`` hold whole numbers 0..15, outputs start at -1, and every method's output is
checked on the device once, outside the timing.

Device 0 is the first device CUDA sees (``CUDA_VISIBLE_DEVICES`` applies, as for torch).
"""

from __future__ import annotations

import array
import ctypes
import struct
from dataclasses import dataclass
from functools import partial
from typing import Callable

from ._cli import first_line
from ._cublas import CublasUnavailable, DeviceSession, device_attribute, device_identity
from ._stream_ptx import HELPERS, PTX

METHOD_MODE = {"write": 0, "copy": 1, "triad": 2}  # stream_check's modes
INIT_SEED = 0x5EED
HELPER_THREADS = 256
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6


class CudaUnavailable(RuntimeError):
    """No libcuda, no device, or the driver refused the PTX: measure through torch instead."""


@dataclass(frozen=True)
class StreamConfig:
    """Launch shape of one method's kernel: threads per block, float4s per thread (a module each)."""

    threads: int = 256
    vectors: int = 1

    @property
    def label(self) -> str:
        return f"cuda {self.threads} threads x {self.vectors} float4, 1 tile/block"


class StreamDevice(DeviceSession):
    """Device 0's primary context, the PTX modules of the ``vectors`` asked for, and its facts; a
    context manager that closes it (:func:`open_device` makes one)."""

    def __init__(self, vectors: tuple[int, ...] = (1,)):
        super().__init__()
        self._modules: dict[str, ctypes.c_void_p] = {}
        self._functions: dict[str, ctypes.c_void_p] = {}
        try:
            self.facts = self._facts()
            helpers = self._load("helpers", HELPERS)
            for name in ("stream_init", "stream_check", "stream_sum"):
                self._functions[name] = self._function(helpers, name)
            for v in sorted(set(vectors)):
                if v not in PTX:
                    raise ValueError(f"no kernels with {v} float4s per thread (there are {sorted(PTX)})")
                module = self._load(f"v{v}", PTX[v])
                for name in ("stream_read", "stream_write", "stream_copy", "stream_triad"):
                    self._functions[f"{name}_v{v}"] = self._function(module, f"{name}_v{v}")
        except Exception:
            self.close()
            raise

    # -- set-up ------------------------------------------------------------------------------
    def _facts(self) -> dict:
        name, capability = device_identity(self.driver, self.device)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.driver("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        version = ctypes.c_int()
        self.driver("cuDriverGetVersion", ctypes.byref(version))
        attribute = partial(device_attribute, self.driver, self.device)
        return {"device": name, "capability": capability, "sms": attribute("sms"),
                "l2_bytes": attribute("l2_bytes") or None, "integrated": bool(attribute("integrated")),
                "free_bytes": int(free.value), "driver_cuda": f"{version.value // 1000}.{version.value % 1000 // 10}"}

    def _load(self, name: str, ptx: str) -> ctypes.c_void_p:
        """Compile one PTX module for this GPU (the driver's JIT; its error log in the exception)."""
        module, log = ctypes.c_void_p(), ctypes.create_string_buffer(4096)
        options = (ctypes.c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(len(log)))
        try:
            self.driver("cuModuleLoadDataEx", ctypes.byref(module), ctypes.c_char_p(ptx.encode()), 2, options, values)
        except RuntimeError as exc:
            detail = log.value.decode(errors="replace").strip().splitlines()
            raise CudaUnavailable(f"{exc}{': ' + detail[0][:200] if detail else ''}") from None
        self._modules[name] = module
        return module

    def _function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self.driver("cuModuleGetFunction", ctypes.byref(function), module, name.encode())
        return function

    # -- launches and copies ----------------------------------------------------------------------
    def launcher(self, kernel: str, blocks: int, threads: int, *args: ctypes._SimpleCData) -> Callable[[], None]:
        """A no-argument function that launches ``kernel`` on the default stream; arguments fixed now."""
        function = self._functions[kernel]
        params = (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args))
        launch, check = self.driver.lib.cuLaunchKernel, self.driver.check

        def run() -> None:  # the timed loop's one call: the launch, its result checked
            check("cuLaunchKernel", launch(function, blocks, 1, 1, threads, 1, 1, 0, None, params, None))

        run.keep = (args, params)  # the argument values must outlive the function
        return run

    def to_host(self, address: int, out: array.array) -> array.array:
        self.driver("cuMemcpyDtoH_v2", ctypes.c_void_p(out.buffer_info()[0]), ctypes.c_uint64(address),
                    ctypes.c_size_t(len(out) * out.itemsize))
        return out

    def to_device(self, address: int, data: array.array) -> None:
        self.driver("cuMemcpyHtoD_v2", ctypes.c_uint64(address), ctypes.c_void_p(data.buffer_info()[0]),
                    ctypes.c_size_t(len(data) * data.itemsize))

    def helper_blocks(self) -> int:
        return 8 * max(1, self.facts["sms"])

    def __enter__(self) -> StreamDevice:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for address in list(self._buffers):
            self.free(address)
        for module in self._modules.values():
            self.driver.lib.cuModuleUnload(module)
        self._modules = {}
        self.release()


def _float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


class StreamArrays:
    """a (output, -1 to start), b and c (whole numbers 0..15) of ``n`` fp32, and the read's partial sums."""

    def __init__(self, dev: StreamDevice, n: int):
        if n % 4:
            raise ValueError(f"{n} elements is not a whole number of float4s")
        self.dev, self.n = dev, n
        self.a, self.b, self.c = (dev.alloc(4 * n) for _ in range(3))
        self.counters = dev.alloc(16)
        self._partials, self._partial_count = 0, 0
        dev.launcher("stream_init", dev.helper_blocks(), HELPER_THREADS, ctypes.c_uint64(self.a),
                     ctypes.c_uint64(self.b), ctypes.c_uint64(self.c), ctypes.c_uint64(n),
                     ctypes.c_uint32(INIT_SEED))()
        total = array.array("Q", [0])
        dev.to_device(self.counters, total)
        dev.launcher("stream_sum", dev.helper_blocks(), HELPER_THREADS, ctypes.c_uint64(self.b), ctypes.c_uint64(n),
                     ctypes.c_uint64(self.counters))()
        self.b_sum = float(dev.to_host(self.counters, total)[0])

    def partials(self, count: int) -> int:
        """A buffer of at least ``count`` fp32 partial sums (grown, never shrunk)."""
        if count > self._partial_count:
            if self._partials:
                self.dev.free(self._partials)
            self._partials, self._partial_count = self.dev.alloc(4 * count), count
        return self._partials

    def reset(self, blocks: int = 0) -> None:
        """Outputs start wrong (a = -1, partial sums NaN), so a kernel that skips work fails its check."""
        drv = self.dev.driver
        drv("cuMemsetD32_v2", ctypes.c_uint64(self.a), ctypes.c_uint(_float_bits(-1.0)), ctypes.c_size_t(self.n))
        if blocks:
            drv("cuMemsetD32_v2", ctypes.c_uint64(self.partials(blocks)), ctypes.c_uint(0x7FC00000),
                ctypes.c_size_t(blocks))

    def free(self) -> None:
        for address in (self.a, self.b, self.c, self.counters, self._partials):
            if address:
                self.dev.free(address)
        self._partials = 0


def blocks_for(n: int, config: StreamConfig) -> int:
    tile = config.threads * config.vectors  # float4s per block
    return -(-(n // 4) // tile)


def method_launcher(arrays: StreamArrays, method: str, config: StreamConfig, scalar: float,
                    fill_value: float) -> tuple[Callable[[], None], int]:
    """(a function that runs ``method`` once over the arrays, its number of blocks)."""
    dev, n4 = arrays.dev, ctypes.c_uint64(arrays.n // 4)
    blocks = blocks_for(arrays.n, config)
    kernel = f"stream_{method}_v{config.vectors}"
    a, b, c = (ctypes.c_uint64(x) for x in (arrays.a, arrays.b, arrays.c))
    if method == "read":
        args = (b, ctypes.c_uint64(arrays.partials(blocks)), n4)
    elif method == "write":
        args = (a, ctypes.c_float(fill_value), n4)
    elif method == "copy":
        args = (b, a, n4)
    elif method == "triad":
        args = (b, c, a, ctypes.c_float(scalar), n4)
    else:
        raise ValueError(f"unknown method {method!r}")
    return dev.launcher(kernel, blocks, config.threads, *args), blocks


def check(arrays: StreamArrays, method: str, blocks: int, scalar: float, fill_value: float) -> str:
    """``"ok"`` or what one run of ``method`` left wrong (the torch path's wording)."""
    dev = arrays.dev
    if method == "read":
        partials = dev.to_host(arrays.partials(blocks), array.array("f", bytes(4 * blocks)))
        value = sum(partials)  # each partial is a whole number below 2**24: the sum is exact
        if not value == arrays.b_sum:  # NaN (a block that never wrote) fails too
            return f"reduction gave {value:.9g}, expected {arrays.b_sum:.9g}"
        return "ok"
    counters = array.array("Q", [0, 2**64 - 1])
    dev.to_device(arrays.counters, counters)
    dev.launcher("stream_check", dev.helper_blocks(), HELPER_THREADS, ctypes.c_uint64(arrays.a),
                 ctypes.c_uint64(arrays.b), ctypes.c_uint64(arrays.c), ctypes.c_uint64(arrays.n),
                 ctypes.c_int(METHOD_MODE[method]), ctypes.c_float(fill_value), ctypes.c_float(scalar),
                 ctypes.c_uint64(arrays.counters))()
    wrong, first = dev.to_host(arrays.counters, counters)
    if not wrong:
        return "ok"
    got = _element(dev, arrays.a, first)
    want = fill_value if method == "write" else _element(dev, arrays.b, first)
    if method == "triad":
        want = want + scalar * _element(dev, arrays.c, first)
    return f"element {first} is {got}, expected {want}"


def _element(dev: StreamDevice, address: int, index: int) -> float:
    return dev.to_host(address + 4 * index, array.array("f", [0.0]))[0]


def open_device(vectors: tuple[int, ...]) -> StreamDevice:
    """:class:`StreamDevice`, every failure to set one up as :class:`CudaUnavailable`."""
    try:
        return StreamDevice(vectors)
    except CudaUnavailable:
        raise
    except CublasUnavailable as exc:  # no libcuda, or cuInit/the device/its context refused
        raise CudaUnavailable(str(exc)) from None
    except (OSError, RuntimeError, AttributeError, ValueError) as exc:
        raise CudaUnavailable(first_line(exc)) from None

