"""A wheel laid out as FlashInfer's prebuilt JIT cache is, for G1's split-wheel case.

    python devscripts/jit_cache_wheel.py OUT_DIR     # writes flashinfer_jit_cache-0.7.4+cu130-…-aarch64.whl

``flashinfer-jit-cache`` is not on PyPI (FlashInfer serves it from its own index,
https://flashinfer.ai/whl/cu130/, which this machine cannot reach), so the case is rebuilt from what
public reports show of it: one shared object per JIT module at
``flashinfer_jit_cache/jit_cache/<module>/<module>.so``, loaded by flashinfer-python by the module's
name on first use. The modules and their targets:

- ``moe_utils``: SM100-family cubins only (flashinfer-ai/flashinfer#5238: "a prebuilt moe_utils
  shared object that only contains SM100-family images"; the MoE routing dies with "no kernel
  image is available" on a Spark);
- ``fused_moe_120``: ``sm_120`` cubins (flashinfer-ai/flashinfer#3294: ``cuobjdump --list-elf
  fused_moe_120.so`` -> ``sm_120``), beside ``fused_moe_100`` (``sm_100a``, ``sm_103a``);
- ``fp4_gemm_cutlass_sm120``, ``gemm_sm120``: ``sm_120`` (the ``jit_cache/*120*/`` listing of #3294);
- ``fused_moe_trtllm_sm100``: ``sm_100a`` (a module named for datacenter Blackwell);
- a templated attention module (``batch_decode_…``) for ``sm_80 sm_90a sm_100a sm_120f``.

Each object is the tests' one-kernel source (tests/fixtures/fatbin/kernel.cu) built by nvcc 13.0 for
those targets, its host code cross-compiled for aarch64 (``aarch64-linux-gnu-g++``, Debian's
g++-aarch64-linux-gnu), as the wheel for a Spark is. The reader then reads it as it reads the real
wheels (``devscripts/g01_wheels.py site`` and ``record``).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests" / "fixtures" / "fatbin" / "kernel.cu"
VERSION = "0.7.4+cu130"
TAG = "cp39-abi3-manylinux_2_28_aarch64"
DECODE = ("batch_decode_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_"
          "head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False")
MODULES = {
    "moe_utils": ["100f"],
    "fused_moe_100": ["100a", "103a"],
    "fused_moe_120": ["120"],
    "fp4_gemm_cutlass_sm120": ["120"],
    "gemm_sm120": ["120"],
    "fused_moe_trtllm_sm100": ["100a"],
    DECODE: ["80", "90a", "100a", "120f"],
}
INIT = '''"""FlashInfer JIT cache: prebuilt JIT modules, found by flashinfer-python by module name."""

from pathlib import Path

jit_cache_dir = Path(__file__).parent / "jit_cache"

__version__ = "{version}"


def get_jit_cache_dir() -> str:
    return str(jit_cache_dir)
'''


def build(module: str, targets: list[str], out: Path) -> None:
    gencode = [f"-gencode=arch=compute_{t},code=sm_{t}" for t in targets]
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "none", "-ccbin", "aarch64-linux-gnu-g++",
                    "-I/usr/local/cuda/targets/x86_64-linux/include", *gencode, "-o", str(out), str(KERNEL)],
                   check=True)
    subprocess.run(["aarch64-linux-gnu-strip", str(out)], check=True)


def record_row(rel: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    info = f"flashinfer_jit_cache-{VERSION}.dist-info"
    files: dict[str, bytes] = {"flashinfer_jit_cache/__init__.py": INIT.format(version=VERSION).encode()}
    with tempfile.TemporaryDirectory() as tmp:
        for module, targets in MODULES.items():
            so = Path(tmp) / module / f"{module}.so"
            build(module, targets, so)
            files[f"flashinfer_jit_cache/jit_cache/{module}/{module}.so"] = so.read_bytes()
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: flashinfer-jit-cache\nVersion: {VERSION}\n"
                                 ).encode()
    files[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: devscripts/jit_cache_wheel.py\nTag: {TAG}\n".encode()
    rows = [record_row(rel, data) for rel, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    wheel = out_dir / f"flashinfer_jit_cache-{VERSION}-{TAG}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
