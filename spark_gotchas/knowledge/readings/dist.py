"""Reading types of the ``dist.*`` keys (G10, ``multinode``): the all-reduce run under torchrun, each
rank's result and the network setup it saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Bytes, GBps, Seconds


# -- the network setup each rank reads (spark_gotchas.machine.netsetup) -----------------------------------
@dataclass
class Interface:
    """``ip -br link``/``addr`` for one interface; ``speed_mbps`` from /sys (None when not reported)."""

    name: str
    up: bool = False
    mtu: Optional[int] = None
    speed_mbps: Optional[int] = None
    driver: Optional[str] = None  # e.g. mlx5_core; None for virtual interfaces
    ipv4: list[str] = field(default_factory=list)  # "10.0.0.2/24"


@dataclass
class RdmaDevice:
    """``ibdev2netdev`` for one RDMA device (port 1); ``ibstat`` for its port's physical state and
    firmware; ``cat /sys/class/infiniband/<dev>/device/current_link_{speed,width}`` for its PCIe link."""

    name: str
    netdevs: list[str] = field(default_factory=list)
    state: Optional[str] = None  # "ACTIVE", "DOWN"
    rate: Optional[str] = None  # "200 Gb/sec (4X HDR)"
    link_layer: Optional[str] = None  # "Ethernet" for RoCE
    # the port's physical link, the adapter's firmware, and the PCIe link the adapter sits on (the device's
    # current_link_speed/width beside the most it can do): a Spark's QSFP port is two PCIe Gen5 x4 adapters,
    # and a second one wired at x2 halves that rail (None: not readable, or a snapshot of an older suite)
    phys_state: Optional[str] = None  # "LinkUp", "Disabled", "Polling"
    fw_ver: Optional[str] = None  # "28.45.4028"
    pci_address: Optional[str] = None  # "0000:01:00.0"
    pcie_speed: Optional[str] = None  # "32.0 GT/s PCIe"
    pcie_width: Optional[int] = None  # 4
    pcie_max_speed: Optional[str] = None
    pcie_max_width: Optional[int] = None

    @property
    def active(self) -> bool:
        return (self.state or "").upper() == "ACTIVE"


@dataclass
class NetSetup:
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* and friends, as set for this process
    interfaces: list[Interface] = field(default_factory=list)
    rdma: list[RdmaDevice] = field(default_factory=list)
    link: Optional[str] = None  # the interface that reaches MASTER_ADDR's subnet ("lo" on loopback)
    link_reason: str = ""
    error: Optional[str] = None

    def interface(self, name: str) -> Optional[Interface]:
        return next((i for i in self.interfaces if i.name == name), None)


# -- dist.collective ------------------------------------------------------------------------------
@dataclass
class BandwidthRow:
    size_bytes: Bytes
    seconds_median: Seconds
    algbw_gbps: GBps
    busbw_gbps: GBps  # nccl-tests' bus bandwidth: algbw x 2(n-1)/n
    iters: int = 0


@dataclass
class LatencyRow:
    size_bytes: Bytes
    latency_us_median: float
    iters: int = 0


@dataclass
class RankResult:
    """One rank's ``rank<N>.json`` from ``python -m spark_gotchas.microbench collective``."""

    rank: int
    world_size: int = 0
    local_world_size: int = 0
    node_rank: int = 0
    hostname: str = ""
    backend: Optional[str] = None
    device: Optional[str] = None
    large: list[BandwidthRow] = field(default_factory=list)
    small: list[LatencyRow] = field(default_factory=list)
    error: Optional[str] = None
    stage: Optional[str] = None
    seconds: Optional[Seconds] = None
    net: Optional[NetSetup] = None


@dataclass
class CollectiveRun:
    """``torchrun … -m spark_gotchas.microbench collective``: what ran, how it ended, what each local rank wrote."""

    attempted: bool
    reason: str = ""  # why not attempted
    mode: str = "rehearsal"  # rehearsal (two processes on this node) | multinode
    nnodes: int = 1
    node_rank: int = 0
    nproc_per_node: int = 2
    master_addr: str = ""
    backend_requested: str = "auto"
    timeout_s: Seconds = 0.0
    command: list[str] = field(default_factory=list)
    returncode: Optional[int] = None
    timed_out: bool = False
    seconds: Seconds = 0.0
    ranks: list[RankResult] = field(default_factory=list)
    missing_ranks: list[int] = field(default_factory=list)  # local ranks that wrote no result
    log_tail: str = ""
