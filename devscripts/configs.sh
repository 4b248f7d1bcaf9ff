#!/usr/bin/env bash
# G2 (flash-attn/Unsloth), G8 (playbook issues), G10 (parallelism) on the GPU machine.
# Run from the repo root with the project installed (H200, torch 2.11.0+cu130, no network).
# Prints everything to stdout; writes snapshots to $OUT (default /tmp/configs-out).
# Runtime: about 90 s (four torch imports of ~6 s, two torchrun launches of ~10 s, G8's DNS failure).
set -u
# the suite's small pure-Python dependencies the GPU image lacks (as devscripts/smoke.sh does)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/configs-out}
mkdir -p "$OUT"
F=tests/fixtures
PYTEST=(python3 -m pytest -p no:cacheprovider -rA -q)
# the G-lines, their fixes and pytest's tally, each once (a FAIL's line is printed twice by pytest)
gl() { grep -E '^(G(2|8|10) (PASS|FAIL|WARN|INFO|SKIP)|    fix: |.*(passed|failed|skipped).* in [0-9.]+s)' | awk '!seen[$0]++' || true; }

echo "== environment"
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
python3 -c "import yaml; print('PyYAML', yaml.__version__)" 2>&1 | tail -1
python3 -c "import importlib.util as u; print({n: u.find_spec(n) is not None for n in ('flash_attn', 'unsloth', 'xformers')})"

echo "== G2 probe by hand: SDPA backends that run on this GPU; flash_attn as installed"
# Expected without flash-attn: sdpa.ran = ok for flash/efficient/cudnn/math on NVIDIA H200; flash_attn {installed: false}
timeout 120 python3 -m microbench attention

echo "== G2 with a stand-in flash_attn (its call is torch SDPA) and a stand-in Unsloth: the GPU comparison end to end"
# Expected: G2 WARN "flash-attn 2.8.3 works on NVIDIA H200 and Unsloth 2026.1.1 is installed: Unsloth sets
# HAS_FLASH_ATTENTION in unsloth.models._utils, read by 3 more modules …" (max |error| equal to SDPA's)
PYTHONPATH=$F/g02/site:${PYTHONPATH:-} FAKE_FLASH_ATTN=ok timeout 120 "${PYTEST[@]}" -m fast -k g02 | gl
# Expected: G2 FAIL "flash-attn 2.8.3 is installed but broken: flash_attn_func disagrees with SDPA on NVIDIA H200: …"
PYTHONPATH=$F/g02/site:${PYTHONPATH:-} FAKE_FLASH_ATTN=wrong timeout 120 "${PYTEST[@]}" -m fast -k g02 | gl

echo "== this node's network as NCCL sees it (RDMA devices, MTU, speed, driver)"
python3 - <<'PY'
from spark_gotchas.netsetup import read_net_setup
n = read_net_setup()
for i in n.interfaces:
    print("if", i.name, "up" if i.up else "down", "mtu", i.mtu, "speed_mbps", i.speed_mbps, "driver", i.driver, i.ipv4)
for d in n.rdma:
    print("rdma", d.name, d.state, d.rate, d.link_layer, "->", d.netdevs)
print("env", n.env, "link", n.link, n.link_reason, "error", n.error)
PY

echo "== fast G2/G8/G10: a playbook named, a TP=2 vLLM command file and a DDP accelerate config"
# Expected: G2 PASS "flash-attn is not installed … SDPA backends that ran on NVIDIA H200: …";
# G8 SKIP within ~8 s "cannot list open issues of NVIDIA/dgx-spark-playbooks: no network (…); check by hand: https://…";
# G10 FAIL "…/vllm_tp2.sh: tensor parallel 2 (--tensor-parallel-size, line 6) spans nodes (this node has 1 GPU(s));
#           …/accelerate_ddp.yaml: DDP (distributed_type MULTI_GPU) across 2 nodes"
time timeout 300 "${PYTEST[@]}" -m fast -k "g02 or g08 or g10" --spark-playbook vllm \
    --spark-launch-config $F/g10/vllm_tp2.sh --spark-launch-config $F/g10/accelerate_ddp.yaml \
    --spark-snapshot "$OUT/configs-h200.json" | gl

echo "== the same snapshot replayed, and re-judged as a Spark (no torch, no network, no files read)"
timeout 120 "${PYTEST[@]}" -m fast -k "g02 or g08 or g10" --spark-replay "$OUT/configs-h200.json" | gl
# Expected: G10 FAIL "… spans nodes (a Spark has one GPU) …"
timeout 120 "${PYTEST[@]}" -m fast -k g10 --spark-replay "$OUT/configs-h200.json" --spark-profile gb10 | gl

echo "== G10 multinode: the collective probe as a loopback rehearsal, gloo on the CPU (NCCL needs two GPUs)"
# Expected: G10 INFO "loopback rehearsal (2 processes on this node, gloo on cpu): all-reduce bus bandwidth … GB/s
#           at 16 MiB, 8 B latency … µs; link lo (MTU 65536), …"
SPARK_GOTCHAS_COLLECTIVE_BACKEND=gloo timeout 200 "${PYTEST[@]}" -m multinode -k g10 \
    --spark-snapshot "$OUT/collective-h200.json" | gl
echo "== G10 multinode with rank 1 dying after the first all-reduce"
# Expected: G10 FAIL "collective probe failed (loopback rehearsal): rank 1 wrote no result (torchrun exit code 1);
#           rank 0: …" (rank 0's own report of the lost peer, or the launcher's SIGTERM)
SPARK_GOTCHAS_COLLECTIVE_BACKEND=gloo SPARK_GOTCHAS_COLLECTIVE_FAULT=1:exit SPARK_GOTCHAS_COLLECTIVE_TIMEOUT=10 \
    timeout 200 "${PYTEST[@]}" -m multinode -k g10 | gl
echo "== done"
