"""Rebuild microbench/ptx/*.ptx (the bandwidth probe's PTX, package data that microbench/_stream_ptx.py
reads) from microbench/stream_kernels.cu.

    python devscripts/stream_ptx.py            # needs nvcc and ptxas (CUDA 12.8 or later: sm_121)
    python devscripts/stream_ptx.py --check    # exit 1 if a committed file differs from a rebuild

One module per V (float4s per thread) and one of the helpers (init, check, sum). nvcc targets compute_75 (the oldest CUDA 13 knows); the
``.version`` line is lowered to 7.0, the PTX ISA of CUDA 11.0, so older drivers load it too (the
kernels use nothing newer), and ptxas must then compile each module for every ARCHS entry.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "microbench" / "stream_kernels.cu"
TARGET = ROOT / "microbench" / "ptx"
VS = (1, 2, 4, 8)  # as microbench/_stream_ptx.py reads them
PTX_ISA = "7.0"
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_121")


def build(define: str, tmp: Path) -> str:
    """The module nvcc builds with ``-D{define}``, its ISA lowered, after ptxas compiled it for every ARCHS."""
    name = define.replace("=", "")
    out = tmp / f"{name}.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=compute_75", "-O3", f"-D{define}", "-o", str(out), str(SOURCE)],
                   check=True)
    text = out.read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("//"))  # build ids, demotions
    text = re.sub(r"^\.version \d+\.\d+$", f".version {PTX_ISA}", text, count=1, flags=re.M).strip() + "\n"
    lowered = tmp / f"{name}-isa.ptx"
    lowered.write_text(text)
    for arch in ARCHS:
        subprocess.run(["ptxas", f"-arch={arch}", "-O3", str(lowered), "-o", str(tmp / f"{name}-{arch}.cubin")],
                       check=True)
    return text


def render(helpers: str, modules: dict[int, str]) -> dict[str, str]:
    """File name -> PTX text: the data files microbench/_stream_ptx.py reads."""
    return {"stream_helpers.ptx": helpers, **{f"stream_v{v}.ptx": text for v, text in modules.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = parser.parse_args()
    missing = [tool for tool in ("nvcc", "ptxas") if shutil.which(tool) is None]
    if missing:
        print(f"stream_ptx.py: {' and '.join(missing)} not found (CUDA 12.8 or later, for sm_121)", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory() as tmp:
            files = render(build("STREAM_HELPERS", Path(tmp)), {v: build(f"STREAM_V={v}", Path(tmp)) for v in VS})
    except subprocess.CalledProcessError as exc:
        print(f"stream_ptx.py: {' '.join(exc.cmd)} exited {exc.returncode}", file=sys.stderr)
        return 1
    if args.check:
        differ = [name for name, text in files.items()
                  if not (TARGET / name).exists() or (TARGET / name).read_text() != text]
        print(f"{TARGET.relative_to(ROOT)}: " + (f"differs from a rebuild: {', '.join(differ)}" if differ else "up to date"))
        return 1 if differ else 0
    TARGET.mkdir(exist_ok=True)
    for name, text in files.items():
        (TARGET / name).write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}/: {', '.join(files)} ({sum(map(len, files.values()))} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
