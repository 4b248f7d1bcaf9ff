"""Which platform this run judges: the profile, whether this machine is it, and a short description.

:func:`machine` is the one place that decides whether the machine whose live state is read is
the platform the profile describes; the checks of live state (G3, G4 under load, G5, G6) pass its
answer to their judges. The machine's CPU architecture and kernel are a reading (``host.platform``),
so a replay describes and judges the machine that was recorded, never the one replaying.
"""

from __future__ import annotations

import importlib.metadata
import sys
from typing import Any, Optional, Protocol

from .. import __version__
from ..base import outward
from ..knowledge.profiles import GENERIC, NONE, PROFILES, SAME, Machine, Profile, beyond, by_pci, match, resolve
from .snapshot import NOT_RECORDED


class Readings(Protocol):
    """What the platform needs of the provider (:class:`spark_gotchas.machine.provider.Provider`): named,
    not imported, since the provider's readers ask the platform for the profile."""

    def try_read(self, key: str) -> Any: ...

    def peek(self, key: str) -> Any: ...


def profile(provider: Readings, requested: str = "auto") -> Profile:
    """The profile asked for, or (auto) the one matching the first GPU NVML or torch sees; narrowed
    to the variant the GPU's name says (an H100 PCIe's figures, not an SXM's). A profile asked for
    by name is narrowed only by NVML's name (torch is not asked for it)."""
    if requested and requested != "auto":
        device = _device(provider, ask_torch=False)
        return resolve(requested, *device) if device is not None else PROFILES[requested]
    device = _device(provider)
    return NONE if device is None else resolve("auto", *device)


def _no_gpu_here(provider: Readings) -> bool:
    """True when no GPU can be used here without asking torch: no /dev/nvidia* and (where the bus
    can be read) no NVIDIA GPU on it. CUDA needs those device files, so torch would see none."""
    visibility = provider.try_read("gpu.visibility")
    return visibility is not None and not visibility.dev_nodes and visibility.pci_error is None \
        and not visibility.gpu_on_bus


def _device(provider: Readings, ask_torch: bool = True) -> Optional[tuple[str, Optional[tuple[int, int]]]]:
    """The first GPU's (name, capability), NVML's first, else torch's; None when neither sees one.

    NVML can be missing where CUDA works (a container given ``compute`` but not ``utility``
    driver capabilities has no libnvidia-ml), so torch is asked then, unless nothing here could
    be a GPU (:func:`_no_gpu_here`): a live run then never waits for torch's import to learn
    that. ``ask_torch=False``: torch's reading only if already taken."""
    inventory = provider.try_read("gpu.inventory")
    if inventory is not None and inventory.first is not None:
        return inventory.first.name or "an unnamed GPU", inventory.first.capability
    if provider.live and _no_gpu_here(provider):
        return None
    build = provider.try_read("torch.build") if ask_torch else provider.peek("torch.build")
    if build is not None and build.has_device and build.devices:
        return build.devices[0].name, build.devices[0].capability
    return None


def machine(provider: Readings, requested: str = "auto", ask_torch: bool = True) -> Machine:
    """Whether the machine whose live state is read is the profile's platform (in a replay: the
    machine the snapshot recorded). ``auto`` took the profile from the machine, so it is. A profile
    asked for by name is the machine when the machine's GPU (NVML's, else torch's) matches it; a
    machine with no GPU is not. An NVIDIA GPU on its PCI bus but hidden from this environment is
    told by its PCI device id where a profile knows it (GB10 0x2e12, H200 0x2335); otherwise the
    profile asked for is taken at its word.
    A machine taken for the profile's platform whose recorded CPU architecture or GPU capability no
    such machine has (an x86_64 "GB10", a "GB10" of capability 12.0) carries that as ``beyond``
    (:func:`spark_gotchas.knowledge.profiles.beyond`): its live state is not judged.
    ``ask_torch=False`` (for reports): torch's reading only if already taken, never an import.
    """
    if not requested or requested == "auto":
        device = _device(provider, ask_torch)
        return SAME if device is None else _checked(provider, resolve("auto", *device), device)
    asked = PROFILES[requested]
    device = _device(provider, ask_torch)
    if device is None:
        visibility = provider.try_read("gpu.visibility")
        if visibility is not None and visibility.gpu_on_bus:  # hidden from CUDA: known by its PCI id, if at all
            known = by_pci(visibility.pci_gpus[0].device_id)
            if known is None or known.key == asked.key or asked is GENERIC:
                return SAME
            return Machine(is_profile=False, device=f"{known.title}, not visible here")
        return SAME if asked is NONE else Machine(is_profile=False, device="no GPU")
    name, capability = device
    if asked is GENERIC or match(name, capability).key == asked.key:
        return _checked(provider, resolve(requested, name, capability), device)
    return Machine(is_profile=False, device=name)


def _checked(provider: Readings, prof: Profile, device: tuple[str, Optional[tuple[int, int]]]) -> Machine:
    """SAME, unless the recorded machine's architecture or the GPU's capability is none the profile's
    platform can have."""
    host = provider.try_read("host.platform")
    out = beyond(prof, arch=host.machine if host is not None else None, capability=device[1])
    return SAME if out is None else Machine(is_profile=True, device=device[0], beyond=out)


def hidden_gpu(provider: Readings) -> Optional[str]:
    """``10de:2e12 at 000f:01:00.0`` when an NVIDIA GPU is on the PCI bus and neither NVML nor
    torch (where already read) sees one; else None."""
    inventory = provider.peek("gpu.inventory")
    if inventory is not None and inventory.devices:
        return None
    build = provider.peek("torch.build")
    if build is not None and build.has_device:
        return None
    visibility = provider.try_read("gpu.visibility")  # cheap: sysfs and the environment
    return visibility.bus_text if visibility is not None and visibility.gpu_on_bus else None


def describe(provider: Readings, requested: str = "auto") -> dict[str, Any]:
    """JSON-ready platform facts for the summary, the report and the snapshot."""
    prof = profile(provider, requested)
    here = machine(provider, requested, ask_torch=False)
    inventory = provider.peek("gpu.inventory")
    dev = inventory.first if inventory is not None else None
    build = provider.peek("torch.build")
    seen_by_torch = build.devices[0] if dev is None and build is not None and build.has_device and build.devices \
        else None  # NVML missing where CUDA works: the GPU is torch's, and the line says why NVML is not
    name = dev.name if dev else (seen_by_torch.name if seen_by_torch else None)
    capability = dev.capability if dev else (seen_by_torch.capability if seen_by_torch else None)
    host = provider.try_read("host.identity")  # cheap, and names the node in a fleet
    recorded = provider.try_read("host.platform")  # the recorded machine in a replay, never the replaying one
    return {
        "host": {"hostname": host.hostname, "boot_id": host.boot_id} if host is not None else None,
        "profile": prof.key,
        "profile_title": prof.title,
        "profile_requested": requested or "auto",
        "machine_is_profile": here.is_profile,
        "beyond_envelope": f"{here.beyond.what} is {here.beyond.how}" if here.beyond is not None else None,
        "gpu": name,
        "gpu_hidden": hidden_gpu(provider) if name is None else None,
        "gpu_count": build.device_count if seen_by_torch else (len(inventory.devices) if inventory is not None else None),
        "capability": list(capability) if capability else None,
        "driver": inventory.driver_version if inventory is not None else None,
        "cuda_driver": inventory.cuda_driver_text if inventory is not None else None,
        "nvml_error": inventory.nvml_error if inventory is not None else provider.error("gpu.inventory"),
        "torch": build.version if build is not None else None,
        "torch_cuda": build.cuda if build is not None else None,
        "machine": (recorded.machine if recorded is not None else None) or NOT_RECORDED,
        "kernel": (recorded.kernel if recorded is not None else None) or NOT_RECORDED,
        "python": (recorded.python if recorded is not None else None) or NOT_RECORDED,
    }


def one_line(desc: dict[str, Any], replayed_from: Optional[str] = None) -> str:
    """The platform in a line. ``desc`` may come from a document someone else wrote (``diff`` of
    two reports): a field of an unforeseen type is shown as text, a capability that is no pair
    is left out. Each field from outside is bounded where it is printed (:func:`outward.field`: a
    GPU named ``H200`` and 141 spaces and ``G4 PASS: …`` starts no row of its own)."""
    field = outward.field
    gpu = field(desc["gpu"], 100) if desc.get("gpu") else (
        f"NVIDIA GPU present but not visible here ({field(desc['gpu_hidden'], 300)})" if desc.get("gpu_hidden")
        else f"no GPU ({field(desc.get('nvml_error') or 'none found', 300)})")
    cap = desc.get("capability")
    pair = isinstance(cap, (list, tuple)) and len(cap) == 2
    parts = [gpu + (f" (cc {field(cap[0], 6)}.{field(cap[1], 6)})" if pair else "")]
    if desc.get("gpu") and desc.get("nvml_error") and not desc.get("driver"):  # the GPU as torch sees it
        parts.append(f"NVML unavailable: {field(desc['nvml_error'], 300)}")
    if desc.get("driver"):
        parts.append(f"driver {field(desc['driver'], 40)} / CUDA {field(desc.get('cuda_driver') or '?', 20)}")
    if desc.get("torch"):
        parts.append(f"torch {field(desc['torch'], 60)}")
    if desc.get("machine_is_profile") is False and isinstance(desc.get("profile"), str) and desc["profile"] in PROFILES:
        parts.append(f"not {PROFILES[desc['profile']].a_name}: its live state not judged")
    elif isinstance(desc.get("beyond_envelope"), str) and isinstance(desc.get("profile"), str) \
            and desc["profile"] in PROFILES:  # an x86_64 "GB10": no such machine
        parts.append(f"{field(desc['beyond_envelope'], 100)}: not {PROFILES[desc['profile']].a_name}, its live state not judged")
    parts.append(f"profile {field(desc['profile'], 40)}")
    head = "replayed " + field(replayed_from, 160) + ": " if replayed_from else ""
    return head + ", ".join(parts)


def _dist_version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(provider: Readings) -> dict[str, Any]:
    build = provider.peek("torch.build")
    inventory = provider.peek("gpu.inventory")
    return {
        "suite": __version__,
        "python": sys.version.split()[0],
        "torch": build.version if build is not None else _dist_version("torch"),
        "torch_cuda": build.cuda if build is not None else None,
        "driver": inventory.driver_version if inventory is not None else None,
        "cuda_driver": inventory.cuda_driver_text if inventory is not None else None,
        "pytest": _dist_version("pytest"),
    }
