"""Attention on this GPU: does flash-attn import, run, and agree with torch's SDPA? (G2)

``spark-gotchas microbench attention`` (``python -m spark_gotchas.microbench attention``) prints
the JSON the suite judges. The same functions run as
tasks in the suite's GPU worker, so an import that segfaults (a flash-attn built for CUDA 12
on a CUDA 13 driver) ends only the worker, and the check reports the signal.

Agreement rule (the one flash-attn's own tests use): on the same random causal problem, the
largest absolute difference of flash-attn's output from an fp32 SDPA reference must be at most
twice that of torch's SDPA in the same low precision (and never below an absolute floor of
1e-3), and the output must be finite.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
import warnings
from typing import Any

from ._cli import ArgumentParser, first_line, in_span, print_json, require_torch

TOLERANCE_FACTOR = 2.0
TOLERANCE_FLOOR = 1e-3
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")


def _problem(seqlen: int, heads: int, head_dim: int, dtype_name: str, device: str = "cuda") -> tuple[Any, Any, Any]:
    """q, k, v in flash-attn's (batch, seq, heads, dim) layout, seeded."""
    import torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(0)
    shape = (1, seqlen, heads, head_dim)
    return tuple(torch.randn(shape, device=device, dtype=dtype, generator=gen) for _ in range(3))  # type: ignore[return-value]


def _sdpa(q: Any, k: Any, v: Any) -> Any:
    """torch SDPA on flash-attn's layout (SDPA wants (batch, heads, seq, dim))."""
    import torch.nn.functional as F

    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return out.transpose(1, 2)


def flash_attn_probe(seqlen: int = 256, heads: int = 4, head_dim: int = 64, dtype: str = "bfloat16",
                     device: str = "cuda") -> dict[str, Any]:
    """Import flash_attn the way Unsloth checks it, then run one causal call against SDPA.

    ``device="cpu"`` exists for the suite's tests (a stand-in flash_attn on a machine without a GPU).
    """
    out: dict[str, Any] = {"imported": False, "interface": None, "gpu_tried": False}
    t0 = time.perf_counter()
    try:
        module = importlib.import_module("flash_attn")
    except Exception as exc:  # ImportError: libcudart.so.12 …, undefined symbol …
        out["import_error"] = first_line(exc)
        return out
    out["imported"] = True
    out["import_seconds"] = time.perf_counter() - t0
    out["version"] = getattr(module, "__version__", None)
    # Unsloth (unsloth/models/_utils.py) sets HAS_FLASH_ATTENTION when one of these imports.
    for name in ("flash_attn_gpu", "flash_attn_cuda"):
        try:
            interface = importlib.import_module("flash_attn.flash_attn_interface")
            getattr(interface, name)
            out["interface"] = name
            break
        except Exception as exc:
            out["interface_error"] = first_line(exc)
    import torch

    if device == "cuda":
        if not torch.cuda.is_available():
            out["gpu_reason"] = "torch sees no CUDA device"
            return out
        out["device"] = torch.cuda.get_device_name(0)
        out["capability"] = list(torch.cuda.get_device_capability(0))
    else:
        out["device"] = device
    out["dtype"] = dtype
    out["shape"] = [1, seqlen, heads, head_dim]
    out["gpu_tried"] = True
    try:
        from flash_attn import flash_attn_func

        q, k, v = _problem(seqlen, heads, head_dim, dtype, device)
        reference = _sdpa(q.float(), k.float(), v.float())
        sdpa = _sdpa(q, k, v)
        t1 = time.perf_counter()
        flash = flash_attn_func(q, k, v, causal=True)
        if device == "cuda":
            torch.cuda.synchronize()
        out["call_seconds"] = time.perf_counter() - t1
    except Exception as exc:  # "no kernel image is available", "FlashAttention only supports …"
        out["gpu_error"] = first_line(exc)
        return out
    out["finite"] = bool(torch.isfinite(flash).all().item())
    out["max_abs_err_flash"] = float((flash.float() - reference).abs().max().item())
    out["max_abs_err_sdpa"] = float((sdpa.float() - reference).abs().max().item())
    out["tolerance"] = max(TOLERANCE_FACTOR * out["max_abs_err_sdpa"], TOLERANCE_FLOOR)
    return out


def sdpa_backends(seqlen: int = 128, heads: int = 4, head_dim: int = 64, dtype: str = "bfloat16",
                  warm_in_threads: bool = False) -> dict[str, Any]:
    """Which SDPA backends torch has enabled, and which of them run a tiny call on cuda:0.

    A backend's first call loads its library and kernels (cuDNN's, cuBLAS's for the math backend:
    about 1 s cold in all). ``warm_in_threads`` makes those first calls at once, a thread per
    backend, through each backend's own operator where torch's own test says the backend can take
    the problem; then every backend is called one by one as before, through
    ``scaled_dot_product_attention`` with only that backend allowed, and that call alone decides
    what ``ran`` says. (``sdpa_kernel`` sets process-wide flags, so it cannot run in threads.)
    """
    import torch

    cuda = torch.backends.cuda
    enabled = {
        "flash": bool(cuda.flash_sdp_enabled()),
        "efficient": bool(cuda.mem_efficient_sdp_enabled()),
        "math": bool(cuda.math_sdp_enabled()),
    }
    if hasattr(cuda, "cudnn_sdp_enabled"):
        enabled["cudnn"] = bool(cuda.cudnn_sdp_enabled())
    out: dict[str, Any] = {"torch": torch.__version__, "enabled": enabled, "ran": {}, "seconds": {}}
    if not torch.cuda.is_available():
        out["gpu_reason"] = "torch sees no CUDA device"
        return out
    out["device"] = torch.cuda.get_device_name(0)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kinds = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
    q, k, v = _problem(seqlen, heads, head_dim, dtype)
    if warm_in_threads:
        out["warm_seconds"] = _warm_in_threads(torch, q, k, v)
    for name in SDPA_BACKENDS:
        backend = getattr(SDPBackend, kinds[name], None)
        if backend is None:
            out["ran"][name] = "not in this torch"
            continue
        began = time.perf_counter()  # a backend's first call loads its library and kernels (cold: ~1 s)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel(backend):
                    result = _sdpa(q, k, v)
                torch.cuda.synchronize()
            out["ran"][name] = "ok" if bool(torch.isfinite(result).all().item()) else "non-finite output"
        except Exception as exc:
            out["ran"][name] = first_line(exc, 160)
        out["seconds"][name] = round(time.perf_counter() - began, 4)
    return out


def _warm_in_threads(torch: Any, q: Any, k: Any, v: Any) -> dict[str, Any]:
    """Each backend's first call in a thread of its own (results and errors ignored: the calls that
    count come after); per backend the seconds it took, or why it was not warmed."""
    import threading

    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # SDPA's (batch, heads, seq, dim)
    cuda, aten = torch.backends.cuda, torch.ops.aten
    try:
        params = cuda.SDPAParams(q, k, v, None, 0.0, True, False)
    except Exception as exc:  # an older torch: no warm-up, the calls below load what they need
        return {"all": first_line(exc, 120)}
    calls = {  # backend -> (torch's own test of the problem, the backend's operator)
        "flash": ("can_use_flash_attention", lambda: aten._scaled_dot_product_flash_attention(q, k, v, is_causal=True)),
        "efficient": ("can_use_efficient_attention",
                      lambda: aten._scaled_dot_product_efficient_attention(q, k, v, None, False, is_causal=True)),
        "cudnn": ("can_use_cudnn_attention",
                  lambda: aten._scaled_dot_product_cudnn_attention(q, k, v, None, False, is_causal=True)),
        "math": (None, lambda: aten._scaled_dot_product_attention_math(q, k, v, is_causal=True)),
    }
    took: dict[str, Any] = {}

    def warm(name: str) -> None:
        test, call = calls[name]
        began = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if test is not None and not getattr(cuda, test)(params, False):
                    took[name] = "not for this problem"
                    return
                call()
            took[name] = round(time.perf_counter() - began, 4)
        except Exception as exc:
            took[name] = first_line(exc, 120)

    threads = [threading.Thread(target=warm, args=(name,), name=f"sdpa-warm-{name}", daemon=True) for name in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # a warm call's kernel failed: the calls below meet it again and say so
        took["synchronize"] = first_line(exc, 120)
    return took


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="spark-gotchas microbench attention", description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=in_span(1, 1 << 20, integer=True), default=256)
    parser.add_argument("--heads", type=in_span(1, 1024, integer=True), default=4)
    parser.add_argument("--head-dim", type=in_span(1, 1024, integer=True), default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    parser.add_argument("--json", action="store_true", help="print JSON (what this prints either way)")
    args = parser.parse_args(argv)
    if not require_torch():
        return 2
    report = {
        "sdpa": sdpa_backends(dtype=args.dtype),
        "flash_attn": flash_attn_probe(args.seqlen, args.heads, args.head_dim, args.dtype)
        if importlib.util.find_spec("flash_attn") is not None else {"installed": False},
    }
    print_json(report)
    return 0
