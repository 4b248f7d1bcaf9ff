#!/usr/bin/env bash
# The suite's own tests as a GPU machine would run them, without one: NVML answers as the H100 of
# tests/fixtures/h100/doors-live did (tests/fixtures/h100/fake_nvml/pynvml.py, first on PYTHONPATH)
# and the machine's sysfs and /dev show that GPU (SPARK_GOTCHAS_SYS_ROOT). A test that passes here
# without this but fails with it reads the machine instead of its fakes.
#   bash devscripts/fake_gpu_suite.sh [pytest args]      # default: tests -n 2; PYTHON: the interpreter (python3)
# torch stays this machine's (a CPU build here): with a driver present, the live preflight FAILs G1
# on it (torch sees no GPU), a machine the tests must hold on too.
# Runtime: about 4 minutes on 2 cores.
set -u
cd "$(dirname "$0")/.."
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
pci="$root/sys/bus/pci/devices/0000:00:06.0"
mkdir -p "$pci" "$root/dev"
printf '0x10de\n' > "$pci/vendor"
printf '0x2330\n' > "$pci/device"
printf '0x030200\n' > "$pci/class"
touch "$root/dev/nvidia0" "$root/dev/nvidiactl" "$root/dev/nvidia-uvm"
[ $# -gt 0 ] || set -- tests -n 2
PYTHONPATH="$PWD/tests/fixtures/h100/fake_nvml${PYTHONPATH:+:$PYTHONPATH}" SPARK_GOTCHAS_SYS_ROOT="$root" \
    "${PYTHON:-python3}" -m pytest -q -p no:cacheprovider -rfE "$@"
