"""G10 collective probe: the NCCL setup review on a Spark-like /sys, the judgement of measured figures,
and the real probe under torchrun with gloo on loopback (a hung rank, a dead rank on another "node")."""

import json
import socket
import threading
import time

import pytest
from needs import requires_torch

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g10_parallelism as g10
from spark_gotchas.knowledge.profiles import GB10, H200
from spark_gotchas.knowledge.readings.dist import BandwidthRow, CollectiveRun, LatencyRow, RankResult
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.netsetup import read_net_setup
from spark_gotchas.machine.readers.dist import CollectiveConfig, command, run_collective

# ibdev2netdev on a Spark with one QSFP cable (NVIDIA/dgx-spark-playbooks nvidia/nccl/README.md):
#   rocep1s0f0 -> enp1s0f0np0 (Up), rocep1s0f1 -> enp1s0f1np1 (Down),
#   roceP2p1s0f0 -> enP2p1s0f0np0 (Up), roceP2p1s0f1 -> enP2p1s0f1np1 (Down); management NIC enP7s7.
RDMA = {"rocep1s0f0": ("enp1s0f0np0", True), "rocep1s0f1": ("enp1s0f1np1", False),
        "roceP2p1s0f0": ("enP2p1s0f0np0", True), "roceP2p1s0f1": ("enP2p1s0f1np1", False)}


def spark_sys(root, mtu=1500):
    """A /sys tree shaped like a Spark's: four RoCE ports (two up), mlx5_core netdevs, a management NIC."""
    drivers = root / "bus" / "pci" / "drivers"
    for driver in ("mlx5_core", "r8127"):
        (drivers / driver).mkdir(parents=True, exist_ok=True)

    def netdev(name, up, driver, mtu_value, speed):
        here = root / "class" / "net" / name
        (here / "device").mkdir(parents=True)
        (here / "mtu").write_text(f"{mtu_value}\n")
        (here / "operstate").write_text("up\n" if up else "down\n")
        (here / "speed").write_text(f"{speed if up else -1}\n")
        (here / "device" / "driver").symlink_to(drivers / driver)

    (root / "class" / "net" / "lo").mkdir(parents=True)
    (root / "class" / "net" / "lo" / "mtu").write_text("65536\n")
    netdev("enP7s7", True, "r8127", 1500, 10000)
    for dev, (nd, up) in RDMA.items():
        netdev(nd, up, "mlx5_core", mtu, 200000)
        here = root / "class" / "infiniband" / dev
        (here / "device" / "net" / nd).mkdir(parents=True)
        (here / "ports" / "1").mkdir(parents=True)
        (here / "ports" / "1" / "state").write_text("4: ACTIVE\n" if up else "1: DOWN\n")
        (here / "ports" / "1" / "rate").write_text("200 Gb/sec (4X HDR)\n" if up else "40 Gb/sec (4X QDR)\n")
        (here / "ports" / "1" / "link_layer").write_text("Ethernet\n")
    return str(root)


ADDRS = {"lo": ["127.0.0.1/8"], "enP7s7": ["10.0.0.21/24"], "enp1s0f0np0": ["192.168.100.10/24"]}


def test_the_setup_of_a_spark_is_read_from_sys(tmp_path):
    net = read_net_setup("192.168.100.11", spark_sys(tmp_path), ADDRS, environ={"NCCL_IB_HCA": "rocep1s0f0"})
    assert [d.name for d in net.rdma if d.active] == ["roceP2p1s0f0", "rocep1s0f0"]
    assert net.link == "enp1s0f0np0" and net.env == {"NCCL_IB_HCA": "rocep1s0f0"}
    link = net.interface("enp1s0f0np0")
    assert (link.driver, link.speed_mbps, link.mtu) == ("mlx5_core", 200000, 1500)
    assert g10.describe_link(net) == ("link enp1s0f0np0 (mlx5_core, 200000 Mb/s, MTU 1500), "
                                      "RDMA roceP2p1s0f0, rocep1s0f0 active")


def test_findings_name_both_hcas_the_mtu_and_the_socket_interface(tmp_path):
    net = read_net_setup("192.168.100.11", spark_sys(tmp_path), ADDRS, environ={"NCCL_IB_HCA": "rocep1s0f0"})
    assert g10.nccl_findings(net, GB10) == [
        "NCCL_IB_HCA=rocep1s0f0 uses 1 of 2 active RoCE devices: export NCCL_IB_HCA=roceP2p1s0f0,rocep1s0f0",
        "MTU 1500 on enP2p1s0f0np0 (roceP2p1s0f0): sudo ip link set enP2p1s0f0np0 mtu 9000 on both nodes",
        "MTU 1500 on enp1s0f0np0 (rocep1s0f0): sudo ip link set enp1s0f0np0 mtu 9000 on both nodes",
        "NCCL_SOCKET_IFNAME is not set: NCCL picks the bootstrap interface itself",
    ]


def test_the_playbook_setup_has_no_findings(tmp_path):
    env = {"NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0", "NCCL_SOCKET_IFNAME": "enP7s7"}
    net = read_net_setup("192.168.100.11", spark_sys(tmp_path, mtu=9000), ADDRS, environ=env)
    assert g10.nccl_findings(net, GB10) == []
    wrong = read_net_setup("192.168.100.11", spark_sys(tmp_path / "b", mtu=9000), ADDRS,
                           environ={**env, "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0,mlx5_1"})
    assert "NCCL_IB_HCA names mlx5_0, mlx5_1, which this node does not have" in g10.nccl_findings(wrong, GB10)[0]
    assert "NCCL_SOCKET_IFNAME=eth0 matches no interface on this node" in g10.nccl_findings(wrong, GB10)


def multinode(busbw, net=None, backend="nccl"):
    rank = RankResult(rank=0, world_size=2, local_world_size=1, backend=backend, device="NVIDIA GB10",
                      large=[BandwidthRow(64 << 20, 0.01, busbw * 0.8, busbw * 0.8, 5),
                             BandwidthRow(1 << 30, 0.1, busbw, busbw, 5)],
                      small=[LatencyRow(8, 27.8, 20), LatencyRow(1024, 31.9, 20)], net=net)
    return CollectiveRun(attempted=True, mode="multinode", nnodes=2, nproc_per_node=1, returncode=0, ranks=[rank])


def test_measured_figures_are_judged_against_the_spark_link(tmp_path):
    good_env = {"NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0", "NCCL_SOCKET_IFNAME": "enP7s7"}
    good = read_net_setup("192.168.100.11", spark_sys(tmp_path / "a", mtu=9000), ADDRS, environ=good_env)
    bad = read_net_setup("192.168.100.11", spark_sys(tmp_path / "b"), ADDRS, environ={})
    # 23.74 and 3.04 GB/s: the two figures of one Spark pair in NVIDIA/dgx-spark-playbooks PR #103
    v = g10.judge_collective(multinode(23.74, good), GB10)
    assert v.status is Status.PASS
    assert v.line == "G10 PASS: 2 nodes, nccl: 23.74 GB/s all-reduce bus bandwidth, 20-24 GB/s expected"
    assert v.detail == ("nccl on NVIDIA GB10: all-reduce bus bandwidth 23.74 GB/s at 1024 MiB, 8 B latency 28 µs; "
                        "link enp1s0f0np0 (mlx5_core, 200000 Mb/s, MTU 9000), RDMA roceP2p1s0f0, rocep1s0f0 active; "
                        "20-24 GB/s expected for the gb10 profile's link set up right")
    slow = g10.judge_collective(multinode(3.04, bad), GB10)
    assert slow.status is Status.FAIL
    assert slow.line == "G10 FAIL: 2 nodes, nccl: 3.04 GB/s all-reduce bus bandwidth: far below the 20-24 GB/s expected"
    assert "; NCCL_IB_HCA is not set: name every active RoCE device: export NCCL_IB_HCA=roceP2p1s0f0,rocep1s0f0; " \
           "MTU 1500 on enP2p1s0f0np0" in slow.detail
    assert slow.detail.endswith("; at most 5 GB/s is the figure of a link set up wrong")
    assert slow.fix == ("name every active RoCE device: export NCCL_IB_HCA=roceP2p1s0f0,rocep1s0f0; "
                        "set MTU 9000 on both nodes: sudo ip link set enP2p1s0f0np0 mtu 9000; "
                        "set MTU 9000 on both nodes: sudo ip link set enp1s0f0np0 mtu 9000; "
                        "export NCCL_SOCKET_IFNAME=enp1s0f0np0")
    mid = g10.judge_collective(multinode(12.0, bad), GB10)
    assert mid.status is Status.WARN
    assert mid.line == "G10 WARN: 2 nodes, nccl: 12.00 GB/s all-reduce bus bandwidth: below the 20-24 GB/s expected"
    h200 = g10.judge_collective(multinode(120.0), H200)
    assert h200.status is Status.INFO
    assert h200.line == "G10 INFO: 2 nodes, nccl: 120.00 GB/s all-reduce bus bandwidth; no link figure in the h200 profile"
    gloo = g10.judge_collective(multinode(1.1, backend="gloo"), GB10)
    assert gloo.line == "G10 INFO: 2 nodes, gloo: 1.10 GB/s all-reduce bus bandwidth (over TCP sockets: not NCCL's figure)"
    assert gloo.detail.startswith("gloo on NVIDIA GB10: all-reduce bus bandwidth 1.10 GB/s at 1024 MiB")
    assert all(len(x.line) <= 100 for x in (v, slow, mid, h200, gloo))


def test_a_bus_bandwidth_past_the_sparks_link_is_no_spark_pairs_and_never_passes(tmp_path):
    """48 GB/s between two "Sparks": twice what ConnectX-7 at 200 Gb/s carries (an NVLink pair's figure
    recorded as a Spark's, or a profile taken wrong): never a PASS."""
    good_env = {"NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0", "NCCL_SOCKET_IFNAME": "enP7s7"}
    good = read_net_setup("192.168.100.11", spark_sys(tmp_path, mtu=9000), ADDRS, environ=good_env)
    v = g10.judge_collective(multinode(48.0, good), GB10)
    assert v.status is Status.WARN
    assert v.line == "G10 WARN: bus bandwidth 48.0 GB/s is 1.9x GB10's link: not a GB10's; link not judged"
    assert "1.9x GB10's 25 GB/s link" in v.detail
    assert v.fix.startswith("re-run on the machine the snapshot names")
    assert g10.judge_collective(multinode(25.5, good), GB10).status is Status.PASS  # within 5 % of the line rate


def test_a_run_round_trips_through_json(tmp_path):
    run = multinode(23.7, read_net_setup("192.168.100.11", spark_sys(tmp_path), ADDRS, environ={}))
    back = from_jsonable(CollectiveRun, json.loads(json.dumps(to_jsonable(run))))
    assert back == run and g10.judge_collective(back, GB10).line == g10.judge_collective(run, GB10).line


def test_the_command_is_one_process_per_node_and_stays_under_a_gigabyte():
    cmd = command(CollectiveConfig(nnodes=2, node_rank=1, master_addr="192.168.100.10", sizes="64M,256M,1G"), "/tmp/x")
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "1" and cmd[cmd.index("--node-rank") + 1] == "1"
    assert "--standalone" in command(CollectiveConfig(), "/tmp/x")
    from spark_gotchas.microbench.collective import main
    with pytest.raises(SystemExit):
        main(["--large", "16G"])  # refused: a 16 GB test froze a Spark


# -- the real probe under torchrun, gloo on loopback -------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@requires_torch
def test_a_hung_rank_is_reported_by_the_other_within_the_timeout(tmp_path):
    run = run_collective(CollectiveConfig(timeout_s=3, fault="1:hang"), str(tmp_path))
    assert run.returncode != 0 and not run.timed_out and run.seconds < 40
    rank0 = next(r for r in run.ranks if r.rank == 0)
    assert rank0.backend == "gloo" and rank0.stage.startswith("all-reduce of 8 B")
    assert rank0.error.startswith("RuntimeError at all-reduce of 8 B iteration 0: ") or \
        rank0.error.startswith("no progress for 3 s at all-reduce of 8 B")
    v = g10.judge_collective(run, GB10)
    assert v.status is Status.FAIL and v.line.startswith("G10 FAIL: collective probe failed (loopback rehearsal): "
                                                         "rank 0: ")
    assert v.fix.startswith("run the same command on every node")


@requires_torch
def test_two_nodes_on_loopback_a_dead_rank_is_reported_by_the_survivor(tmp_path):
    port, runs = free_port(), {}

    def node(rank):
        # both "nodes" are this machine: on NCCL they would share its one GPU, which NCCL refuses
        cfg = CollectiveConfig(nnodes=2, node_rank=rank, master_port=port, timeout_s=15, rendezvous_s=60,
                               fault="1:exit", backend="gloo")
        runs[rank] = run_collective(cfg, str(tmp_path))

    threads = [threading.Thread(target=node, args=(r,)) for r in (0, 1)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert time.monotonic() - t0 < 90
    survivor, dead = runs[0], runs[1]
    assert [r.rank for r in survivor.ranks] == [0] and survivor.ranks[0].error
    assert survivor.ranks[0].net is not None and survivor.ranks[0].net.link == "lo"
    v0 = g10.judge_collective(survivor, GB10)
    assert v0.status is Status.FAIL and v0.line.startswith("G10 FAIL: collective probe failed (node 0 of 2): rank 0: ")
    assert dead.missing_ranks == [1]
    assert g10.judge_collective(dead, GB10).line == ("G10 FAIL: collective probe failed (node 1 of 2): rank 1 wrote "
                                                     "no result (torchrun exit code 1)")


def test_no_torch_is_a_skip():
    v = g10.judge_collective(CollectiveRun(attempted=False, reason="torch is not installed"), GB10)
    assert v.line == "G10 SKIP: collective probe not run: torch is not installed"


def test_a_long_rank_error_is_cut_in_the_line_and_whole_in_the_detail():
    error = ("RuntimeError at all-reduce of 8 B iteration 0: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
             "Connection closed by peer [192.168.100.11]:29500")
    rank = RankResult(rank=0, world_size=2, local_world_size=1, backend="nccl", device="NVIDIA GB10", error=error)
    follower = RankResult(rank=1, world_size=2, local_world_size=1, backend="nccl", device="NVIDIA GB10",
                          error="SIGTERM from torchrun")
    run = CollectiveRun(attempted=True, mode="multinode", nnodes=2, node_rank=0, nproc_per_node=1, returncode=1,
                        ranks=[rank, follower])
    v = g10.judge_collective(run, GB10)
    assert v.status is Status.FAIL
    assert v.line == ("G10 FAIL: collective probe failed (node 0 of 2): rank 0: RuntimeError at all-reduce of "
                      "8… (+1 more)")
    assert len(v.line) <= 100
    assert v.detail == f"rank 0: {error}; rank 1: SIGTERM from torchrun"


@pytest.mark.parametrize("own, launcher, rank", [("0", "1", 0), ("1", "0", 1), ("", "1", 1), ("", "", 0)])
def test_the_suites_own_node_rank_wins_over_the_launchers_even_at_0(monkeypatch, own, launcher, rank):
    """SPARK_GOTCHAS_NODE_RANK=0 on node 0 beside a launcher's NODE_RANK=1 is rank 0: a rank 0 read as
    unset would make both nodes rank 1 and the rendezvous wait for its timeout."""
    from spark_gotchas.machine.readers.dist import config_from_env

    for name, value in (("SPARK_GOTCHAS_NNODES", "2"), ("SPARK_GOTCHAS_NODE_RANK", own), ("NODE_RANK", launcher)):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PET_NODE_RANK", raising=False)
    config = config_from_env()
    assert (config.nnodes, config.node_rank) == (2, rank)


@pytest.mark.parametrize("name, value, why", [
    ("SPARK_GOTCHAS_COLLECTIVE_SIZES", "abc", "SPARK_GOTCHAS_COLLECTIVE_SIZES: not a size: 'abc'"),
    ("SPARK_GOTCHAS_COLLECTIVE_SIZES", "4G", "SPARK_GOTCHAS_COLLECTIVE_SIZES='4G' must be sizes from 1 to 1G"),
    ("SPARK_GOTCHAS_COLLECTIVE_BACKEND", "bogus\n", "SPARK_GOTCHAS_COLLECTIVE_BACKEND='bogus\\n' must be one of auto, nccl, gloo"),
    ("SPARK_GOTCHAS_COLLECTIVE_FAULT", "0:explode", "SPARK_GOTCHAS_COLLECTIVE_FAULT='0:explode' must be RANK:exit or RANK:hang"),
])
def test_a_collective_setting_the_probe_cannot_take_is_named_before_torchrun_starts(monkeypatch, name, value, why):
    """A bad value was a rank that "wrote no result" and a fix about MASTER_ADDR; it is the reason
    the probe did not run, naming the variable."""
    from spark_gotchas.machine.readers.dist import config_from_env

    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as caught:
        config_from_env()
    assert str(caught.value).startswith(why)


def link_sys(root, *, width=4, max_width=4, phys="5: LinkUp", fw="28.45.4028"):
    """The Spark /sys above with the port's physical state, the adapter's firmware and its PCIe link
    (each RoCE function a PCIe Gen5 x4 endpoint: NVIDIA/dgx-spark-playbooks#102)."""
    sys_root = spark_sys(root, mtu=9000)
    for dev in RDMA:
        here = root / "class" / "infiniband" / dev
        (here / "fw_ver").write_text(f"{fw}\n")
        (here / "ports" / "1" / "phys_state").write_text(f"{phys}\n" if RDMA[dev][1] else "3: Disabled\n")
        second = dev == "roceP2p1s0f0"
        (here / "device" / "current_link_width").write_text(f"{width if second else max_width}\n")
        (here / "device" / "max_link_width").write_text(f"{max_width}\n")
        (here / "device" / "current_link_speed").write_text("32.0 GT/s PCIe\n")
        (here / "device" / "max_link_speed").write_text("32.0 GT/s PCIe\n")
    return sys_root


RIGHT = {"NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0", "NCCL_SOCKET_IFNAME": "enP7s7"}


def test_the_port_firmware_and_pcie_link_are_read_from_sys(tmp_path):
    net = read_net_setup("192.168.100.11", link_sys(tmp_path, width=2), ADDRS, environ=RIGHT)
    dev = next(d for d in net.rdma if d.name == "roceP2p1s0f0")
    assert (dev.phys_state, dev.fw_ver, dev.pcie_width, dev.pcie_max_width, dev.pcie_speed) == (
        "LinkUp", "28.45.4028", 2, 4, "32.0 GT/s PCIe")
    assert next(d for d in net.rdma if d.name == "rocep1s0f1").phys_state == "Disabled"


def test_set_up_right_and_still_slow_the_fix_moves_to_the_link_never_repeating_the_setup(tmp_path):
    """Both HCAs in NCCL_IB_HCA, MTU 9000, 1.6 GB/s: the fix names no setting already in place."""
    net = read_net_setup("192.168.100.11", link_sys(tmp_path), ADDRS, environ=RIGHT)
    assert g10.nccl_steps(net, GB10) == []
    slow = g10.judge_collective(multinode(1.6, net), GB10)
    assert slow.line == "G10 FAIL: 2 nodes, nccl: 1.60 GB/s all-reduce bus bandwidth: far below the 20-24 GB/s expected"
    assert "NCCL_IB_HCA" not in slow.fix and "mtu 9000" not in slow.fix
    assert slow.fix.startswith("run ib_write_bw on each rail alone (roceP2p1s0f0, rocep1s0f0): ib_write_bw -d "
                               "roceP2p1s0f0 -x 3 --report_gbits on one node")
    assert "update the ConnectX firmware (now 28.45.4028)" in slow.fix and "power-cycle both machines fully" in slow.fix
    assert "NCCL's setup on this node is right" in slow.detail
    assert slow.readings["remedy"] == [{"kind": "measure", "target": "ib_write_bw", "value": "roceP2p1s0f0"},
                                       {"kind": "measure", "target": "ib_write_bw", "value": "rocep1s0f0"}]


def test_a_rail_wired_at_x2_is_named_before_any_measurement(tmp_path):
    """An older BIOS wires the second ConnectX-7 function at Gen5 x2 (tonyd2wild/…-2x-DGX-Spark#35):
    that rail is half the port's."""
    net = read_net_setup("192.168.100.11", link_sys(tmp_path, width=2), ADDRS, environ=RIGHT)
    slow = g10.judge_collective(multinode(12.0, net), GB10)
    assert slow.status is Status.WARN
    assert slow.fix.startswith("update the machine's firmware (sudo fwupdmgr refresh && sudo fwupdmgr update")
    assert "/sys/class/infiniband/roceP2p1s0f0/device/current_link_width reads 4" in slow.fix
    assert "roceP2p1s0f0's PCIe link runs x2 at 32.0 GT/s PCIe, below its x4 at 32.0 GT/s PCIe" in slow.detail


def test_applying_the_setup_fix_moves_the_next_fix_to_the_link(tmp_path):
    """The fix's changes (NCCL_IB_HCA, MTU, NCCL_SOCKET_IFNAME) applied to the node's setup: the setup
    review goes quiet and the next fix is a measurement of the link."""
    net = read_net_setup("192.168.100.11", link_sys(tmp_path), ADDRS, environ={"NCCL_IB_HCA": "rocep1s0f0"})
    for iface in net.interfaces:
        iface.mtu = 1500 if iface.name.startswith("en") and iface.name != "enP7s7" else iface.mtu
    first = g10.judge_collective(multinode(3.04, net), GB10)
    assert first.fix.startswith("name every active RoCE device: export NCCL_IB_HCA=roceP2p1s0f0,rocep1s0f0")
    for change in g10.nccl_changes(net, GB10):
        if change.kind == "env":
            net.env[change.target] = change.value
        elif change.kind == "mtu":
            net.interface(change.target).mtu = int(change.value)
    assert g10.nccl_findings(net, GB10) == []
    again = g10.judge_collective(multinode(3.04, net), GB10)
    assert again.fix.startswith("run ib_write_bw on each rail alone")
