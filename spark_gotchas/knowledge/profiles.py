"""Platform profiles: what each GPU is expected to do, and what it can physically do, as data
(figures from spark-facts.md and the datasheets named beside them).

A profile holds ranges, not points, and says where each figure came from. ``generic`` has no
figures of its own: judges then use what NVML reports about the device (e.g. theoretical
bandwidth = max memory clock x bus width x 2 / 8) or say the figure is unknown. ``none`` is
what ``auto`` picks on a machine without an NVIDIA GPU.

Each profile also carries its :class:`Envelope`: the ceilings no machine of that platform can pass
(memory it can have, the datasheet's bandwidth and dense tensor peaks, its power limit and clocks,
its CPU architecture). :func:`beyond` is the one place a reading is weighed against it: a reading
past the envelope cannot come from that platform, so a judge reports it as such (:meth:`Beyond.verdict`)
instead of judging it. A profile whose GPU comes in variants (H100 PCIe, SXM, NVL) spans them all;
:meth:`Profile.for_device` narrows it to the variant a device name says.

:class:`Machine` says whether the machine whose live state a run reads is the platform the
profile describes (``--spark-profile gb10`` on a CI box is not): :func:`spark_gotchas.machine.platform.machine`
decides it, the judges of live state take it as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from .verdict import TAIL_ROOM, Status, Verdict, fitting


@dataclass(frozen=True)
class Range:
    """A measured range ``lo``-``hi`` (units in the field name), with its source."""

    lo: float
    hi: float
    source: str = ""


GIB = 1 << 30
ARCH_ALIASES = {"arm64": "aarch64", "armv8l": "aarch64", "amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64"}


def arch_name(machine: Optional[str]) -> Optional[str]:
    """``uname -m`` as one name per architecture (``arm64`` -> ``aarch64``, ``AMD64`` -> ``x86_64``)."""
    if not machine:
        return None
    low = machine.strip().lower()
    return ARCH_ALIASES.get(low, low)


@dataclass(frozen=True)
class Envelope:
    """What a platform can physically have and do: ceilings a reading of it cannot pass.

    Figures are the datasheet's (cited in ``source``), never a measured range: a measured figure may
    sit anywhere below them. None (or empty) where no bound is stated, so nothing is judged by it.
    Bandwidth counts every byte moved to or from DRAM, as the suite's probe does (a copy counts its
    read and its write), so no method can pass the datasheet figure. Tensor peaks are dense (a
    datasheet's "with sparsity" figure halved), per precision as the GEMM probes name them.
    """

    arch: tuple[str, ...] = ()  # the CPU architectures (uname -m) its hosts have; () any
    capability: Optional[tuple[int, int]] = None
    device_memory_bytes: Optional[int] = None  # the most one GPU can hold (NVML's total, torch's total_memory)
    host_memory_bytes: Optional[int] = None  # the most MemTotal its host can have (GB10: the same pool)
    nvml_memory: bool = True  # NVML reports device memory (GB10: NotSupported, the pool is the system's)
    bandwidth_gbps: Optional[float] = None  # the datasheet's DRAM bandwidth
    peak_tflops: Mapping[str, float] = field(default_factory=dict)  # dense tensor peak per precision
    power_limit_w: Optional[float] = None  # the highest power limit it takes
    power_limit_reported: bool = True  # NVML reports a power limit (GB10: N/A)
    power_draw_w: Optional[float] = None  # what a supply bounds its draw by (GB10: the whole box's 240 W brick)
    max_sm_clock_mhz: Optional[float] = None
    link_gbps: Optional[float] = None  # the line rate between two nodes, one direction (all-reduce busbw under it)
    source: str = ""

    @property
    def empty(self) -> bool:
        return self == Envelope(source=self.source)


# How far past a ceiling a figure may read before it is no longer the platform's: a rate is timed
# (CUDA events, the datasheet's figure rounded: "4.8 TB/s" where NVML's clocks give 4815 GB/s), a clock
# or a power limit is set in steps; memory is counted exactly.
TOLERANCE = {"bandwidth": 1.05, "tflops": 1.10, "clock": 1.01, "power": 1.01, "memory": 1.0, "link": 1.05}


@dataclass(frozen=True)
class Variant:
    """One form of a profile's GPU, told by its device name (``NVIDIA H100 PCIe``): its own title,
    envelope and the figures of the profile it replaces."""

    pattern: str  # a regular expression searched in the device name, case-insensitive
    title: str
    a_name: str
    short: str
    envelope: Envelope
    figures: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Beyond:
    """A reading no machine of a platform can give: ``what`` (``read 905 GB/s``) is ``how`` (``3.3x
    GB10's 273 GB/s datasheet``), so it cannot come from ``a_name`` (``a GB10``).

    Such a reading says nothing of the machine's health (no fix to the machine would change it):
    the snapshot is not that platform's, or the profile chosen for this GPU is wrong. So it is
    never judged: the check says **WARN**, never PASS and never FAIL (:meth:`verdict`).
    """

    what: str
    how: str
    a_name: str
    short_how: str = ""  # ``how`` in fewer words, for a line that must fit
    source: str = ""

    def summary(self, gotcha: int, thing: str) -> str:
        """``read 905 GB/s is 3.3x GB10's 273 GB/s datasheet: not a GB10 reading; bandwidth not judged``."""
        short, spoils = self.short_how or self.how, f"; {thing} not judged"
        return fitting(gotcha, Status.WARN, f"{self.what} is {self.how}: not {self.a_name} reading{spoils}",
                       f"{self.what} is {short}: not {self.a_name} reading{spoils}",
                       f"{self.what} is {short}: not {self.a_name}'s{spoils}",
                       f"{self.what}: not {self.a_name} reading{spoils}",
                       f"{self.what}: not {self.a_name} reading", tail=TAIL_ROOM)  # room for "(+1 more WARN)"

    @property
    def detail(self) -> str:
        return (f"{self.what} is {self.how}" + (f" ({self.source})" if self.source else "")
                + f": no machine of that platform can read so, so the snapshot is not {self.a_name}'s, or the "
                  "profile taken for this GPU is wrong; nothing is judged from it")

    def verdict(self, gotcha: int, thing: str, readings: Optional[Mapping[str, Any]] = None) -> Verdict:
        return Verdict(gotcha, Status.WARN, self.summary(gotcha, thing), detail=self.detail, fix=FIX_BEYOND,
                       readings={**(readings or {}), "beyond_envelope": f"{self.what} is {self.how}"})


FIX_BEYOND = ("re-run on the machine the snapshot names (spark-gotchas -m fast --spark-snapshot FILE there) and replay "
              "that; if this was a live run, the GPU is not what the profile describes: check its name (nvidia-smi -L) "
              "and judge it with --spark-profile generic, which takes NVML's own figures")


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
    short: str = ""  # "GB10", "H100 PCIe": the platform's name in a figure ("GB10's 273 GB/s")
    envelope: Envelope = field(default_factory=Envelope)  # what no reading of it can pass
    variants: tuple[Variant, ...] = ()  # forms of its GPU told apart by name; the envelope spans them

    @property
    def name(self) -> str:
        """The platform's name in a line (``GB10's 273 GB/s``): its short name, else its title, never its key."""
        return self.short or self.title

    def for_device(self, device_name: Optional[str]) -> Profile:
        """This profile narrowed to the variant ``device_name`` names (``NVIDIA H100 PCIe``: an H100
        PCIe's bandwidth, clocks, power and envelope), else itself."""
        for variant in self.variants if device_name else ():
            if re.search(variant.pattern, device_name, re.I):
                return replace(self, title=variant.title, a_name=variant.a_name, short=variant.short,
                               envelope=variant.envelope, variants=(), **dict(variant.figures))
        return self

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
    short="GB10",
    envelope=Envelope(
        arch=("aarch64",),
        capability=(12, 1),
        device_memory_bytes=128 * GIB,  # the one 128 GB LPDDR5X pool; MemTotal ~121.7 GiB after firmware
        host_memory_bytes=128 * GIB,
        nvml_memory=False,
        bandwidth_gbps=273.0,  # LPDDR5X-8533 x 256 bit
        peak_tflops={"bf16": 125.0, "fp8": 250.0, "nvfp4": 500.0},
        power_limit_reported=False,
        power_draw_w=240.0,
        max_sm_clock_mhz=3003.0,
        link_gbps=25.0,  # ConnectX-7 at 200 Gb/s
        source="NVIDIA DGX Spark datasheet: GB10, 128 GB LPDDR5X at 273 GB/s, 1 PFLOP FP4 with sparsity, a 240 W "
               "external supply for the whole box, Arm CPU; dense peaks halved from it per wider precision "
               "(Blackwell tensor cores: BF16 = FP8/2 = FP4/4), measured BF16 94-98 and FP8 175-187 sit under them; "
               "nvidia-smi: power.limit [N/A], clocks.max.graphics 3003 MHz, memory Not Supported",
    ),
)

H200_ENVELOPE = Envelope(
    arch=("x86_64", "aarch64"),  # HGX boards in x86 servers; the NVL card also in Arm (Grace) servers
    capability=(9, 0),
    device_memory_bytes=144 * GIB,  # six 24 GB HBM3e stacks; 141 GB usable (NVML 150.75e9 B here)
    bandwidth_gbps=4800.0,
    peak_tflops={"bf16": 989.0, "fp8": 1979.0},
    power_limit_w=700.0,
    max_sm_clock_mhz=1980.0,  # any Hopper's (GH100's) clock bound
    source="NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s, BF16 1,979 and FP8 3,958 TFLOPS with sparsity, up "
           "to 700 W (SXM); NVL 600 W, BF16 1,671, FP8 3,341",
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
    short="H200",
    envelope=H200_ENVELOPE,
    variants=(
        Variant(r"\bNVL\b", "NVIDIA H200 NVL", "an H200 NVL", "H200 NVL", replace(
            H200_ENVELOPE, peak_tflops={"bf16": 835.0, "fp8": 1671.0}, power_limit_w=600.0,
            source="NVIDIA H200 datasheet, H200 NVL: 141 GB, 4.8 TB/s, BF16 1,671 and FP8 3,341 TFLOPS with "
                   "sparsity, up to 600 W"),
            {"rated_power_w": 600.0, "gemm_tflops": {}, "bandwidth_gbps": {}}),  # the ranges are an SXM's
    ),
)

H100_ENVELOPE = Envelope(  # any H100: the widest of its forms
    arch=("x86_64", "aarch64"),  # x86 servers mostly; the PCIe and NVL cards also in Arm servers
    capability=(9, 0),
    device_memory_bytes=96 * GIB,  # NVL: 94 GB HBM3
    bandwidth_gbps=3900.0,  # NVL
    peak_tflops={"bf16": 989.0, "fp8": 1979.0},  # SXM
    power_limit_w=700.0,  # SXM
    max_sm_clock_mhz=1980.0,
    source="NVIDIA H100 datasheet: SXM 80 GB, 3.35 TB/s, BF16 1,979 and FP8 3,958 TFLOPS with sparsity, up to "
           "700 W; NVL 94 GB, 3.9 TB/s, 1,671 / 3,341, 350-400 W; PCIe 80 GB, 2 TB/s, 1,513 / 3,026, 350 W",
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
    short="H100",
    envelope=H100_ENVELOPE,
    variants=(
        Variant(r"\bPCIe\b", "NVIDIA H100 PCIe", "an H100 PCIe", "H100 PCIe", replace(
            H100_ENVELOPE, device_memory_bytes=80 * GIB, bandwidth_gbps=2039.0, peak_tflops={"bf16": 756.0, "fp8": 1513.0},
            power_limit_w=350.0,
            source="NVIDIA H100 PCIe product brief: 80 GB HBM2e, more than 2,000 GB/s (1593 MHz x 5120 bit: 2039), "
                   "350 W maximum TDP; datasheet: BF16 1,513 and FP8 3,026 TFLOPS with sparsity; boost 1755 MHz"),
            {"datasheet_bandwidth_gbps": 2039.0, "max_sm_clock_mhz": 1755.0, "rated_power_w": 350.0}),
        Variant(r"\bNVL\b", "NVIDIA H100 NVL", "an H100 NVL", "H100 NVL", replace(
            H100_ENVELOPE, peak_tflops={"bf16": 835.0, "fp8": 1671.0}, power_limit_w=400.0,
            source="NVIDIA H100 datasheet, H100 NVL: 94 GB HBM3, 3.9 TB/s, BF16 1,671 and FP8 3,341 TFLOPS with "
                   "sparsity, 350-400 W"),
            {"datasheet_bandwidth_gbps": 3900.0, "rated_power_w": 400.0}),
        Variant(r"\bSXM|\bHBM3\b", "NVIDIA H100 SXM", "an H100 SXM", "H100 SXM", replace(
            H100_ENVELOPE, device_memory_bytes=80 * GIB, bandwidth_gbps=3350.0,
            source="NVIDIA H100 datasheet, H100 SXM (NVML: NVIDIA H100 80GB HBM3): 80 GB, 3.35 TB/s, BF16 1,979 "
                   "and FP8 3,958 TFLOPS with sparsity, up to 700 W")),
    ),
)

GH200_ENVELOPE = Envelope(
    arch=("aarch64",),  # the Grace CPU
    capability=(9, 0),
    device_memory_bytes=144 * GIB,  # HBM3e; 96 GB HBM3 on the first version
    host_memory_bytes=(480 + 144) * GIB,  # LPDDR5X, with the HBM where the driver onlines it as a NUMA node
    bandwidth_gbps=4900.0,
    peak_tflops={"bf16": 989.0, "fp8": 1979.0},
    power_limit_w=1000.0,
    max_sm_clock_mhz=1980.0,
    source="NVIDIA GH200 datasheet: 96 GB HBM3 at 4 TB/s or 144 GB HBM3e at 4.9 TB/s, up to 480 GB LPDDR5X, "
           "BF16 1,979 and FP8 3,958 TFLOPS with sparsity, 450-1000 W configurable",
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
    short="GH200",
    envelope=GH200_ENVELOPE,
    variants=(
        Variant(r"144G|HBM3e", "NVIDIA GH200 144GB HBM3e", "a GH200 144GB", "GH200 144GB",
                replace(GH200_ENVELOPE, source="NVIDIA GH200 datasheet: 144 GB HBM3e at 4.9 TB/s"),
                {"datasheet_bandwidth_gbps": 4900.0}),
    ),
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
    ``beyond``: the machine is taken for the profile's platform (its GPU's name matches) but a fact
    of it no such machine has (an x86_64 "GB10", capability 10.0): its live state is not judged
    either, and each check says so as a WARN (:meth:`Beyond.verdict`).
    """

    is_profile: bool = True
    device: str = ""
    beyond: Optional[Beyond] = None

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
# What --spark-profile takes: auto, then every profile but "none" (what auto picks without a GPU). The
# one list: the options, the subcommands and the README's table are held to it.
CHOICES: tuple[str, ...] = ("auto", *(key for key in PROFILES if key != NONE.key))


def _named(pattern: str, upper: str) -> bool:
    """``GB10`` names a GPU in ``NVIDIA GB10`` or ``NVIDIA-GB10``, not in ``NVIDIA GB100``: a pattern
    is a whole token of the name (``H200`` is not in ``GH200``)."""
    return re.search(rf"(?<![A-Z0-9]){re.escape(pattern)}(?![0-9])", upper) is not None


def match(device_name: str | None, capability: tuple[int, int] | None = None) -> Profile:
    """The profile for a device by name (GH200 before H200 before H100), narrowed to the variant the
    name says (:meth:`Profile.for_device`), else by capability."""
    if not device_name:
        return NONE
    upper = device_name.upper()
    for profile in (GB10, GH200, H200, H100):
        if any(_named(pattern, upper) for pattern in profile.name_patterns):
            return profile.for_device(device_name)
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
    """``auto`` matches the device; any other choice is taken as asked (judge as if on it), narrowed
    to the device's variant where the device is of that profile (an H100 PCIe asked for as h100)."""
    if requested in (None, "", "auto"):
        return match(device_name, capability)
    if requested not in PROFILES:
        raise ValueError(f"unknown profile {requested!r}; choose from {', '.join(CHOICES)}")
    asked = PROFILES[requested]
    return asked.for_device(device_name) if device_name and match(device_name).key == asked.key else asked


# -- the envelope: what no reading of a platform can pass ---------------------------------------------
def _times(value: float, bound: float) -> str:
    ratio = value / bound
    return f"{ratio:.2f}x" if ratio < 1.1 else f"{ratio:.1f}x"


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def beyond(profile: Profile, *, arch: Optional[str] = None, capability: Optional[tuple[int, int]] = None,
           memory: Optional[Mapping[str, Optional[float]]] = None, host_memory_bytes: Optional[float] = None,
           bandwidth: Optional[Mapping[str, float]] = None, tflops: Optional[Mapping[str, float]] = None,
           power_limit_w: Optional[float] = None, power_w: Optional[float] = None,
           clocks: Optional[Mapping[str, Optional[float]]] = None,
           link_busbw_gbps: Optional[float] = None) -> Optional[Beyond]:
    """The first reading given that ``profile``'s envelope rules out, else None (the one place a
    reading is weighed against what its platform can physically do).

    ``memory``: a GPU's memory by where it was read (``{"NVML device memory": 4e11}``);
    ``host_memory_bytes``: MemTotal; ``bandwidth``: GB/s per method; ``tflops``: per precision
    (bf16, fp8, nvfp4); ``clocks``: MHz by what was read (``{"max SM clock": 3003}``);
    ``link_busbw_gbps``: an all-reduce's bus bandwidth between two nodes. Rules: the
    CPU architecture and the capability must be the platform's; memory at most the envelope's; a
    bandwidth, TFLOP/s, clock or power limit at most its ceiling, within ``TOLERANCE``; on a GB10,
    which reports no power limit, a limit or a draw at or above its 240 W supply (the whole box's)
    is none of its. NVML device memory on a GB10 (NotSupported on every driver measured) within its
    pool is no proof either way (one report claims a driver that returns the pool) and is not ruled out.
    """
    env, name, a_name = profile.envelope, profile.name, profile.a_name
    source = env.source

    def out(what: str, how: str, short: str = "") -> Beyond:
        return Beyond(what, how, a_name, short, source)

    cpu = arch_name(arch)
    if cpu and env.arch and cpu not in env.arch:
        return out(f"machine {cpu}", f"no {name}'s ({' or '.join(env.arch)})")
    if capability is not None and env.capability is not None and tuple(capability) != tuple(env.capability):
        return out(f"capability {capability[0]}.{capability[1]}",
                   f"no {name}'s ({env.capability[0]}.{env.capability[1]})")
    for label, value in (memory or {}).items():
        bound = env.device_memory_bytes
        if value and bound and value > bound * TOLERANCE["memory"]:
            return out(f"{label} {_gb(value)}", f"{_times(value, bound)} all {name} can have ({_gb(bound)})",
                       f"{_times(value, bound)} {name}'s {_gb(bound)}")
    bound = env.host_memory_bytes
    if host_memory_bytes and bound and host_memory_bytes > bound * TOLERANCE["memory"]:
        return out(f"MemTotal {_gb(host_memory_bytes)}",
                   f"{_times(host_memory_bytes, bound)} all {name} can have ({_gb(bound)})",
                   f"{_times(host_memory_bytes, bound)} {name}'s {_gb(bound)}")
    figures = {m: v for m, v in (bandwidth or {}).items() if v is not None}
    bound = env.bandwidth_gbps
    if figures and bound:
        over = [(v / bound, -i, m) for i, (m, v) in enumerate(figures.items())
                if v > bound * TOLERANCE["bandwidth"]]
        if over:
            _, _, method = max(over)
            value = figures[method]
            return out(f"{method} {value:.0f} GB/s", f"{_times(value, bound)} {name}'s {bound:.0f} GB/s datasheet",
                       f"{_times(value, bound)} {name}'s {bound:.0f} GB/s")
    for precision, value in (tflops or {}).items():
        bound = env.peak_tflops.get(precision)
        if value is not None and bound and value > bound * TOLERANCE["tflops"]:
            label = {"bf16": "BF16", "fp8": "FP8", "nvfp4": "NVFP4"}.get(precision, precision)
            return out(f"{label} {value:.0f} TFLOP/s", f"{_times(value, bound)} {name}'s {bound:.0f} TFLOP/s dense peak",
                       f"{_times(value, bound)} {name}'s {bound:.0f} TFLOP/s")
    supply = env.power_draw_w
    if power_limit_w:
        if not env.power_limit_reported and supply and power_limit_w >= supply:
            return out(f"power limit {power_limit_w:.0f} W", f"no {name}'s (it reports none, and {supply:.0f} W "
                       "feeds its whole box)", f"no {name}'s")
        bound = env.power_limit_w
        if bound and power_limit_w > bound * TOLERANCE["power"]:
            return out(f"power limit {power_limit_w:.0f} W", f"{_times(power_limit_w, bound)} {name}'s {bound:.0f} W "
                       "maximum", f"{_times(power_limit_w, bound)} {name}'s {bound:.0f} W")
    if power_w and supply and power_w >= supply:
        return out(f"power {power_w:.0f} W", f"more than {name}'s whole box draws ({supply:.0f} W supply)",
                   f"over {name}'s {supply:.0f} W supply")
    bound = env.max_sm_clock_mhz
    for label, value in (clocks or {}).items():
        if value and bound and value > bound * TOLERANCE["clock"]:
            return out(f"{label} {value:.0f} MHz", f"{_times(value, bound)} {name}'s {bound:.0f} MHz maximum",
                       f"{_times(value, bound)} {name}'s {bound:.0f} MHz")
    bound = env.link_gbps
    if link_busbw_gbps and bound and link_busbw_gbps > bound * TOLERANCE["link"]:
        return out(f"bus bandwidth {link_busbw_gbps:.1f} GB/s", f"{_times(link_busbw_gbps, bound)} {name}'s "
                   f"{bound:g} GB/s link", f"{_times(link_busbw_gbps, bound)} {name}'s link")
    return None
