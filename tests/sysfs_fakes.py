"""A fake root for the ``gpu.visibility`` reader (``SPARK_GOTCHAS_SYS_ROOT``): PCI devices as sysfs
shows them (hex text such as ``0x10de``), ``/dev/nvidia*`` nodes and a container marker; and for the
``host.platform`` reader, the kernel's ``/proc/sys/kernel/arch`` (a root with a GB10 on its bus is an
aarch64 machine's, as every GB10 is)."""

from __future__ import annotations

from pathlib import Path

GB10_PCI = ("000f:01:00.0", "0x10de", "0x2e12", "0x030200")  # address, vendor, device, class (a Spark's GPU)
H200_PCI = ("0000:19:00.0", "0x10de", "0x2335", "0x030200")
HOST_BRIDGE = ("0000:00:00.0", "0x8086", "0x0d57", "0x060000")
NVIDIA_AUDIO = ("0000:19:00.1", "0x10de", "0x22bb", "0x040300")  # an NVIDIA function that is no GPU


def make_root(base: Path, pci: tuple = (HOST_BRIDGE,), dev: tuple[str, ...] = (), container: bool = False,
              arch: str | None = None) -> Path:
    """A folder laid out as / is for the reader; returns it. ``arch``: the machine's (uname -m); by
    default aarch64 where a GB10 is on the bus, else the machine's own (no file: the reader asks uname)."""
    devices = base / "sys" / "bus" / "pci" / "devices"
    devices.mkdir(parents=True, exist_ok=True)
    for address, vendor, device, klass in pci:
        folder = devices / address
        folder.mkdir()
        for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
            (folder / name).write_text(value + "\n")
    (base / "dev").mkdir(exist_ok=True)
    for name in dev:
        (base / "dev" / name).write_text("")
    if container:
        (base / ".dockerenv").write_text("")
    arch = arch or ("aarch64" if any(p[2] == GB10_PCI[2] for p in pci) else None)
    if arch:
        kernel = base / "proc" / "sys" / "kernel"
        kernel.mkdir(parents=True, exist_ok=True)
        (kernel / "arch").write_text(arch + "\n")
    return base
