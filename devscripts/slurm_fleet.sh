#!/usr/bin/env bash
# The Slurm recipe of docs/fleet.md, run for real on one machine: a throwaway Slurm cluster on
# loopback (munged, slurmctld, one slurmd per node), one sbatch job with one task per node that
# runs the preflight and writes runs/<host>.json, then `spark-gotchas fleet runs/*.json`.
#
#     sudo apt-get install -y slurm-wlm munge    # Debian/Ubuntu; needs root (the daemons run as root)
#     bash devscripts/slurm_fleet.sh             # 3 nodes in /tmp/slurm-fleet, stopped at the end
#     NODES=2 SLURM_FLEET_DIR=/tmp/sf bash devscripts/slurm_fleet.sh
#     HOSTNAMES=shared bash devscripts/slurm_fleet.sh   # the nodes keep this machine's host name
#     KEEP=1 bash devscripts/slurm_fleet.sh      # leave the daemons running (stop them: STOP=1 …)
#     SETUP_ONLY=1 bash devscripts/slurm_fleet.sh   # only start the cluster and leave it running (no job)
#     SLURM_CONF_EXTRA=$'HealthCheckProgram=/x\nHealthCheckInterval=5' …   # lines added to slurm.conf
#
# HOSTNAMES=own (the default): each slurmd runs in a UTS namespace of its own (`unshare --uts`)
# with the node's name as its host name, so its tasks see `hostname` = fleet1, fleet2 … as tasks on
# separate machines would, and the suite's host reading names them so. Everything else is this
# machine's: the same boot id, CPU, memory and Python. On a real cluster there is nothing of this:
# each task runs on its own host.
# HOSTNAMES=shared: every slurmd in this machine's namespace (NodeHostname=localhost, a port each,
# `slurmd -N NAME`): the tasks all see this machine's host name, name their files by task number
# (runs/<host>-<SLURM_PROCID>.json), and fleet says the files are one node.
#
# Ports 16817 (slurmctld; SLURM_CTLD_PORT=N for another) and 16821… (one slurmd per node, from the
# controller's + 4); every file stays under the folder.
# Python: PYTHON, else the checkout's .venv, else python3; it must have the suite installed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODES=${NODES:-3}
BASE=${SLURM_FLEET_DIR:-/tmp/slurm-fleet}
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=$(command -v python3); fi
fi
HOSTNAMES=${HOSTNAMES:-own}
CTLD_PORT=${SLURM_CTLD_PORT:-16817}
export SLURM_CONF="$BASE/etc/slurm.conf"

say() { printf '+ %s\n' "$*"; }

stop_all() {
    # Only what this script started: the pids it wrote into its own folder.
    for pidfile in "$BASE"/run/*.pid; do
        [ -e "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
        rm -f "$pidfile"
    done
}

if [ "${STOP:-0}" = 1 ]; then stop_all; exit 0; fi
case "$HOSTNAMES" in
    own|shared) ;;
    *) echo "slurm_fleet: HOSTNAMES is own or shared, not $HOSTNAMES" >&2; exit 2 ;;
esac
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || { echo "slurm_fleet: NODES is a number of nodes from 1 to 99, not $NODES" >&2; exit 2; }
[[ "$CTLD_PORT" =~ ^[1-9][0-9]{3,4}$ ]] && [ "$CTLD_PORT" -le 65400 ] ||
    { echo "slurm_fleet: SLURM_CTLD_PORT is a port from 1000 to 65400, not $CTLD_PORT" >&2; exit 2; }
FIRST_SLURMD_PORT=$((CTLD_PORT + 4))  # only once it is known to be a number: bash arithmetic evaluates what it is given
for tool in munged mungekey slurmctld slurmd sbatch srun sinfo scontrol; do
    command -v "$tool" >/dev/null || { echo "slurm_fleet: $tool not found: apt-get install -y slurm-wlm munge" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "slurm_fleet: run as root (the throwaway daemons run as root)" >&2; exit 2; }
"$PYTHON" -c 'import spark_gotchas' 2>/dev/null || { echo "slurm_fleet: $PYTHON has no spark_gotchas" >&2; exit 2; }
if [ "$HOSTNAMES" = own ] && ! unshare --uts true 2>/dev/null; then
    echo "slurm_fleet: unshare --uts is not allowed here: use HOSTNAMES=shared" >&2; exit 2
fi

# The folder is emptied first: only one this script made (it holds .slurm-fleet), or none yet.
if [ -e "$BASE" ] && [ ! -e "$BASE/.slurm-fleet" ] && [ -n "$(ls -A "$BASE" 2>/dev/null)" ]; then
    echo "slurm_fleet: $BASE exists and was not made by this script: choose another SLURM_FLEET_DIR" >&2; exit 2
fi
stop_all
rm -rf "$BASE"
mkdir -p "$BASE"/{etc,munge,state,run,log,runs,out} && chmod 700 "$BASE" "$BASE/munge" && touch "$BASE/.slurm-fleet"
[ "${KEEP:-0}" = 1 ] || [ "${SETUP_ONLY:-0}" = 1 ] || trap stop_all EXIT

# -- munge: a key of this folder's own, a socket of its own ------------------------------------------
mungekey --create --keyfile="$BASE/munge/munge.key" --force
munged --force --key-file="$BASE/munge/munge.key" --socket="$BASE/munge/munge.socket" \
    --pid-file="$BASE/run/munged.pid" --log-file="$BASE/log/munged.log" --seed-file="$BASE/munge/seed"

# -- slurm.conf: the controller on this host's name, NODES nodes on loopback --------------------------
mapfile -t names < <(seq -f 'fleet%g' 1 "$NODES")
if [ "$HOSTNAMES" = shared ]; then same_host=" NodeHostname=localhost"; fi
{
    echo "ClusterName=sparkfleet"
    echo "SlurmctldHost=$(hostname -s)(127.0.0.1)"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "SlurmUser=root"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$BASE/munge/munge.socket"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$BASE/state"
    echo "SlurmdSpoolDir=$BASE/state/slurmd-%n"
    echo "SlurmctldPidFile=$BASE/run/slurmctld.pid"
    echo "SlurmdPidFile=$BASE/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$BASE/log/slurmctld.log"
    echo "SlurmdLogFile=$BASE/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"   # no cgroups in a container
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "SlurmdTimeout=60"
    echo "InactiveLimit=0"
    port=$FIRST_SLURMD_PORT
    for name in "${names[@]}"; do
        echo "NodeName=$name${same_host:-} NodeAddr=127.0.0.1 Port=$port CPUs=1 State=UNKNOWN"
        port=$((port + 1))
    done
    echo "PartitionName=fleet Nodes=ALL Default=YES MaxTime=30 State=UP"
    if [ -n "${SLURM_CONF_EXTRA:-}" ]; then printf '%s\n' "$SLURM_CONF_EXTRA"; fi
} > "$SLURM_CONF"
say "slurm.conf: $NODES node(s): ${names[*]}, host names: $HOSTNAMES"

# a daemon that cannot start says why in its log, never on the terminal: name the log
slurmctld -f "$SLURM_CONF" ||
    { rc=$?; echo "slurm_fleet: slurmctld did not start (exit $rc); see $BASE/log/slurmctld.log" >&2; exit 1; }
for name in "${names[@]}"; do
    rc=0
    if [ "$HOSTNAMES" = own ]; then
        # its own host name; slurmd forks into the background and keeps the namespace
        # shellcheck disable=SC2016  # $1 and $2 are the inner shell's
        unshare --uts sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' - "$name" "$SLURM_CONF" || rc=$?
    else
        slurmd -f "$SLURM_CONF" -N "$name" || rc=$?
    fi
    [ "$rc" = 0 ] ||
        { echo "slurm_fleet: slurmd for $name did not start (exit $rc); see $BASE/log/slurmd-$name.log" >&2; exit 1; }
done

# -- wait until every node is up: idle, or drained (a HealthCheckProgram may drain one) (bounded) -----
# sinfo fails (or retries for seconds) while slurmctld cannot answer: that is "none up yet", not the
# end of the script; the 60 s are wall-clock seconds, however long each sinfo takes
deadline=$((SECONDS + 60))
while :; do
    idle=$({ timeout 10 sinfo -h -r -t idle,drain -o '%D' 2>/dev/null || true; } | awk '{n += $1} END {print n + 0}')
    [ "$idle" -ge "$NODES" ] || [ "$SECONDS" -ge "$deadline" ] && break
    sleep 1
done
say "sinfo"
timeout 10 sinfo || true   # shown; the count above decides
[ "$idle" -ge "$NODES" ] || { echo "slurm_fleet: only $idle of $NODES node(s) up after 60 s; see $BASE/log" >&2; exit 1; }
if [ "${SETUP_ONLY:-0}" = 1 ]; then say "the cluster is up (SLURM_CONF=$SLURM_CONF); stop it: STOP=1 SLURM_FLEET_DIR=$BASE $0"; exit 0; fi

# -- the recipe: one task per node, then fleet ---------------------------------------------------------
# shellcheck disable=SC2016  # $(hostname) and $SLURM_PROCID are the task's, in the job script
if [ "$HOSTNAMES" = own ]; then file='runs/$(hostname).json'; else file='runs/$(hostname)-$SLURM_PROCID.json'; fi
cat > "$BASE/preflight.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=spark-preflight
#SBATCH --nodes=$NODES
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:10:00
#SBATCH --output=$BASE/out/%x-%j.out
cd "$BASE"
# one task per node: the preflight, its snapshot runs/<host>.json (shared host names: <host>-<task>)
srun --kill-on-bad-exit=0 bash -c '"$PYTHON" -m spark_gotchas -m fast -p no:cacheprovider \\
    --spark-snapshot="$file" > "out/\$SLURMD_NODENAME.txt" 2>&1; echo "\$SLURMD_NODENAME on \$(hostname): preflight exit \$?"'
# the group, judged once every task has ended
"$PYTHON" -m spark_gotchas fleet runs/*.json
EOF
say "cat $BASE/preflight.sbatch"
cat "$BASE/preflight.sbatch"
say "sbatch --wait $BASE/preflight.sbatch"
rc=0
( cd "$BASE" && sbatch --wait preflight.sbatch ) || rc=$?
say "sbatch exit $rc (the job's exit status: fleet's)"
say "cat $BASE/out/spark-preflight-*.out"
cat "$BASE"/out/spark-preflight-*.out
say "ls $BASE/runs"
ls "$BASE/runs"
first=${names[0]}
say "sed -n '/= spark-gotchas =/,\$p' $BASE/out/$first.txt   # the preflight's own lines on $first"
sed -n '/= spark-gotchas =/,$p' "$BASE/out/$first.txt"
exit "$rc"
