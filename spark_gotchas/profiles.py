"""Platform profiles: what each GPU is expected to do, as data (figures from spark-facts.md).

A profile holds ranges, not points, and says where each figure came from. ``generic`` has no
figures of its own: judges then use what NVML reports about the device (e.g. theoretical
bandwidth = max memory clock x bus width x 2 / 8) or say the figure is unknown. ``none`` is
what ``auto`` picks on a machine without an NVIDIA GPU.

:class:`Machine` says whether the machine whose live state a run reads is the platform the
profile describes (``--spark-profile gb10`` on a CI box is not): :func:`spark_gotchas.platform.machine`
decides it, the judges of live state take it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

CHOICES = ("auto", "gb10", "h100", "h200", "gh200", "generic")


@dataclass(frozen=True)
class Range:
    """A measured range ``lo``-``hi`` (units in the field name), with its source."""

    lo: float
    hi: float
    source: str = ""


@dataclass(frozen=True)
class Profile:
    key: str
    title: str
    a_name: str = ""  # "a GB10": the platform in a sentence
    owner: str = ""  # "a Spark's": whose memory, clocks, processes the judges speak of
    name_patterns: tuple[str, ...] = ()
    pci_device_ids: tuple[str, ...] = ()  # sysfs "device" values (0x2e12): a GPU known while hidden from CUDA
    capability: Optional[tuple[int, int]] = None
    unified_memory: bool = False
    memory_note: str = ""
    cuda_major: Optional[int] = None  # expected driver CUDA major when no driver can be read
    gpus_per_node: Optional[int] = None
    l2_bytes: Optional[int] = None
    datasheet_bandwidth_gbps: Optional[float] = None
    bandwidth_gbps: dict[str, Range] = field(default_factory=dict)  # per method: copy/read/write/triad
    sm_clock_floor_mhz: Optional[float] = None  # under load below this = stuck / sick
    max_sm_clock_mhz: Optional[float] = None
    rated_power_w: Optional[float] = None
    rated_power_note: str = ""
    sustained_power_w: Optional[Range] = None
    gemm_tflops: dict[str, Range] = field(default_factory=dict)
    memory_total_bytes: Optional[int] = None  # what one GPU can hold (GB10: the whole unified pool)
    fp4_arch: Optional[str] = None  # the arch-specific target FP4 kernels need
    link_busbw_gbps: Optional[Range] = None  # expected all-reduce bus bandwidth between nodes
    notes: tuple[str, ...] = ()

    @property
    def has_gpu(self) -> bool:
        return self.key != "none"

    @property
    def memory_kind(self) -> str:
        """"unified" (one pool: GB10, GH200), "discrete" (the GPU's own memory) or "none" (no GPU)."""
        if not self.has_gpu:
            return "none"
        return "unified" if self.unified_memory else "discrete"


GB10 = Profile(
    key="gb10",
    title="NVIDIA GB10 (DGX Spark)",
    a_name="a GB10",
    owner="a Spark's",
    name_patterns=("GB10",),
    pci_device_ids=("0x2e12",),  # 10de:2e12 in a public Spark readiness report (driver 580.142)
    capability=(12, 1),
    unified_memory=True,
    memory_note="one 128 GB LPDDR5X pool shared by CPU and GPU (MemTotal ~121.7 GiB)",
    cuda_major=13,
    gpus_per_node=1,
    l2_bytes=24 * 1024 * 1024,
    memory_total_bytes=130_663_821_312,  # torch total_memory = MemTotal 127,601,388 kB (121.7 GiB)
    datasheet_bandwidth_gbps=273.0,
    bandwidth_gbps={
        "copy": Range(180.0, 210.0, "public GB10 copy figures, read+write counted"),
        "read": Range(231.0, 253.0, "public GB10 read-only kernels"),
        "write": Range(180.0, 253.0, "no public fill figure; bounded by copy and read"),
        "triad": Range(180.0, 210.0, "no public triad figure; taken as copy's range"),
    },
    sm_clock_floor_mhz=1400.0,
    max_sm_clock_mhz=3003.0,
    rated_power_w=240.0,
    rated_power_note="240 W is the external USB-C brick, not a GPU TDP; the GPU rail settles near 100 W",
    sustained_power_w=Range(44.0, 105.0, "NVML GPU rail under load, public readings"),
    gemm_tflops={
        "bf16": Range(94.0, 98.0, "cuBLASLt FP16/BF16 at 4k-8k, public"),
        "fp8": Range(175.0, 187.0, "cuBLASLt FP8 at 4k-8k, public"),
    },
    fp4_arch="sm_121a",
    link_busbw_gbps=Range(20.0, 24.0, "two Sparks over ConnectX-7 with both HCAs and MTU 9000"),
    notes=("nvmlDeviceGetMemoryInfo raises NotSupported (documented known issue)",),
)

H200 = Profile(
    key="h200",
    title="NVIDIA H200",
    a_name="an H200",
    owner="an H200's",
    name_patterns=("H200",),
    pci_device_ids=("0x2335",),  # read from sysfs on the H200 measured here
    capability=(9, 0),
    gpus_per_node=8,
    l2_bytes=60 * 1024 * 1024,
    memory_total_bytes=150_754_820_096,  # NVML memory total of the H200 measured here
    datasheet_bandwidth_gbps=4800.0,
    bandwidth_gbps={
        "copy": Range(3965.0, 4300.0, "BabelStream copy / torch copy, one H200 measured here"),
        "read": Range(4264.0, 4400.0, "torch sum / BabelStream dot, one H200 measured here"),
        "write": Range(4583.0, 4660.0, "torch fill, one H200 measured here"),
        "triad": Range(4357.0, 4362.0, "BabelStream / torch triad, one H200 measured here"),
    },
    max_sm_clock_mhz=1980.0,
    rated_power_w=700.0,
    gemm_tflops={
        "bf16": Range(763.0, 798.0, "torch 8192^3, one H200 measured here"),
        "fp8": Range(1290.0, 1290.0, "torch._scaled_mm 8192^3, one H200 measured here"),
    },
)

H100 = Profile(
    key="h100",
    title="NVIDIA H100 SXM",
    a_name="an H100",
    owner="an H100's",
    name_patterns=("H100",),
    capability=(9, 0),
    gpus_per_node=8,
    l2_bytes=50 * 1024 * 1024,
    datasheet_bandwidth_gbps=3350.0,
    max_sm_clock_mhz=1980.0,
    rated_power_w=700.0,
    notes=("bandwidth ranges not measured by this suite: judged against NVML's theoretical peak",),
)

GH200 = Profile(
    key="gh200",
    title="NVIDIA GH200 Grace Hopper",
    a_name="a GH200",
    owner="a GH200's",
    name_patterns=("GH200",),
    capability=(9, 0),
    unified_memory=True,
    memory_note="HBM on the GPU plus the Grace CPU's LPDDR5X, coherent over NVLink-C2C",
    gpus_per_node=1,
    l2_bytes=60 * 1024 * 1024,
    datasheet_bandwidth_gbps=4000.0,
    max_sm_clock_mhz=1980.0,
    notes=("bandwidth ranges not measured by this suite: judged against NVML's theoretical peak",),
)

GENERIC = Profile(key="generic", title="a GPU without a profile (figures from NVML)",
                  a_name="a machine with an NVIDIA GPU", owner="a GPU machine's")
NONE = Profile(key="none", title="no NVIDIA GPU", a_name="a machine without a GPU", owner="such a machine's")

@dataclass(frozen=True)
class Machine:
    """Whether the machine whose live state is read (memory, clocks, bandwidth, processes) is the
    platform the profile describes, and if not, what it has instead (``no GPU``, ``NVIDIA H200``).

    A profile asked for on another machine still judges the software as that platform would run
    it; its live state stands for nothing there, so the judges of live state say so instead.
    """

    is_profile: bool = True
    device: str = ""

    def not_profile(self, profile: Profile, thing: str) -> str:
        """``this machine is not a GB10 (no GPU): its memory cannot stand for a Spark's``."""
        what = f" ({self.device})" if self.device else ""
        return f"this machine is not {profile.a_name}{what}: its {thing} cannot stand for {profile.owner}"

    def not_judged(self, profile: Profile, thing: str) -> str:
        """``not a GB10 (no GPU): memory not judged``: :meth:`not_profile` in a few words, for the line."""
        what = f" ({self.device})" if self.device else ""
        return f"not {profile.a_name}{what}: {thing} not judged"


SAME = Machine()  # the profile was picked from this machine (auto), or it matches

PROFILES: dict[str, Profile] = {p.key: p for p in (GB10, H100, H200, GH200, GENERIC, NONE)}


def match(device_name: str | None, capability: tuple[int, int] | None = None) -> Profile:
    """The profile for a device by name (GH200 before H200 before H100), else by capability."""
    if not device_name:
        return NONE
    upper = device_name.upper()
    for profile in (GB10, GH200, H200, H100):
        if any(pattern in upper for pattern in profile.name_patterns):
            return profile
    if capability is not None and tuple(capability) == GB10.capability:
        return GB10
    return GENERIC


def by_pci(device_id: Optional[str]) -> Optional[Profile]:
    """The profile whose GPU has this PCI device id (``0x2e12``), None when no profile knows it."""
    for profile in (GB10, H200, H100, GH200):
        if device_id and device_id.lower() in profile.pci_device_ids:
            return profile
    return None


def resolve(requested: str, device_name: str | None, capability: tuple[int, int] | None = None) -> Profile:
    """``auto`` matches the device; any other choice is taken as asked (judge as if on it)."""
    if requested in (None, "", "auto"):
        return match(device_name, capability)
    if requested not in PROFILES:
        raise ValueError(f"unknown profile {requested!r}; choose from {', '.join(CHOICES)}")
    return PROFILES[requested]
