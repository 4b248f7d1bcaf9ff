"""A GEMM load through the CUDA driver API and cuBLAS alone (ctypes): no torch import.

Why: ``import torch`` takes 3-5 s, and the preflight's G4 spot check needs only a GEMM, device
memory and CUDA events. Through libcuda and libcublas directly, the load starts within a second
of the process, so it runs while the GPU worker is still importing torch.

The libraries are the environment's own: cuBLAS from the NVIDIA wheels torch installed
(``site-packages/nvidia/*/lib``), then the dynamic linker's search path (``ldconfig``), then
``/usr/local/cuda``. Nothing here is installed or downloaded. Where no cuBLAS loads, or the driver
refuses it, :class:`CublasUnavailable` says why and the caller falls back to torch.

Device 0 is the first device CUDA sees (``CUDA_VISIBLE_DEVICES`` applies, as it does for torch).
"""

from __future__ import annotations

import array
import ctypes
import ctypes.util
import glob
import importlib.util
import os

CUDA_SUCCESS = 0
CUBLAS_STATUS_SUCCESS = 0
CUBLAS_OP_N = 0
CUBLAS_GEMM_DEFAULT = -1
# cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h)
DATA_TYPES = {"bf16": (14, 2), "fp16": (2, 2), "fp32": (0, 4)}  # dtype -> (cudaDataType, bytes per element)
CUBLAS_COMPUTE_32F = 68
# Random values in +-[0.5, 2): random sign and mantissa, exponent fixed to two values (no NaN, no Inf):
# bits outside the mask are random, the OR sets the exponent's upper bits. e4m3 (S.EEEE.MMM, bias 7):
# exponent field 6 or 7, so never S.1111.111 (its NaN) and at most 1.875.
VALUE_BITS = {"bf16": ("H", 0x80FF, 0x3F00), "fp16": ("H", 0x87FF, 0x3800), "fp32": ("I", 0x80FFFFFF, 0x3F000000),
              "e4m3": ("B", 0x8F, 0x30)}
FILL_BLOCK_ELEMENTS = (1 << 18) + 7  # random block tiled over each matrix; odd so rows do not repeat


def random_block(dtype: str, elements: int) -> array.array:
    """``elements`` random values of ``dtype`` (raw bits), each in +-[0.5, 2): never zero, NaN or Inf."""
    code, mask, bits = VALUE_BITS[dtype]
    raw = array.array(code, os.urandom(elements * array.array(code).itemsize))
    return array.array(code, [(x & mask) | bits for x in raw])


class CublasUnavailable(RuntimeError):
    """No usable libcuda/libcublas here (or the driver refused them): use torch instead."""


def _site_library_dirs() -> list[str]:
    """``lib`` folders of the NVIDIA wheels (nvidia-cublas …) without importing torch."""
    dirs: list[str] = []
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        dirs += sorted(glob.glob(os.path.join(root, "*", "lib")))
    try:
        torch_spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        torch_spec = None
    if torch_spec is not None and torch_spec.origin:
        dirs.append(os.path.join(os.path.dirname(torch_spec.origin), "lib"))
    return dirs


def cublas_candidates() -> list[str]:
    """Paths (or sonames) of libcublas to try, best first: the environment's wheels, ldconfig, CUDA."""
    found: list[str] = []
    for folder in _site_library_dirs():
        found += sorted(glob.glob(os.path.join(folder, "libcublas.so.*")), reverse=True)
    name = ctypes.util.find_library("cublas")
    if name:
        found.append(name)
    for folder in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/sbsa-linux/lib",
                   "/usr/local/cuda/targets/x86_64-linux/lib"):
        found += sorted(glob.glob(os.path.join(folder, "libcublas.so.*")), reverse=True)
    return list(dict.fromkeys(found))


class Driver:
    """The few CUDA driver calls the load needs, with errors as exceptions naming the call."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise CublasUnavailable(f"libcuda.so.1 not loadable: {exc}") from None

    def __call__(self, name: str, *args) -> None:
        self.check(name, getattr(self.lib, name)(*args))

    def check(self, name: str, rc: int) -> None:
        """Raise for a call's result code other than CUDA_SUCCESS, naming the call and the error."""
        if rc != CUDA_SUCCESS:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(text))
            raise RuntimeError(f"{name} failed: {text.value.decode() if text.value else rc} ({rc})")


def open_primary_context(driver: Driver) -> tuple[ctypes.c_int, ctypes.c_void_p]:
    """Device 0 and its primary context, made current (the context torch would use too); release it with
    ``cuDevicePrimaryCtxRelease_v2(device)``."""
    try:
        driver("cuInit", 0)
        device = ctypes.c_int()
        driver("cuDeviceGet", ctypes.byref(device), 0)
        context = ctypes.c_void_p()
        driver("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    except RuntimeError as exc:
        raise CublasUnavailable(str(exc)) from None
    try:
        driver("cuCtxSetCurrent", context)
    except RuntimeError as exc:
        driver.lib.cuDevicePrimaryCtxRelease_v2(device)
        raise CublasUnavailable(str(exc)) from None
    return device, context


# CUdevice_attribute numbers (cuda.h)
DEVICE_ATTRIBUTES = {"sms": 16, "integrated": 18, "l2_bytes": 38, "major": 75, "minor": 76}


def device_attribute(driver: Driver, device: ctypes.c_int, name: str) -> int:
    """One of DEVICE_ATTRIBUTES of ``device``, from the driver."""
    value = ctypes.c_int()
    driver("cuDeviceGetAttribute", ctypes.byref(value), DEVICE_ATTRIBUTES[name], device)
    return int(value.value)


def device_identity(driver: Driver, device: ctypes.c_int) -> tuple[str, tuple[int, int]]:
    """The device's name and compute capability, from the driver."""
    name = ctypes.create_string_buffer(256)
    driver("cuDeviceGetName", name, 256, device)
    return name.value.decode(errors="replace"), (device_attribute(driver, device, "major"),
                                                 device_attribute(driver, device, "minor"))


class DeviceSession:
    """Device 0's primary context and the device memory taken in it, every buffer freed and the context
    released by :meth:`release`, whatever failed in between. Shaped as a ``_timing.bench`` clock."""

    def __init__(self) -> None:
        self.driver = Driver()
        self.device, self.context = open_primary_context(self.driver)
        self._buffers: list[int] = []

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self.driver("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        self._buffers.append(ptr.value)
        return ptr.value

    def free(self, address: int) -> None:
        if address in self._buffers:
            self._buffers.remove(address)
            self.driver.lib.cuMemFree_v2(ctypes.c_uint64(address))

    def event(self) -> Event:
        return Event(self.driver)

    def synchronize(self) -> None:
        self.driver("cuCtxSynchronize")

    def release(self) -> None:
        """Free every buffer and release the primary context (each once)."""
        for address in list(self._buffers):
            self.free(address)
        if self.device is not None:
            self.driver.lib.cuDevicePrimaryCtxRelease_v2(self.device)
            self.device = None


def load_cublas_pair(path: str) -> tuple[ctypes.CDLL, ctypes.CDLL | None]:
    """libcublas at ``path`` and its libcublasLt sibling, the sibling loaded first (RTLD_GLOBAL) so the pair
    matches whatever the search path holds; the sibling is None where no such file is beside it."""
    lt_path = os.path.join(os.path.dirname(path), os.path.basename(path).replace("libcublas", "libcublasLt"))
    lt = ctypes.CDLL(lt_path, mode=ctypes.RTLD_GLOBAL) if os.path.isfile(lt_path) else None
    return ctypes.CDLL(path), lt


def fill_tiled(driver: Driver, address: int, block: array.array, elements: int) -> None:
    """Fill ``elements`` values at device ``address`` with ``block`` repeated: element L is
    ``block[L % len(block)]`` (the host check reads operands back from that rule, not from the device)."""
    itemsize = block.itemsize
    block_bytes = min(len(block), elements) * itemsize
    driver("cuMemcpyHtoD_v2", ctypes.c_uint64(address), ctypes.c_void_p(block.buffer_info()[0]),
           ctypes.c_size_t(block_bytes))
    done, total = block_bytes, elements * itemsize
    while done < total:  # double the filled prefix: log2(total / block) copies on the device
        step = min(done, total - done)
        driver("cuMemcpyDtoD_v2", ctypes.c_uint64(address + done), ctypes.c_uint64(address), ctypes.c_size_t(step))
        done += step


class Event:
    """A CUDA event on the default stream, shaped like torch.cuda.Event for the load loop."""

    def __init__(self, driver: Driver):
        self._driver = driver
        self.handle = ctypes.c_void_p()
        driver("cuEventCreate", ctypes.byref(self.handle), 0)

    def record(self) -> None:
        self._driver("cuEventRecord", self.handle, None)

    def synchronize(self) -> None:
        self._driver("cuEventSynchronize", self.handle)

    def elapsed_time(self, end: Event) -> float:
        ms = ctypes.c_float()
        self._driver("cuEventElapsedTime", ctypes.byref(ms), self.handle, end.handle)
        return float(ms.value)

    def __del__(self) -> None:
        try:
            self._driver.lib.cuEventDestroy_v2(self.handle)
        except Exception:
            pass


class CublasGemm:
    """N x N GEMMs (C = A B) in device memory of device 0, through cuBLAS's cublasGemmEx."""

    events_time_the_gpu = True

    def __init__(self, dtype: str = "bf16"):
        if dtype not in DATA_TYPES:
            raise ValueError(f"unknown dtype {dtype!r}")
        self.dtype = dtype
        self.cuda_type, self.itemsize = DATA_TYPES[dtype]
        self.driver = Driver()
        d = self.driver
        self.device, self.context = open_primary_context(d)
        self._buffers: list[ctypes.c_uint64] = []
        self.handle = None
        self.n = 0
        try:
            name = ctypes.create_string_buffer(256)
            d("cuDeviceGetName", name, 256, self.device)
            self.name = name.value.decode(errors="replace")
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            d("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
            self.free_bytes = int(free.value)
            self.library, self.cublas, self.handle = self._open_cublas()
        except Exception:
            self.close()  # the context retained above is released again
            raise

    def _open_cublas(self) -> tuple[str, ctypes.CDLL, ctypes.c_void_p]:
        problems = []
        for path in cublas_candidates():
            try:
                lib, _lt = load_cublas_pair(path)
                handle = ctypes.c_void_p()
                status = lib.cublasCreate_v2(ctypes.byref(handle))
                if status == CUBLAS_STATUS_SUCCESS:
                    return path, lib, handle
                problems.append(f"{path}: cublasCreate status {status}")
            except (OSError, AttributeError) as exc:
                problems.append(f"{path}: {exc}")
        raise CublasUnavailable("no usable cuBLAS: " + ("; ".join(problems[:3]) or "none found"))

    def allocate(self, n: int) -> None:
        """A and B random, C empty, each N x N."""
        self.n = n
        nbytes = n * n * self.itemsize
        for _ in range(3):
            ptr = ctypes.c_uint64()
            self.driver("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
            self._buffers.append(ptr)
        for ptr in self._buffers[:2]:
            self._fill_random(ptr, n * n)

    def _fill_random(self, ptr: ctypes.c_uint64, elements: int) -> None:
        fill_tiled(self.driver, ptr.value, random_block(self.dtype, FILL_BLOCK_ELEMENTS), elements)

    def gemm(self) -> None:
        n, t = self.n, self.cuda_type
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        a, b, c = (ctypes.c_void_p(p.value) for p in self._buffers)
        status = self.cublas.cublasGemmEx(self.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, ctypes.byref(alpha),
                                          a, t, n, b, t, n, ctypes.byref(beta), c, t, n,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
        if status != CUBLAS_STATUS_SUCCESS:
            raise RuntimeError(f"cublasGemmEx failed: status {status}")

    def event(self) -> Event:
        return Event(self.driver)

    def synchronize(self) -> None:
        self.driver("cuCtxSynchronize")

    def close(self) -> None:
        lib = self.driver.lib
        for ptr in self._buffers:
            lib.cuMemFree_v2(ptr)
        self._buffers = []
        if self.handle is not None:
            self.cublas.cublasDestroy_v2(self.handle)
            self.handle = None
        lib.cuDevicePrimaryCtxRelease_v2(self.device)
