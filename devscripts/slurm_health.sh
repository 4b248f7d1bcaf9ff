#!/usr/bin/env bash
# `spark-gotchas node-health` (docs/node-health.md) run by Slurm itself on a throwaway cluster:
# devscripts/slurm_fleet.sh starts munged, slurmctld and three slurmd on loopback, with one wrapper
# script as both HealthCheckProgram and Prolog. What each node's pass judges is a replayed snapshot
# the script picks (this machine has no GPU): tests/node_health_fakes.py writes healthy.json (the
# recorded H200: G9 WARN, no FAIL), fail.json (a Spark stuck at 600 MHz: G4 FAIL) and hostile.json
# (G1 FAIL whose line carries escape sequences, quotes and a token).
#
#     sudo apt-get install -y slurm-wlm munge
#     bash devscripts/slurm_health.sh            # in /tmp/slurm-health, the daemons stopped at the end
#     SLURM_HEALTH_DIR=/tmp/sh INTERVAL=5 SLURM_CTLD_PORT=17817 bash devscripts/slurm_health.sh
#
# Scenes, each printed as the commands run and what they printed:
#   1 fleet2 FAILs: slurmd's health check drains it; fleet1 (a WARN) and fleet3 stay up
#   2 an operator drains fleet3, whose checks then FAIL too: its reason and state are left alone
#   3 fleet2 is healthy again: the next health check undrains it
#   4 a job's prolog FAILs on fleet1: drained, the job requeued and held; fleet1's next health
#     check (healthy) undrains it
#   5 a job runs on fleet1: the health check leaves a node with jobs unchecked
#   6 by hand, as an operator would: hostile strings in the reason, slurmctld unreachable from a
#     prolog, no scontrol, a node list for a name, the checks past their deadline
# Exit status 0 once every scene ran (the test tests/test_node_health_slurm.py reads the transcript).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${SLURM_HEALTH_DIR:-/tmp/slurm-health}
INTERVAL=${INTERVAL:-3}
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=$(command -v python3); fi
fi
CLUSTER="$DIR/cluster"
export SLURM_CONF="$CLUSTER/etc/slurm.conf"

say() { printf '+ %s\n' "$*"; }
run() { say "$*"; "$@"; }

[[ "$INTERVAL" =~ ^[1-9][0-9]?$ ]] || { echo "slurm_health: INTERVAL is seconds from 1 to 99, not $INTERVAL" >&2; exit 2; }
CTLD_PORT=${SLURM_CTLD_PORT:-16817}
[[ "$CTLD_PORT" =~ ^[1-9][0-9]{3,4}$ ]] && [ "$CTLD_PORT" -le 65400 ] ||
    { echo "slurm_health: SLURM_CTLD_PORT is a port from 1000 to 65400, not $CTLD_PORT" >&2; exit 2; }
if [ -e "$DIR" ] && [ ! -e "$DIR/.slurm-health" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
    echo "slurm_health: $DIR exists and was not made by this script: choose another SLURM_HEALTH_DIR" >&2; exit 2
fi
STOP=1 SLURM_FLEET_DIR="$CLUSTER" bash "$ROOT/devscripts/slurm_fleet.sh" 2>/dev/null || true
rm -rf "$DIR"
mkdir -p "$DIR"/{snap,pick,log,sleepy,lock} && touch "$DIR/.slurm-health"
# every pass keeps its node's lock here (--lock-dir), not in /run/lock: two of these clusters on one
# machine (the tests' workers) have nodes of the same names
LOCKS="$DIR/lock"
trap 'STOP=1 SLURM_FLEET_DIR="$CLUSTER" bash "$ROOT/devscripts/slurm_fleet.sh"' EXIT

"$PYTHON" "$ROOT/tests/node_health_fakes.py" "$DIR/snap" >/dev/null
# pick NODE[.prolog_slurmd] SNAPSHOT: what that node's health check (or prolog) replays next
pick() { ln -sfn "$DIR/snap/$2.json" "$DIR/pick/$1.json"; }
unpick() { rm -f "$DIR/pick/$1.json"; }

# -- the wrapper: slurmd runs it with no arguments and nearly no environment (SLURMD_NODENAME) -----
cat > "$DIR/node-health" <<EOF
#!/bin/sh
# HealthCheckProgram and Prolog: slurmd gives neither arguments nor PATH
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export SLURM_CONF="$SLURM_CONF"
context=\${SLURM_SCRIPT_CONTEXT:-health_check}
exec 8>"$DIR/pick/\$SLURMD_NODENAME.gate"; flock -s 8   # held for the whole pass: the script waits on it before acting by hand
[ -e "$DIR/pick/\$SLURMD_NODENAME.pause" ] && exit 0   # the script acts on this node by hand
snapshot="$DIR/pick/\$SLURMD_NODENAME.\$context.json"
[ -e "\$snapshot" ] || snapshot="$DIR/pick/\$SLURMD_NODENAME.json"
log="$DIR/log/\$SLURMD_NODENAME.\$context.log"
snapshot=\$(readlink -f "\$snapshot")   # the pick as it is now, for the whole pass
picked=\$(basename "\$snapshot")
said=\$("$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" --spark-replay "\$snapshot" 2>&1)
status=\$?
printf '== %s %s\n%s\nexit %s\n' "\$context" "\$picked" "\$said" "\$status" >> "\$log"   # one write a pass
exit \$status
EOF
chmod 755 "$DIR/node-health"
say "cat $DIR/node-health"
cat "$DIR/node-health"

# wait_for SECONDS WHAT COMMAND…: until the command succeeds (bounded)
wait_for() {
    local limit=$1 what=$2; shift 2
    for _ in $(seq $((limit * 2))); do "$@" && return 0; sleep 0.5; done
    echo "slurm_health: $what: not within $limit s" >&2; return 1
}
reason_of() { scontrol show node "$1" | sed -n 's/^ *Reason=//p'; }
state_of() { scontrol show node "$1" | sed -n 's/^ *State=\([^ ]*\).*/\1/p'; }
drained_ours() { reason_of "$1" | grep -q '^spark-gotchas:'; }
undrained() { ! state_of "$1" | grep -q DRAIN; }
state_is() { [ "$(state_of "$1")" = "$2" ]; }
# last_pass NODE [CONTEXT [PATTERN]]: the node's last pass (health_check or prolog_slurmd) whose lines
# match PATTERN (default: one that ran the checks), as node-health said it
last_pass() {
    local context=${2:-health_check} pattern=${3:-checks took}
    say "$1's last $context pass${3:+ saying '$3'} (from $DIR/log/$1.$context.log)"
    awk -v pattern="$pattern" '/^== / {block = ""; hit = 0} {block = block $0 "\n"} index($0, pattern) {hit = 1}
        /^exit / && hit {done = block} END {printf "%s", done}' "$DIR/log/$1.$context.log" |
        grep '^== \|^node-health\|^exit'
}
said_times() { local n; n=$(grep -c "$2" "$DIR/log/$1.health_check.log" 2>/dev/null) || true; echo "${n:-0}"; }
said_more() { [ "$(said_times "$1" "$2")" -gt "$3" ]; }
reasons() { run sinfo -R; say "sinfo -R -o '%60E %9u %N'"; sinfo -R -o '%60E %9u %N'; }
elapsed() { local t0=$1; awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }

# -- scene 1: the cluster starts; fleet2's health check FAILs ----------------------------------------
pick fleet1 healthy; pick fleet2 fail; pick fleet3 healthy
say "scene 1: start the cluster; fleet1 and fleet3 replay healthy.json, fleet2 fail.json"
SETUP_ONLY=1 NODES=3 SLURM_FLEET_DIR="$CLUSTER" SLURM_CONF_EXTRA="HealthCheckProgram=$DIR/node-health
HealthCheckInterval=$INTERVAL
HealthCheckNodeState=ANY
Prolog=$DIR/node-health
PrologEpilogTimeout=60" bash "$ROOT/devscripts/slurm_fleet.sh" | grep -v '^+ sinfo\|^PARTITION\|^fleet\*'
wait_for 60 "fleet2 drained by its health check" drained_ours fleet2
wait_for 30 "a pass on fleet1" said_more fleet1 "checks took" 0
wait_for 30 "a pass on fleet3" said_more fleet3 "checks took" 0
reasons
run sinfo -N -o '%N %T'
last_pass fleet1
last_pass fleet2

# -- scene 2: an operator drains fleet3; its checks FAIL as well; both left as they are ------------
say "scene 2: an operator drains fleet3, then its checks FAIL too"
run scontrol update NodeName=fleet3 State=DRAIN Reason="operator: replace the fan"
pick fleet3 fail
wait_for 60 "a pass on fleet3 that FAILs" said_more fleet3 "its reason is not ours: operator: replace the fan; found:" 0
reasons
last_pass fleet3 health_check "found:"

# -- scene 3: fleet2 is healthy again -----------------------------------------------------------------
say "scene 3: fleet2 replays healthy.json from now on"
pick fleet2 healthy
wait_for 60 "fleet2 undrained" undrained fleet2
reasons
last_pass fleet2
t0=$(date +%s.%N)
wait_for 60 "fleet2 registered again" state_is fleet2 IDLE
say "fleet2 IDLE (registered again) $(elapsed "$t0") s later"
run sinfo -N -o '%N %T'

# -- scene 4: a job's prolog FAILs on fleet1 -----------------------------------------------------------
say "scene 4: fleet1's prolog replays fail.json, its health check still healthy.json"
pick fleet1.prolog_slurmd fail
run sbatch -w fleet1 -o /dev/null --job-name=prolog-fails --wrap 'echo ran'
wait_for 60 "fleet1 drained by the prolog" drained_ours fleet1
# the prolog drains first and exits after: wait for the job held in the queue and the pass logged
# (a RUNNING job's reason is "None" too, while its prolog still runs)
wait_for 30 "the job requeued" sh -c "squeue -h -n prolog-fails -o %T | grep -q PENDING"
wait_for 30 "fleet1's prolog pass logged" test -s "$DIR/log/fleet1.prolog_slurmd.log"
reasons
run squeue -n prolog-fails -o '%.8i %.14j %.9T %r'
last_pass fleet1 prolog_slurmd
unpick fleet1.prolog_slurmd
run scancel -n prolog-fails
wait_for 60 "fleet1 undrained by its health check" undrained fleet1
reasons
last_pass fleet1

# -- scene 5: a job on fleet1: the health check leaves it unchecked ----------------------------------
say "scene 5: a job runs on fleet1 (its prolog healthy)"
before=$(said_times fleet1 'not checked: jobs on the node')
run sbatch -w fleet1 -o /dev/null --job-name=busy --wrap "sleep $((INTERVAL * 3))"
wait_for 60 "a pass that left fleet1 unchecked" said_more fleet1 'not checked: jobs on the node' "$before"
last_pass fleet1 health_check 'not checked: jobs on the node'
run scancel -n busy
wait_for 30 "fleet1 idle" state_is fleet1 IDLE

# -- scene 6: by hand ---------------------------------------------------------------------------------
say "scene 6: by hand, as root, on fleet1 (its health check paused)"
touch "$DIR/pick/fleet1.pause"
# a pass already under way (even one that read no pause yet) holds the gate: wait for its end
flock -w 60 "$DIR/pick/fleet1.gate" true || { say "fleet1's last pass did not end in 60 s"; exit 1; }
say "SLURMD_NODENAME=fleet1 $PYTHON -m spark_gotchas node-health --lock-dir $LOCKS --spark-replay hostile.json"
rc=0; SLURMD_NODENAME=fleet1 "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" --spark-replay "$DIR/snap/hostile.json" \
    > "$DIR/out.txt" 2>&1 || rc=$?
grep -v '^G[2-9]\|^G10\|fix:' "$DIR/out.txt"
say "exit $rc"
say "scontrol show node fleet1 | grep Reason"
scontrol show node fleet1 | grep Reason
reasons
say "SLURMD_NODENAME=fleet1 node-health --spark-replay healthy.json"
SLURMD_NODENAME=fleet1 "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" --spark-replay "$DIR/snap/healthy.json" | tail -n 1

nobody=$((CTLD_PORT + 120))  # a port nothing listens on
sed "s/^SlurmctldPort=.*/SlurmctldPort=$nobody/" "$SLURM_CONF" > "$DIR/unreachable.conf"
for snap in fail; do
    say "SLURM_CONF=$DIR/unreachable.conf SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURMD_NODENAME=fleet1 node-health --spark-replay $snap.json   # nothing listens on $nobody"
    t0=$(date +%s.%N); rc=0
    SLURM_CONF="$DIR/unreachable.conf" SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURMD_NODENAME=fleet1 \
        "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" --spark-replay "$DIR/snap/$snap.json" > "$DIR/out.txt" 2>&1 || rc=$?
    grep '^node-health' "$DIR/out.txt"
    say "exit $rc after $(elapsed "$t0") s"
done
say "SLURM_CONF=$DIR/unreachable.conf SLURMD_NODENAME=fleet1 node-health --spark-replay fail.json   # as a health check"
t0=$(date +%s.%N); rc=0
SLURM_CONF="$DIR/unreachable.conf" SLURMD_NODENAME=fleet1 "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" \
    --spark-replay "$DIR/snap/fail.json" > "$DIR/out.txt" 2>&1 || rc=$?
cat "$DIR/out.txt"
say "exit $rc after $(elapsed "$t0") s"

say "env -i PATH=/nonexistent SLURMD_NODENAME=fleet1 $PYTHON -m spark_gotchas node-health --lock-dir $LOCKS --spark-replay healthy.json   # no scontrol"
rc=0; env -i PATH=/nonexistent SLURMD_NODENAME=fleet1 "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" \
    --spark-replay "$DIR/snap/healthy.json" 2>&1 || rc=$?
say "exit $rc"
say "SLURMD_NODENAME='fleet[1-3]' $PYTHON -m spark_gotchas node-health --lock-dir $LOCKS --spark-replay fail.json   # a node range"
rc=0; SLURMD_NODENAME='fleet[1-3]' "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" --spark-replay "$DIR/snap/fail.json" 2>&1 || rc=$?
say "exit $rc"
reasons

# the checks past their deadline: a pytest plugin that starts a sleeper in a session of its own, then hangs
cat > "$DIR/sleepy/sleepy_plugin.py" <<'EOF'
import os, subprocess, time
sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
with open(os.environ["SLEEPY_PIDFILE"], "w") as fh:
    fh.write(str(sleeper.pid))
time.sleep(600)
EOF
say "SLURMD_NODENAME=fleet1 PYTHONPATH=$DIR/sleepy node-health --timeout 12 --scontrol-timeout 2 -- -p sleepy_plugin   # the checks hang"
t0=$(date +%s.%N); rc=0
SLURMD_NODENAME=fleet1 PYTHONPATH="$DIR/sleepy" SLEEPY_PIDFILE="$DIR/sleepy/pid" "$PYTHON" -m spark_gotchas \
    node-health --lock-dir "$LOCKS" --timeout 12 --scontrol-timeout 2 -- -p sleepy_plugin 2>&1 || rc=$?
say "exit $rc after $(elapsed "$t0") s"
sleeper=$(cat "$DIR/sleepy/pid")
case "$(ps -o stat= -p "$sleeper" 2>/dev/null || true)" in  # a zombie is gone: dead, not yet reaped
    ""|Z*) say "the sleeper $sleeper (a session of its own under the checks) is gone" ;;
    *) say "the sleeper $sleeper is still running"; kill "$sleeper" ;;
esac
reasons
say "SLURMD_NODENAME=fleet1 node-health --spark-replay healthy.json"
SLURMD_NODENAME=fleet1 "$PYTHON" -m spark_gotchas node-health --lock-dir "$LOCKS" --spark-replay "$DIR/snap/healthy.json" | tail -n 1
reasons
say "done"
