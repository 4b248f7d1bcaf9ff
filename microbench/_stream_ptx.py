"""The bandwidth probe's kernels as PTX: the helpers (init, check, sum) and the methods once per V
(float4s per thread), read from the package's data files ``ptx/stream_helpers.ptx`` and
``ptx/stream_v{V}.ptx``. devscripts/stream_ptx.py builds those files from stream_kernels.cu (nvcc,
PTX ISA lowered to 7.0, ptxas-checked for every architecture it names); they are not edited by hand.
Read through importlib.resources, so an installed wheel, a zipped one and a checkout find them alike.
"""

from __future__ import annotations

from importlib import resources

VS = (1, 2, 4, 8)  # the float4s per thread a module is built for


def ptx_text(name: str) -> str:
    """One data file's PTX (``stream_helpers.ptx``, ``stream_v8.ptx``)."""
    return resources.files(__package__).joinpath("ptx", name).read_text(encoding="ascii")


HELPERS = ptx_text("stream_helpers.ptx")
PTX: dict[int, str] = {v: ptx_text(f"stream_v{v}.ptx") for v in VS}
