#!/usr/bin/env bash
# Start a real single-node SLURM on 127.0.0.1 for tests (Debian slurm-wlm + munge).
# Run as root.  State lives under $SLURM_TEST_ROOT (default /tmp/tprimat-slurm);
# .ci/slurm-down.sh stops exactly the daemons started here (by their pid files).
set -euo pipefail
ROOT=${SLURM_TEST_ROOT:-/tmp/tprimat-slurm}
NODE=localhost
CPUS=${SLURM_TEST_CPUS:-4}

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
fi

MARKER="# tprimat single-node test cluster (.ci/slurm-up.sh)"
if [ -s /etc/slurm/slurm.conf ] && ! grep -qxF "$MARKER" /etc/slurm/slurm.conf \
        && [ "${SLURM_TEST_FORCE:-0}" != 1 ]; then
    echo "/etc/slurm/slurm.conf belongs to another SLURM; not replacing it" \
         "(SLURM_TEST_FORCE=1 to override)" >&2
    exit 1
fi
mkdir -p "$ROOT"/{ctld,spool,log,run} /run/munge /var/log/munge /var/lib/munge /etc/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
chmod 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key

if ! pgrep -u munge -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
fi

mkdir -p /etc/slurm
cat > /etc/slurm/slurm.conf <<CONF
$MARKER
ClusterName=tprimat
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$ROOT/ctld
SlurmdSpoolDir=$ROOT/spool
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=600
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
CONF

/usr/sbin/slurmctld
/usr/sbin/slurmd -N "$NODE"

for _ in $(seq 1 60); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle'; then
        echo "SLURM is up: $(sinfo -h -o '%P %D %t %c')"
        exit 0
    fi
    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
    sleep 0.5
done
echo "SLURM did not become ready; logs in $ROOT/log" >&2
tail -n 20 "$ROOT"/log/*.log >&2 || true
exit 1
