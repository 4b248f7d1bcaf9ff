"""G10 — dual Spark is DDP/FSDP only.

Config review (fast), per ``--spark-launch-config`` file and for the launch environment:
- A file that cannot be read or parsed -> FAIL naming the file and the parse error.
- A file past the review's limits (not a regular file, over 1 MiB, nested too deeply, YAML
  aliases expanding past 100 000 values) -> FAIL naming the file and the limit; the fix says to
  review it by hand.
- Tensor parallel size > 1 that spans nodes -> FAIL naming the file, key and line, with the fix
  (DDP or FSDP). GPUs per node: under the GB10 profile always 1 (a Spark has one GPU, so any
  TP > 1 spans nodes even where the file does not say how many nodes there are); elsewhere the
  file's own per-node process count, else this machine's GPU count (NVML), else the profile's.
  TP <= GPUs per node stays inside one node -> PASS. GPUs per node unknown -> INFO.
- No TP > 1: DDP, FSDP, DeepSpeed ZeRO or plain data parallel -> PASS.
- A file with no launch command and no parallelism setting -> INFO; nothing given -> INFO.
The worst file decides the status; the line names its finding and how many more there are, the
detail each file's finding, worst first.

Collective probe (multinode), from the ranks' results on this node:
- Not run (no torch) -> SKIP.
- A rank that wrote no result, reported an error (a dead or hung peer, reported within the
  probe's timeout), or a torchrun that had to be killed -> FAIL.
- The loopback rehearsal, or gloo between nodes -> INFO with the figures (neither measures the
  NCCL link).
- NCCL between nodes, largest-message bus bandwidth B against the profile's link range (GB10:
  20-24 GB/s with both RoCE devices in NCCL_IB_HCA and MTU 9000): B >= 0.9 x low -> PASS;
  B <= 5 GB/s (the ~3 GB/s of a link set up wrong) -> FAIL; between -> WARN. No figure in the
  profile -> INFO. Findings of the NCCL setup review (NCCL_IB_HCA naming every active RoCE
  device, MTU 9000 on their interfaces, NCCL_SOCKET_IFNAME matching an interface) go into the
  fix and the detail; the line gives the figure and the range it was judged against.

Rules:

Config review, per file, the worst one deciding (its finding first in the line):
- unreadable (missing, not UTF-8) or malformed (YAML/JSON error with line and column,
  an unterminated quote in a launch command) → **FAIL** naming the file and the error.
- past the review's limits → **FAIL** naming the file and the limit, with the fix "review it by
  hand, or pass the launcher's own command line or config": not a regular file (`/dev/zero`, a
  FIFO, a directory: refused before it is opened for reading), over 1 MiB, nested more than 100
  levels, more than 100 000 values once YAML aliases are expanded (a billion-laughs file), a
  recursive YAML alias, or `$VARIABLES` that expand to more than 4 MiB
  (`G10 FAIL: laughs.yaml: too large to review: more than 100000 values once its aliases are expanded`).
- tensor parallel size > 1 spanning nodes → **FAIL** naming file, key and line. GPUs per node:
  under the GB10 profile 1 (so any TP > 1 spans nodes, even where the file does not say how many
  nodes there are); elsewhere the file's per-node process count, else this machine's GPU count
  (NVML), else the profile's. TP within one node → **PASS**; GPUs per node unknown → **INFO**.
- no TP > 1: DDP, FSDP, ZeRO, plain data parallel → **PASS**.
- `PARALLELISM_CONFIG_TP_SIZE` > 1 in the environment spanning nodes → **FAIL**; other launch
  variables → **INFO** (the node count they imply).
- nothing given → **INFO**; a file with nothing recognised → **INFO**; a YAML file without
  PyYAML installed → **SKIP** for that file.

Collective probe:
- a rank that wrote no result, a rank's error (its own or the lost peer's), torchrun killed at
  the deadline → **FAIL**, root causes before the SIGTERM'd followers.
- loopback rehearsal (no node count given), or gloo between nodes → **INFO** with the figures:
  neither measures NCCL over the link.
- NCCL between nodes, against the profile's link range (GB10: 20–24 GB/s bus bandwidth with
  both RoCE devices in `NCCL_IB_HCA` and MTU 9000): a busbw above the platform's link line rate
  (GB10: 25 GB/s, ConnectX-7 at 200 Gb/s, 5 % allowed; `profiles.beyond`) → **WARN** that it is not
  this platform's link, nothing judged from it; largest-message busbw ≥ 0.9 × low → **PASS**;
  ≤ 5 GB/s (the ≈ 3 GB/s of a link set up wrong) → **FAIL**; between → **WARN**; no figure in the
  profile → **INFO**. The NCCL setup review's findings go into the fix: `NCCL_IB_HCA` unset or
  naming fewer than the active RoCE devices (or devices this node lacks), an MTU other than 9000
  on their interfaces, `NCCL_SOCKET_IFNAME` unset or matching no interface, `NCCL_IB_DISABLE=1`.
- below the range with that setup already right (what its fix would set is set), the fix moves to
  the link itself, read from `/sys/class/infiniband`: an active RoCE port whose physical state is
  not LinkUp (reseat or replace the cable); an adapter whose PCIe link runs below its most
  (`current_link_width` under `max_link_width`, or a lower speed: an older BIOS wires a Spark's
  second ConnectX-7 function at Gen5 x2; update the firmware with `fwupdmgr`, power-cycle, check
  the width again); none of these → measure each rail alone with `ib_write_bw`, then cable, a full
  power cycle, the ConnectX firmware and a release NCCL (2.28.9 or later). It never repeats a
  setting that is already in place.
"""

from __future__ import annotations

from typing import Optional

from ...base.units import describe_size
from ..profiles import Profile, beyond
from ..readings.dist import CollectiveRun, NetSetup, RankResult
from ..readings.gpu import GpuInventory
from ..readings.launch import MAX_FILE_BYTES, LaunchFile, LaunchReview, to_int
from ..readings.remedies import Change, changes_json
from ..verdict import Status, Verdict

G = 10
SLOW_BUSBW_GBPS = 5.0
PASS_FRACTION = 0.9
FIX_TP = ("use DDP or FSDP on two Sparks, never tensor parallelism across nodes: set the tensor parallel size to 1 "
          "(--tensor-parallel-size 1, tensor_model_parallel_size: 1, megatron_lm_tp_degree: 1) and shard with FSDP "
          "(accelerate distributed_type: FSDP) or DeepSpeed ZeRO; to serve a model that fits one Spark, run one "
          "replica per Spark")
FIX_PARSE = "fix the file (the error names the line), or pass the config the launch really uses"
FIX_LIMIT = ("review it by hand, or pass the launcher's own command line or config (a regular file of at most "
             f"{describe_size(MAX_FILE_BYTES)}, as the launch reads it)")
FIX_PROBE = ("run the same command on every node with its own node rank; check that MASTER_ADDR is reachable on the "
             "link (ping it), that NCCL_SOCKET_IFNAME names the link's interface, and rerun with NCCL_DEBUG=INFO")


# -- config review -------------------------------------------------------------------------------------
def gpus_per_node(f: Optional[LaunchFile], profile: Profile, inventory: Optional[GpuInventory]) -> tuple[Optional[int], str]:
    """GPUs one node has for this launch, and where that figure came from."""
    if profile.key == "gb10":
        return 1, "a Spark has one GPU"
    if f is not None and f.procs_per_node:
        n = f.procs_per_node
        return n, f"{n} process{'es' if n != 1 else ''} per node in the file"
    if inventory is not None and inventory.devices:
        return len(inventory.devices), f"this node has {len(inventory.devices)} GPU(s)"
    if profile.gpus_per_node:
        return profile.gpus_per_node, f"the {profile.key} profile has {profile.gpus_per_node} GPUs per node"
    return None, ""


STRATEGY_LABELS = {"MULTI_GPU": "DDP (distributed_type MULTI_GPU)", "FSDP": "FSDP", "DEEPSPEED": "DeepSpeed",
                   "MEGATRON_LM": "Megatron-LM", "NO": "a single process", "ddp": "DDP", "fsdp": "FSDP"}


def _strategy(f: LaunchFile) -> str:
    strategy = f.strategy
    nodes = f" across {f.nodes} nodes" if f.nodes and f.nodes > 1 else ""
    tp = " (tensor parallel 1)" if f.tp is not None else ""
    if strategy:
        return f"{STRATEGY_LABELS.get(strategy, strategy)}{nodes}{tp}"
    return f"data parallel{nodes}{tp or ' (no tensor parallelism set)'}"


def judge_file(f: LaunchFile, profile: Profile, inventory: Optional[GpuInventory]) -> tuple[Status, str]:
    """The file's status and finding, its path as given (the line shows :func:`brief`)."""
    name = f.path + (f" (named by {f.referenced_by})" if f.referenced_by else "")
    if f.error:
        return Status.FAIL, f"{name}: {f.error}"
    if f.unsupported:
        return Status.SKIP, f"{name}: {f.unsupported}"
    if not f.settings and not f.launchers:
        return Status.INFO, f"{name}: no launch command or parallelism setting recognised ({f.format})"
    tp = f.tp
    if tp is not None and tp.value is None:
        return Status.INFO, f"{name}: tensor parallel size {tp.raw!r} ({tp.where}) is not a number here"
    if tp is not None and tp.value > 1:
        per_node, why = gpus_per_node(f, profile, inventory)
        if per_node is None:
            return Status.INFO, (f"{name}: tensor parallel {tp.value} ({tp.where}); GPUs per node unknown "
                                 "(--spark-profile gb10 judges for Sparks)")
        if tp.value > per_node:
            return Status.FAIL, f"{name}: tensor parallel {tp.value} ({tp.where}) spans nodes ({why})"
        return Status.PASS, f"{name}: tensor parallel {tp.value} ({tp.where}) stays inside one node ({why})"
    return Status.PASS, f"{name}: {_strategy(f)}"


def brief(f: LaunchFile, status: Status, text: str) -> str:
    """A file's finding for the line: its file name without the folder, its tensor parallel size
    without where it was set (the detail keeps both)."""
    base = f.path.replace("\\", "/").rsplit("/", 1)[-1] or f.path
    named = f.path + (f" (named by {f.referenced_by})" if f.referenced_by else "")  # how the text starts
    rest = text[len(named):] if text.startswith(named) else text
    tp = f.tp
    if tp is not None and tp.value is not None and tp.where and f" ({tp.where})" in rest:
        rest = rest.replace(f" ({tp.where})", "", 1)
    text = base + rest
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS - 1].rstrip() + "…"


BRIEF_CHARS = 90  # a file's finding in the line (the detail keeps it whole)


def judge_environment(env: dict[str, str], profile: Profile) -> Optional[tuple[Status, str]]:
    if not env:
        return None
    tp = to_int(env.get("PARALLELISM_CONFIG_TP_SIZE", ""))
    world, local = to_int(env.get("WORLD_SIZE", "")), to_int(env.get("LOCAL_WORLD_SIZE", ""))
    nodes = to_int(env.get("NNODES") or env.get("PET_NNODES") or env.get("SLURM_NNODES") or "")
    if nodes is None and world and local:
        nodes = max(1, world // local)
    shape = ", ".join(f"{k}={env[k]}" for k in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "NNODES", "PET_NNODES") if k in env)
    if tp and tp > 1:
        per_node = 1 if profile.key == "gb10" else local
        if per_node is not None and tp > per_node:
            return Status.FAIL, f"environment: PARALLELISM_CONFIG_TP_SIZE={tp} spans nodes ({shape or 'launch variables'})"
    if shape:
        return Status.INFO, f"environment: launched as {nodes or '?'} node(s) ({shape})"
    return None


def judge_launch(review: LaunchReview, profile: Profile, inventory: Optional[GpuInventory] = None) -> Verdict:
    findings, briefs = [], []
    for f in review.files:
        status, text = judge_file(f, profile, inventory)
        findings.append((status, text))
        briefs.append((status, brief(f, status, text)))
    env = judge_environment(review.environment, profile)
    if env is not None:
        findings.append(env)
        briefs.append(env)
    readings = {
        "files": [{"path": f.path, "format": f.format, "error": f.error,
                   "tp": f.tp.value if f.tp is not None else None, "nodes": f.nodes, "strategy": f.strategy}
                  for f in review.files],
        "environment": review.environment,
        "profile": profile.key,
    }
    if not findings:
        return Verdict(G, Status.INFO, "no launch config given (--spark-launch-config PATH)",
                       detail="PATH: accelerate or Megatron/NeMo YAML, DeepSpeed JSON, a vLLM/SGLang command or "
                              "args file, a torchrun script", readings=readings)
    findings.sort(key=lambda item: -item[0].rank)
    briefs.sort(key=lambda item: -item[0].rank)
    status = findings[0][0]
    more = f" (+{len(briefs) - 1} more)" if len(briefs) > 1 else ""
    lead = briefs[0][1]
    if len(lead) + len(more) > BRIEF_CHARS:  # the count fits in the line too
        lead = lead[:BRIEF_CHARS - len(more) - 1].rstrip() + "…"
    summary = lead + more
    detail = "; ".join(text for _, text in findings)
    if len(detail) > 1000:
        detail = detail[:999] + "…"
    fix = ""
    if status is Status.FAIL:
        fixes = []
        if any(s is Status.FAIL and "spans nodes" in t for s, t in findings):
            fixes.append(FIX_TP)
        if any(f.error and not f.over_limit for f in review.files):
            fixes.append(FIX_PARSE)
        if any(f.over_limit for f in review.files):
            fixes.append(FIX_LIMIT)
        fix = "; ".join(fixes)
    if status is Status.WARN and not fix:
        fix = FIX_TP
    return Verdict(G, status, summary, detail=detail if detail != summary else "", fix=fix, readings=readings)


# -- NCCL setup review -------------------------------------------------------------------------------
def _names(value: str) -> tuple[list[str], bool, bool]:
    """NCCL's device/interface list syntax: '^' excludes, '=' matches exactly, ':port' suffixes."""
    exclude = value.startswith("^")
    value = value.lstrip("^")
    exact = value.startswith("=")
    value = value.lstrip("=")
    return [part.split(":")[0].strip() for part in value.split(",") if part.strip()], exclude, exact


def _matches(name: str, patterns: list[str], exact: bool) -> bool:
    return any(name == p if exact else name.startswith(p) for p in patterns)


def nccl_findings(net: Optional[NetSetup], profile: Profile) -> list[str]:
    """What stands between this node's NCCL setup and the link's full bandwidth."""
    return [finding for finding, _, _ in _nccl(net, profile)]


def nccl_steps(net: Optional[NetSetup], profile: Profile) -> list[str]:
    """What to do about each of :func:`nccl_findings`, as instructions."""
    return [step for _, step, _ in _nccl(net, profile)]


def nccl_changes(net: Optional[NetSetup], profile: Profile) -> list[Change]:
    """What :func:`nccl_steps` change, as a program would apply them (the tests do)."""
    return [change for _, _, changes in _nccl(net, profile) for change in changes]


def _nccl(net: Optional[NetSetup], profile: Profile) -> list[tuple[str, str, tuple[Change, ...]]]:
    """(finding, what to do, what that changes) for each thing between this node's NCCL setup and the
    link's full bandwidth."""
    if net is None:
        return []
    if net.error:
        return [(f"network setup unreadable: {net.error}", "check that /sys/class/net and /sys/class/infiniband "
                                                            "are readable here (a container hides them)",
                 (Change("measure", "/sys/class/infiniband"),))]
    env, out = net.env, []
    active = [d for d in net.rdma if d.active]
    if env.get("NCCL_IB_DISABLE") == "1":
        out.append(("NCCL_IB_DISABLE=1: NCCL uses TCP sockets, not RoCE", "unset NCCL_IB_DISABLE so that NCCL uses RoCE",
                    (Change("unset", "NCCL_IB_DISABLE"),)))
    hca = env.get("NCCL_IB_HCA")
    names = [d.name for d in active]
    every = f"export NCCL_IB_HCA={','.join(names)}"
    set_every = (Change("env", "NCCL_IB_HCA", ",".join(names)),) if names else ()
    if hca:
        patterns, exclude, exact = _names(hca)
        if not exclude:
            unknown = [p for p in patterns if not any(_matches(d.name, [p], exact) for d in net.rdma)]
            if unknown:
                out.append((f"NCCL_IB_HCA names {', '.join(unknown)}, which this node does not have "
                            f"(RDMA devices: {', '.join(d.name for d in net.rdma) or 'none'})",
                            f"name this node's RDMA devices: {every}" if names else
                            "name this node's RDMA devices in NCCL_IB_HCA (ibv_devinfo lists them)", set_every))
            used = [n for n in names if _matches(n, patterns, exact)]
            if len(active) >= 2 and len(used) < len(active):
                out.append((f"NCCL_IB_HCA={hca} uses {len(used)} of {len(active)} active RoCE devices: {every}",
                            f"name every active RoCE device: {every}", set_every))
    elif len(active) >= 2:
        out.append((f"NCCL_IB_HCA is not set: name every active RoCE device: {every}",
                    f"name every active RoCE device: {every}", set_every))
    for dev in active:
        if (dev.link_layer or "Ethernet") != "Ethernet":
            continue
        for netdev in dev.netdevs:
            iface = net.interface(netdev)
            if iface is not None and iface.mtu is not None and iface.mtu != 9000:
                out.append((f"MTU {iface.mtu} on {netdev} ({dev.name}): sudo ip link set {netdev} mtu 9000 on both nodes",
                            f"set MTU 9000 on both nodes: sudo ip link set {netdev} mtu 9000",
                            (Change("mtu", netdev, "9000"),)))
    if not active and profile.key == "gb10":
        out.append(("no active RDMA device: NCCL falls back to TCP sockets",
                    "bring the link's RoCE port up (cable, driver) until ibv_devinfo shows it PORT_ACTIVE",
                    (Change("measure", "ibv_devinfo"),)))
    ifname = env.get("NCCL_SOCKET_IFNAME")
    link = net.link or "<the link's interface>"
    if not ifname:
        out.append(("NCCL_SOCKET_IFNAME is not set: NCCL picks the bootstrap interface itself",
                    f"export NCCL_SOCKET_IFNAME={link}", (Change("env", "NCCL_SOCKET_IFNAME", link),)))
    else:
        patterns, exclude, exact = _names(ifname)
        if not exclude and not any(_matches(i.name, patterns, exact) for i in net.interfaces):
            out.append((f"NCCL_SOCKET_IFNAME={ifname} matches no interface on this node",
                        f"export NCCL_SOCKET_IFNAME={link}", (Change("env", "NCCL_SOCKET_IFNAME", link),)))
    return out


# -- the link itself, once NCCL is set up for it ----------------------------------------------------------
def link_findings(net: Optional[NetSetup]) -> list[tuple[str, str, tuple[Change, ...]]]:
    """(finding, what to do, changes) about the link under a right NCCL setup: a RoCE port whose
    physical link is not up, an adapter whose PCIe link runs below what it can (a Spark's second
    ConnectX-7 function wired at Gen5 x2 by an older BIOS halves that rail)."""
    if net is None or net.error:
        return []
    out = []
    for dev in net.rdma:
        if not dev.netdevs or (dev.link_layer or "Ethernet") != "Ethernet":
            continue
        if dev.active and dev.phys_state and dev.phys_state.lower() != "linkup":
            out.append((f"{dev.name}'s port is {dev.phys_state}, not LinkUp",
                        f"check the cable of {dev.name} ({', '.join(dev.netdevs)}): reseat or replace it until ibstat "
                        "shows Physical state: LinkUp on both nodes", (Change("measure", "ibstat", dev.name),)))
        if not dev.active:
            continue
        narrow = dev.pcie_width is not None and dev.pcie_max_width is not None and dev.pcie_width < dev.pcie_max_width
        slow = bool(dev.pcie_speed and dev.pcie_max_speed and _gts(dev.pcie_speed) < _gts(dev.pcie_max_speed))
        if narrow or slow:
            now = f"x{dev.pcie_width} at {dev.pcie_speed}" if dev.pcie_width else f"{dev.pcie_speed}"
            most = f"x{dev.pcie_max_width} at {dev.pcie_max_speed}" if dev.pcie_max_width else f"{dev.pcie_max_speed}"
            out.append((f"{dev.name}'s PCIe link runs {now}, below its {most}",
                        f"update the machine's firmware (sudo fwupdmgr refresh && sudo fwupdmgr update: an older BIOS "
                        f"wires the second adapter at x2), power-cycle it fully, then check that "
                        f"/sys/class/infiniband/{dev.name}/device/current_link_width reads {dev.pcie_max_width or 'its max'}",
                        (Change("measure", "current_link_width", dev.name),)))
    return out


def _gts(speed: str) -> float:
    """``32.0 GT/s PCIe`` -> 32.0 (0 when it says no figure)."""
    try:
        return float(speed.split()[0])
    except (ValueError, IndexError):
        return 0.0


def per_rail(net: Optional[NetSetup]) -> tuple[str, tuple[Change, ...]]:
    """The measurement that decides what comes next when NCCL is set up right and the link reads
    healthy: each rail alone with ib_write_bw, then cable, power, firmware, NCCL's build."""
    rails = [d.name for d in (net.rdma if net is not None and not net.error else []) if d.active] or ["<each RoCE device>"]
    first = rails[0]
    firmware = sorted({d.fw_ver for d in net.rdma if d.fw_ver}) if net is not None and not net.error else []
    fw = f" (now {', '.join(firmware)})" if firmware else ""
    text = (f"run ib_write_bw on each rail alone ({', '.join(rails)}): ib_write_bw -d {first} -x 3 --report_gbits on "
            "one node, the same command with the first node's address on the other; a rail well below the other: "
            "reseat or replace the QSFP cable, power-cycle both machines fully (AC unplugged), update the ConnectX "
            f"firmware{fw}; every rail fast: use a release NCCL (2.28.9 or later; a development build plateaued at "
            "3 GB/s with this setup right)")
    return text, tuple(Change("measure", "ib_write_bw", r) for r in rails)


def describe_link(net: Optional[NetSetup]) -> str:
    """The link as found: interface, driver, speed, MTU, and the RDMA devices (never a guessed NIC model)."""
    if net is None or net.error:
        return "link unknown"
    parts = []
    iface = net.interface(net.link) if net.link else None
    if iface is not None:
        details = [d for d in (iface.driver, f"{iface.speed_mbps} Mb/s" if iface.speed_mbps else None,
                               f"MTU {iface.mtu}" if iface.mtu else None) if d]
        parts.append(f"link {iface.name}" + (f" ({', '.join(details)})" if details else ""))
    else:
        parts.append(f"link not identified ({net.link_reason})")
    active = [d.name for d in net.rdma if d.active]
    parts.append(f"RDMA {', '.join(active)} active" if active else "no active RDMA device")
    return ", ".join(parts)


# -- the collective probe ---------------------------------------------------------------------------
def _problems(run: CollectiveRun) -> list[str]:
    root, followers = [], []
    for rank in run.missing_ranks:
        root.append(f"rank {rank} wrote no result (torchrun exit code {run.returncode})")
    for r in run.ranks:
        if r.error:
            (followers if "SIGTERM" in r.error else root).append(f"rank {r.rank}: {r.error}")
    if run.timed_out:
        root.append(f"torchrun did not finish in time and was killed after {run.seconds:.0f} s")
    elif not root and not followers and run.returncode not in (0, None):
        last = [line for line in run.log_tail.splitlines() if line.strip()][-1:]
        root.append(f"torchrun exited with code {run.returncode}" + (f": {last[0][:200]}" if last else ""))
    return root + followers


def _figures(rank: RankResult) -> tuple[Optional[float], str]:
    large = max(rank.large, key=lambda row: row.size_bytes) if rank.large else None
    small = min(rank.small, key=lambda row: row.size_bytes) if rank.small else None
    parts = []
    if large is not None:
        parts.append(f"all-reduce bus bandwidth {large.busbw_gbps:.2f} GB/s at {large.size_bytes / 2**20:g} MiB")
    if small is not None:
        parts.append(f"{small.size_bytes} B latency {small.latency_us_median:.0f} µs")
    return (large.busbw_gbps if large is not None else None), ", ".join(parts)


def judge_collective(run: CollectiveRun, profile: Profile) -> Verdict:
    readings = {
        "mode": run.mode, "nnodes": run.nnodes, "node_rank": run.node_rank, "returncode": run.returncode,
        "timed_out": run.timed_out, "seconds": round(run.seconds, 2), "missing_ranks": run.missing_ranks,
        "ranks": [{"rank": r.rank, "backend": r.backend, "device": r.device, "error": r.error,
                   "busbw_gbps": [round(row.busbw_gbps, 3) for row in r.large],
                   "latency_us": [round(row.latency_us_median, 1) for row in r.small]} for r in run.ranks],
    }
    if not run.attempted:
        return Verdict(G, Status.SKIP, f"collective probe not run: {run.reason}", readings=readings)
    problems = _problems(run)
    first = run.ranks[0] if run.ranks else None
    net = first.net if first is not None else None
    nccl = run.mode == "multinode" and first and first.backend == "nccl"
    findings = nccl_findings(net, profile) if nccl else []
    steps = nccl_steps(net, profile) if nccl else []
    if problems:
        where = f"node {run.node_rank} of {run.nnodes}" if run.mode == "multinode" else "loopback rehearsal"
        fix = FIX_PROBE + ("; then " + "; ".join(steps) if steps else "")
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        lead = f"collective probe failed ({where}): {problems[0]}"
        if len(lead) + len(more) > BRIEF_CHARS:  # the line keeps 90 characters, the detail every problem whole
            lead = lead[:BRIEF_CHARS - len(more) - 1].rstrip() + "…"
        return Verdict(G, Status.FAIL, lead + more, detail="; ".join(problems)[:1000], fix=fix, readings=readings)
    assert first is not None
    busbw, figures = _figures(first)
    how = f"{first.backend} on {first.device}"
    link = describe_link(net)
    rate = f"{busbw:.2f} GB/s all-reduce bus bandwidth" if busbw is not None else figures
    if run.mode == "rehearsal":
        return Verdict(G, Status.INFO,
                       f"loopback rehearsal ({run.nproc_per_node} processes, {how}): {rate}; not the link",
                       detail=f"{figures}; {link}; this tests the probe, not the link between nodes: run it on every "
                              "node with SPARK_GOTCHAS_NNODES=2 SPARK_GOTCHAS_NODE_RANK=<n> MASTER_ADDR=<node 0>",
                       readings=readings)
    head = f"{run.nnodes} nodes, {first.backend}: {rate}"  # the device is in the detail: the line keeps 100 columns
    more = f"{how}: {figures}; {link}" + (f"; {'; '.join(findings)}" if findings else "")
    if first.backend != "nccl":
        return Verdict(G, Status.INFO, f"{head} (over TCP sockets: not NCCL's figure)", detail=more[:1000],
                       readings=readings)
    expected = profile.link_busbw_gbps
    if expected is None or busbw is None:
        return Verdict(G, Status.INFO, f"{head}; no link figure in the {profile.key} profile",
                       detail=more[:1000], readings=readings)
    impossible = beyond(profile, link_busbw_gbps=busbw)
    if impossible is not None:  # faster than the link can carry: not this platform's link
        return impossible.verdict(G, "link", readings)
    rng = f"{expected.lo:g}-{expected.hi:g} GB/s expected"
    more += f"; {rng} for the {profile.key} profile's link set up right"
    if busbw >= PASS_FRACTION * expected.lo:
        return Verdict(G, Status.PASS, f"{head}, {rng}", detail=more[:1000], readings=readings)
    if steps:  # what the setup lacks comes first: the link is judged once NCCL is set up for it
        fix, changes = "; ".join(steps), nccl_changes(net, profile)
    else:  # set up right and still slow: the next cause is the link itself
        link = link_findings(net)
        rail, measure = per_rail(net)
        fix = "; ".join([step for _, step, _ in link] + ([] if link else [rail]))
        changes = [c for _, _, cs in link for c in cs] or list(measure)
        if link:
            more += "; " + "; ".join(finding for finding, _, _ in link)
        else:
            more += "; NCCL's setup on this node is right (every active RoCE device in NCCL_IB_HCA, MTU 9000)"
    readings["remedy"] = changes_json(changes)
    if busbw <= SLOW_BUSBW_GBPS:
        wrong = f"; at most {SLOW_BUSBW_GBPS:g} GB/s is the figure of a link set up wrong"
        return Verdict(G, Status.FAIL, f"{head}: far below the {rng}", detail=(more + wrong)[:1000], fix=fix,
                       readings=readings)
    return Verdict(G, Status.WARN, f"{head}: below the {rng}", detail=more[:1000], fix=fix, readings=readings)
