"""This node's network as NCCL would use it: RDMA devices, their interfaces, MTU, speed, NCCL variables.

Read without root from /sys (and psutil for addresses). By hand: ``ibdev2netdev; ip -br addr;
cat /sys/class/net/*/mtu; cat /sys/class/infiniband/*/ports/1/{state,phys_state,rate};
cat /sys/class/infiniband/*/fw_ver; cat /sys/class/infiniband/*/device/{current,max}_link_{speed,width};
env | grep NCCL_``.
Names are reported as found: the link is described by its interface, driver and speed, never
assumed to be a particular NIC.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Optional

from ..knowledge.readings.dist import Interface, NetSetup, RdmaDevice

ENV_PREFIXES = ("NCCL_", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "MASTER_ADDR")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:  # EINVAL for speed on a down link, ENOENT, EACCES
        return None


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_interfaces(sys_root: str, addresses: dict[str, list[str]]) -> list[Interface]:
    base = os.path.join(sys_root, "class", "net")
    out = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        here = os.path.join(base, name)
        speed = _int(_read(os.path.join(here, "speed")))
        driver_link = os.path.join(here, "device", "driver")
        driver = os.path.basename(os.path.realpath(driver_link)) if os.path.exists(driver_link) else None
        state = _read(os.path.join(here, "operstate"))
        out.append(Interface(
            name=name,
            up=state in ("up", "unknown") if name != "lo" else True,
            mtu=_int(_read(os.path.join(here, "mtu"))),
            speed_mbps=speed if speed is not None and speed > 0 else None,
            driver=driver,
            ipv4=addresses.get(name, []),
        ))
    return out


def _after_colon(text: Optional[str]) -> Optional[str]:
    """``4: ACTIVE`` -> ``ACTIVE``, ``5: LinkUp`` -> ``LinkUp``."""
    return text.split(":", 1)[-1].strip() if text else None


def read_rdma(sys_root: str) -> list[RdmaDevice]:
    base = os.path.join(sys_root, "class", "infiniband")
    out = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        here = os.path.join(base, name)
        device = os.path.join(here, "device")  # the adapter's PCI function
        net = os.path.join(device, "net")
        out.append(RdmaDevice(
            name=name,
            netdevs=sorted(os.listdir(net)) if os.path.isdir(net) else [],
            state=_after_colon(_read(os.path.join(here, "ports", "1", "state"))),  # "4: ACTIVE"
            rate=_read(os.path.join(here, "ports", "1", "rate")),
            link_layer=_read(os.path.join(here, "ports", "1", "link_layer")),
            phys_state=_after_colon(_read(os.path.join(here, "ports", "1", "phys_state"))),  # "5: LinkUp"
            fw_ver=_read(os.path.join(here, "fw_ver")),
            pci_address=os.path.basename(os.path.realpath(device)) if os.path.exists(device) else None,
            pcie_speed=_read(os.path.join(device, "current_link_speed")),
            pcie_width=_int(_read(os.path.join(device, "current_link_width"))),
            pcie_max_speed=_read(os.path.join(device, "max_link_speed")),
            pcie_max_width=_int(_read(os.path.join(device, "max_link_width"))),
        ))
    return out


def ipv4_addresses() -> dict[str, list[str]]:
    """Interface -> ["addr/prefix"], from psutil (empty when psutil cannot tell)."""
    try:
        import psutil

        out: dict[str, list[str]] = {}
        for name, addrs in psutil.net_if_addrs().items():
            for a in addrs:
                if a.family == socket.AF_INET and a.netmask:
                    prefix = ipaddress.IPv4Network(f"0.0.0.0/{a.netmask}").prefixlen
                    out.setdefault(name, []).append(f"{a.address}/{prefix}")
        return out
    except Exception:
        return {}


def link_for(master_addr: Optional[str], interfaces: list[Interface]) -> tuple[Optional[str], str]:
    """The interface on MASTER_ADDR's subnet, and how it was chosen."""
    if not master_addr:
        return None, "MASTER_ADDR is not set"
    try:
        ip = ipaddress.ip_address(master_addr)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(master_addr))
        except (OSError, ValueError):
            return None, f"MASTER_ADDR {master_addr} does not resolve"
    if ip.is_loopback:
        return "lo", f"MASTER_ADDR {master_addr} is loopback"
    for iface in interfaces:
        for cidr in iface.ipv4:
            try:
                if ip in ipaddress.ip_interface(cidr).network:
                    return iface.name, f"{iface.name} holds {cidr}, the subnet of MASTER_ADDR {master_addr}"
            except ValueError:
                continue
    return None, f"no interface is on the subnet of MASTER_ADDR {master_addr} (it is routed)"


def read_net_setup(master_addr: Optional[str] = None, sys_root: str = "/sys",
                   addresses: Optional[dict[str, list[str]]] = None,
                   environ: Optional[dict[str, str]] = None) -> NetSetup:
    env = os.environ if environ is None else environ
    try:
        interfaces = read_interfaces(sys_root, ipv4_addresses() if addresses is None else addresses)
        link, why = link_for(master_addr if master_addr is not None else env.get("MASTER_ADDR"), interfaces)
        return NetSetup(
            env={k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)},
            interfaces=interfaces, rdma=read_rdma(sys_root), link=link, link_reason=why,
        )
    except Exception as exc:  # a reading, never a crash of the probe
        return NetSetup(error=f"{type(exc).__name__}: {exc}")
