"""Write the PyPI project names the tests check every fix's ``pip install NAME`` against.

    python devscripts/pypi_names.py /work/.library/env/packages/pypi.tsv > tests/fixtures/pypi_names.txt

The input is a list of PyPI's projects, tab-separated, a ``name`` column first (76 MB: too big
for the repository, and not there in CI). Kept are the names of the CUDA stack a fix may name
(``SELECT``): NVIDIA's and CUDA's wheels, the builds per CUDA major (cupy-cuda13x,
jax-cuda13-plugin …), the PyTorch family and the packages the judges name. A fix that names a
project outside ``SELECT`` fails tests/test_fix_texts.py until ``SELECT`` covers it and this
script is run again.
"""

from __future__ import annotations

import re
import sys

SELECT = re.compile(
    r"^(nvidia-|cuda-|cupy-cuda|jax-cuda|faiss-gpu|tensorrt-cu|transformer-engine|cudf-|cuvs-|pylibraft-|kvikio-"
    r"|cvcuda-|torch$|torchvision$|torchaudio$|ctranslate2$|bitsandbytes$|flash-attn$|unsloth$|unsloth-zoo$"
    r"|triton$|xformers$|sgl-kernel$|vllm$|safetensors$|pyyaml$)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(path: str) -> int:
    names = set()
    with open(path, encoding="utf-8", errors="replace") as fh:
        next(fh, None)  # the header line
        for line in fh:
            name = canonical(line.split("\t", 1)[0].strip())
            if SELECT.match(name):
                names.add(name)
    print(f"# PyPI project names the suite's fixes may name; from {path.rsplit('/', 1)[-1]} (2026-12-04) by")
    print("# python devscripts/pypi_names.py /work/.library/env/packages/pypi.tsv > tests/fixtures/pypi_names.txt")
    for name in sorted(names):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/work/.library/env/packages/pypi.tsv"))
