#!/usr/bin/env bash
# Stop the SLURM started by .ci/slurm-up.sh: its jobs, then slurmd, slurmctld and munged,
# each by the pid file it wrote.
set -uo pipefail
ROOT=${SLURM_TEST_ROOT:-/tmp/tprimat-slurm}
if [ -s "$ROOT/run/slurmctld.pid" ]; then  # only jobs on the cluster started here
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
fi
stop() {
    local pidfile=$1
    [ -s "$pidfile" ] || return 0
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
}
stop "$ROOT/run/slurmd.pid"
stop "$ROOT/run/slurmctld.pid"
stop /run/munge/munged.pid
echo "SLURM stopped"
