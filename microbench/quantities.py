"""Units and physical ranges of measured figures, declared with the field that holds them.

``gbps: Optional[GBps] = None`` says the field is GB/s and that a bandwidth lies between 0 and
100 TB/s. The suite builds every typed reading from JSON (a live run's and a replayed snapshot's
alike) and checks each value against its field's :class:`Bound`: a negative bandwidth, a clock of
10^9 MHz or a temperature of 5000 °C makes the reading unavailable, naming the field, instead of
being judged as if measured. The types stay plain ``float``/``int`` to Python and to the code
that measures them; only the annotation carries the unit and the range.

A leaf module of the standard library only, so the measurements (which import nothing of the
suite) and the suite's reading types declare their fields the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional


@dataclass(frozen=True)
class Bound:
    """The unit of a figure and the range a real measurement of it falls in (ends included)."""

    unit: str
    lo: Optional[float] = None
    hi: Optional[float] = None

    def problem(self, value: float) -> Optional[str]:
        """Why ``value`` cannot be a real measurement of this figure, in a few words; None if it can."""
        unit = f" {self.unit}" if self.unit else ""
        if self.lo is not None and value < self.lo:
            return f"{_num(value)}{unit} is below {_num(self.lo)}{unit}"
        if self.hi is not None and value > self.hi:
            return f"{_num(value)}{unit} is above {_num(self.hi)}{unit}"
        return None


def _num(value: float) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


U64 = (1 << 64) - 1  # the widest counter a driver or the kernel reports

# The quantities of the suite's readings. A range is what a real machine can show, wide on purpose:
# it refuses what cannot be a measurement (a sign, an order of magnitude), never a fast machine.
GBps = Annotated[float, Bound("GB/s", 0.0, 1e5)]  # memory, interconnect and disk bandwidth
TFlops = Annotated[float, Bound("TFLOP/s", 0.0, 1e5)]
MHz = Annotated[float, Bound("MHz", 0.0, 1e5)]
IntMHz = Annotated[int, Bound("MHz", 0, 10**5)]  # NVML's clocks, whole MHz
Celsius = Annotated[float, Bound("°C", -100.0, 300.0)]
Watts = Annotated[float, Bound("W", 0.0, 1e5)]
Milliwatts = Annotated[int, Bound("mW", 0, 10**8)]
Percent = Annotated[float, Bound("%", 0.0, 100.0)]  # a utilization
IntPercent = Annotated[int, Bound("%", 0, 100)]
Fraction = Annotated[float, Bound("", 0.0, 1.0)]  # a share of a whole
Ratio = Annotated[float, Bound("x", 0.0, 1e6)]  # a non-negative multiple of something
Bytes = Annotated[int, Bound("bytes", 0, U64)]
Count = Annotated[int, Bound("", 0, U64)]
Seconds = Annotated[float, Bound("s", 0.0, 1e9)]  # a duration (30 years at most)
Milliseconds = Annotated[float, Bound("ms", 0.0, 1e12)]
Microseconds = Annotated[float, Bound("µs", 0.0, float(U64))]  # cumulative driver counters
Epoch = Annotated[float, Bound("s", 0.0, 1e11)]  # a wall-clock time: seconds since 1970
IntEpoch = Annotated[int, Bound("s", 0, 10**11)]  # the kernel's boot time (/proc/stat btime)

# A field whose name ends so holds that quantity: the suite's reading types declare it (a test keeps
# names and declarations the same), and the tools that read documents by name (diff, fleet) check
# a value found under such a name against it.
BY_SUFFIX: dict[str, Bound] = {
    "_gbps": GBps.__metadata__[0], "_tflops": TFlops.__metadata__[0], "_mhz": MHz.__metadata__[0],
    "_c": Celsius.__metadata__[0], "_w": Watts.__metadata__[0], "_mw": Milliwatts.__metadata__[0],
    "_pct": Percent.__metadata__[0], "_bytes": Bytes.__metadata__[0], "_us": Microseconds.__metadata__[0],
    "_epoch": Epoch.__metadata__[0], "_seconds": Seconds.__metadata__[0], "_s": Seconds.__metadata__[0],
    "_fraction": Fraction.__metadata__[0],
}

BARE = {"gbps": BY_SUFFIX["_gbps"], "tflops": BY_SUFFIX["_tflops"], "seconds": BY_SUFFIX["_seconds"]}


def bound_of_name(name: str) -> Optional[Bound]:
    """The quantity a field's name declares (``read_gbps``: GB/s; ``gbps`` alone too); None if none."""
    if name in BARE:
        return BARE[name]
    return next((bound for suffix, bound in BY_SUFFIX.items() if name.endswith(suffix) and name != suffix), None)
