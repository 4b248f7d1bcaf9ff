"""G1 — the GPU must be usable from here before any CUDA ABI question means anything.

A container started without ``--gpus all`` (or ``--runtime nvidia``) has no ``/dev/nvidia*`` and
no NVML library, so every GPU check would SKIP and the run would look green. The PCI bus still
shows the GPU (sysfs is not namespaced), which is what tells this case apart from a machine
without one. Likewise an empty or wrong ``CUDA_VISIBLE_DEVICES`` hides the GPU from torch while
NVML still lists it.

Rules:

Whether the GPU can be used from here (`test_g1_gpu_visible_here`):
- NVML lists a GPU, torch is a CUDA build that imports, and torch sees no device -> FAIL naming
  the cause it can see: ``CUDA_VISIBLE_DEVICES`` set (its value shown), or ``/dev/nvidia*``
  missing (a device cgroup or the container's device list hides them), or torch's own error.
- NVML lists a GPU and torch sees it (or fewer of them, with ``CUDA_VISIBLE_DEVICES`` choosing)
  -> PASS. torch not installed, not a CUDA build or failing to import -> INFO (G1's torch line
  judges that). A reading that could not be had (refused in a replay, not in the snapshot) is
  said to be unread, never taken for torch missing or NVML listing no GPU.
- NVML lists no GPU but torch sees one -> PASS, with NVML's reason.
- Neither sees a GPU, and an NVIDIA display or 3D controller (vendor 0x10de, class 0x0300xx or
  0x0302xx) is on the PCI bus -> FAIL: "an NVIDIA GPU is in this machine but not visible in
  this environment". Fix: in a container (``/.dockerenv``, ``/run/.containerenv`` or NVIDIA image
  variables), start it with ``--gpus all``; on a host, install or load the NVIDIA driver.
- Neither sees a GPU and the PCI bus shows none -> INFO "no NVIDIA GPU in this machine" (an NGC
  image's own ``NVIDIA_VISIBLE_DEVICES=all`` on a CPU machine is no GPU).
- Neither sees a GPU, the PCI bus cannot be read, and ``NVIDIA_VISIBLE_DEVICES`` names GPUs
  -> WARN (a GPU was asked for and none is here; this cannot tell a CPU machine from a missing
  ``--gpus all``). Without that variable -> INFO.
"""

from __future__ import annotations

import re
from typing import Optional

from ..readings.gpu import GpuInventory, GpuVisibility
from ..readings.torch import TorchBuild
from ..verdict import LINE_COLUMNS, Status, Verdict, clipped, fitting

G = 1
FIX_CONTAINER = ("start the container with --gpus all (or --runtime nvidia), e.g. docker run --gpus all "
                 "--ipc=host IMAGE; in Kubernetes request nvidia.com/gpu with runtimeClassName: nvidia")
FIX_HOST = ("load the NVIDIA driver (sudo modprobe nvidia), or reinstall the driver package and reboot, until "
            "nvidia-smi lists the GPU")
FIX_CUDA_VISIBLE = ("unset CUDA_VISIBLE_DEVICES, or set it to GPU indices or UUIDs that nvidia-smi -L lists "
                    "(e.g. CUDA_VISIBLE_DEVICES=0)")
FIX_DEV_NODES = ("give this environment the GPU's device files: start the container with --gpus all "
                 "(not only --device /dev/nvidia0), or allow /dev/nvidia* in its device cgroup")
SHOWN_VALUE = 40  # characters of an environment variable's value in a line


def _value(text: str) -> str:
    shown = text if len(text) <= SHOWN_VALUE else text[:SHOWN_VALUE] + "…"
    return f"'{shown}'"


def _readings(vis: Optional[GpuVisibility], inventory: Optional[GpuInventory], build: Optional[TorchBuild]) -> dict:
    seen = {} if vis is None else {
        "pci_gpus": [{"address": g.address, "device_id": g.device_id, "class": g.class_code} for g in vis.pci_gpus],
        "pci_error": vis.pci_error, "dev_nodes": list(vis.dev_nodes),
        "nvidia_visible_devices": vis.nvidia_visible_devices, "cuda_visible_devices": vis.cuda_visible_devices,
        "container": vis.container, "image_vars": dict(vis.image_vars)}
    return {**seen,
            "nvml_gpus": len(inventory.devices) if inventory is not None else None,
            "nvml_error": inventory.nvml_error if inventory is not None else None,
            "torch_devices": build.device_count if build is not None else None}


def _in_container(vis: GpuVisibility) -> bool:
    return vis.container is not None or bool(vis.image_vars)


def judge_gpu_visible(vis: Optional[GpuVisibility], inventory: Optional[GpuInventory],
                      build: Optional[TorchBuild]) -> Verdict:
    """Whether the GPU in this machine can be used from this environment (rules in the module docstring).
    A reading given as None could not be had (``spark.try_read``: not in the snapshot, refused, or its
    reader failed): it is unread, which says nothing of what the machine has. ``vis`` None is judged
    as no PCI bus read, no variables."""
    readings = _readings(vis, inventory, build)
    vis = vis if vis is not None else GpuVisibility(pci_error="not read")
    nvml_devices = inventory.devices if inventory is not None else []
    torch_sees = build is not None and build.has_device
    if nvml_devices:
        return _nvml_sees(vis, nvml_devices[0].name or "a GPU", len(nvml_devices), build, readings)
    nvml_why = (inventory.nvml_error or "no GPU listed") if inventory is not None else "its reading could not be read"
    if torch_sees:
        nvml = f"NVML does not ({nvml_why})" if inventory is not None else "NVML's reading could not be read"
        return Verdict(G, Status.PASS, f"torch sees {build.devices[0].name if build.devices else 'a GPU'}; {nvml}",
                       readings=readings)
    if vis.gpu_on_bus:
        inside = _in_container(vis)
        where = "this environment" if inside else "this system (is the driver loaded?)"
        return Verdict(G, Status.FAIL, f"an NVIDIA GPU is in this machine ({vis.pci_gpus[0].address}) but not visible "
                                       f"in {where}", fix=FIX_CONTAINER if inside else FIX_HOST, readings=readings)
    if vis.pci_error is None:
        asked = f"; NVIDIA_VISIBLE_DEVICES={_value(vis.nvidia_visible_devices)} is the image's setting, not a GPU" \
            if vis.gpu_requested else ""
        return Verdict(G, Status.INFO, f"no NVIDIA GPU in this machine (none on the PCI bus){asked}", readings=readings)
    if vis.gpu_requested:
        return Verdict(G, Status.WARN, f"NVIDIA_VISIBLE_DEVICES={_value(vis.nvidia_visible_devices)} asks for a GPU, "
                                       f"but none is visible here and the PCI bus cannot be read ({vis.pci_error})",
                       fix="on a machine with an NVIDIA GPU, " + FIX_CONTAINER + "; on one without, unset "
                           "NVIDIA_VISIBLE_DEVICES", readings=readings)
    return Verdict(G, Status.INFO, "no GPU visible here, and the PCI bus cannot be read",
                   detail=f"NVML: {nvml_why}; PCI bus: {vis.pci_error}", readings=readings)


def _without_class(error: str) -> str:
    """``RuntimeError: CUDA driver initialization failed`` -> ``CUDA driver initialization failed``."""
    return re.sub(r"^[\w.]+(?:Error|Exception): ", "", error)


def _nvml_sees(vis: GpuVisibility, name: str, count: int, build: Optional[TorchBuild], readings: dict) -> Verdict:
    nvml = f"NVML sees {count} GPU(s)"

    def says(status: Status, rest: str, error: str = "", **kw) -> Verdict:
        """``NVML sees 1 GPU(s) (NAME)``, ``rest`` and torch's ``error``: without the GPU's name where
        the line has no room for it, then with the error's class name left out, then with the error cut
        short (the detail keeps the name and the error whole)."""
        plain = _without_class(error)
        room = LINE_COLUMNS - len(f"G{G} {status.value}: {nvml}{rest}")
        shorter = [f"{nvml}{rest}{plain}", f"{nvml}{rest}{clipped(plain, room)}"] if error else []
        summary = fitting(G, status, f"{nvml} ({name}){rest}{error}", f"{nvml}{rest}{error}", *shorter)
        parts = [kw.pop("detail", ""), "" if summary.startswith(f"{nvml} ({name})") else f"NVML's GPU 0: {name}",
                 "" if summary.endswith(error) else f"torch: {error}"]
        return Verdict(G, status, summary, detail="; ".join(p for p in parts if p), readings=readings, **kw)

    if build is None:  # unread (refused in a replay, say): torch may well be installed
        return says(Status.INFO, "; torch's reading could not be read (see G1's torch line)")
    if not build.installed:
        return says(Status.INFO, "; torch is not installed")
    if not build.usable or not build.compiled_with_cuda:
        return says(Status.INFO, f"; torch cannot be asked: {build.gpu_unavailable} (see G1's torch line)")
    cvd = vis.cuda_visible_devices
    if not build.has_device:
        if cvd is not None:
            return says(Status.FAIL, f" but torch sees none: CUDA_VISIBLE_DEVICES={_value(cvd)} hides "
                                     f"{'them' if count > 1 else 'it'}", fix=FIX_CUDA_VISIBLE)
        if not vis.dev_nodes:
            return says(Status.FAIL, " but torch sees none: no /dev/nvidia* here", fix=FIX_DEV_NODES,
                        detail="a device cgroup or the container's device list hides them")
        return says(Status.FAIL, " but torch sees none: ", error=(build.cuda_error or "no CUDA device")[:300],
                    fix="run nvidia-smi and python -c 'import torch; torch.cuda.init()' in this environment and "
                        "read the error; a driver updated without a reboot, or a driver older than torch's CUDA, "
                        "gives this (reboot, or update the driver)")
    seen = build.device_count
    chosen = f" (CUDA_VISIBLE_DEVICES={_value(cvd)} chooses)" if cvd is not None and seen < count else ""
    return says(Status.PASS, f"; torch sees {seen}{chosen}")
