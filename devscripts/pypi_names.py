"""Write the PyPI project names the suite checks names against, from a list of PyPI's projects.

    python devscripts/pypi_names.py /work/.library/env/packages/pypi.tsv > tests/fixtures/pypi_names.txt
    python devscripts/pypi_names.py --builds /work/.library/env/packages/pypi.tsv > spark_gotchas/knowledge/readings/cuda_builds.py

The input is a list of PyPI's projects, tab-separated, a ``name`` column first (76 MB: too big
for the repository, and not there in CI).

Without ``--builds``: the names of the CUDA stack a fix may name (``SELECT``), for the tests: NVIDIA's
and CUDA's wheels, the builds per CUDA major (cupy-cuda13x, jax-cuda13-plugin …), the PyTorch family
and the packages the judges name. A fix that names a project outside ``SELECT`` fails
tests/test_fix_texts.py until ``SELECT`` covers it and this script is run again.

With ``--builds``: the module G1 reads at run time (no network) to find a package's build for another
CUDA major: every project whose name carries a CUDA major by the patterns of
``cuda_libs.MAJOR_IN_NAME`` (cudf-cu13, cupy-cuda13x, nvidia-dali-cuda130, jax-cuda13-plugin).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_gotchas.knowledge.readings.cuda_libs import MAJOR_IN_NAME  # noqa: E402

SELECT = re.compile(
    r"^(nvidia-|cuda-|cupy-cuda|jax-cuda|faiss-gpu|tensorrt-cu|transformer-engine|cudf-|cuvs-|pylibraft-|kvikio-"
    r"|cvcuda-|libcudf-|torch$|torchvision$|torchaudio$|ctranslate2$|bitsandbytes$|flash-attn$|unsloth$|unsloth-zoo$"
    r"|triton$|xformers$|sgl-kernel$|vllm$|safetensors$|pyyaml$|tensorflow$|open3d$|paddlepaddle-gpu$|xgboost$)")
DATE = "2026-12-05"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_names(path: str) -> set[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        next(fh, None)  # the header line
        return {canonical(line.split("\t", 1)[0].strip()) for line in fh}


def main(argv: list[str]) -> int:
    builds = "--builds" in argv
    args = [a for a in argv if a != "--builds"]
    path = args[0] if args else "/work/.library/env/packages/pypi.tsv"
    names = read_names(path)
    source = path.rsplit("/", 1)[-1]
    if builds:
        kept = sorted(n for n in names if any(10 <= int(m.group(2)) <= 19 for m in MAJOR_IN_NAME.finditer(n)))
        print(f'"""PyPI projects whose names carry a CUDA major (cudf-cu13, cupy-cuda13x, nvidia-dali-cuda130):\n'
              f"what G1 checks a package's build for another CUDA major against, without the network. Written\n"
              f"from {source} ({DATE}) by python devscripts/pypi_names.py --builds; do not edit by hand.\n"
              f'"""\n\nNAMES = frozenset("""')
        for name in kept:
            print(name)
        print('""".split())')
        return 0
    print(f"# PyPI project names the suite's fixes may name; from {source} ({DATE}) by")
    print("# python devscripts/pypi_names.py /work/.library/env/packages/pypi.tsv > tests/fixtures/pypi_names.txt")
    for name in sorted(n for n in names if SELECT.match(n)):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
