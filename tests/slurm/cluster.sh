#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for the tests (issue 51): munged, slurmctld and slurmd started as root
# on loopback with a configuration that needs no cgroups or systemd, every file under one temporary directory.
# Usage: cluster.sh start DIR   (DIR empty or new; prints the SLURM_CONF to export)
#        cluster.sh stop DIR    (stops the daemons started in DIR and removes DIR)
set -euo pipefail
cmd=$1 D=$2

free_port() {  # a TCP port nothing listens on (slurmctld and slurmd bind it)
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  [ -d "$D" ] || return 0
  for p in slurmd slurmctld munged; do
    [ -f "$D/$p.pid" ] && kill "$(cat "$D/$p.pid")" 2>/dev/null || true
  done
  for p in slurmd slurmctld munged; do  # wait for each to end (at most 10 s), then SIGKILL
    [ -f "$D/$p.pid" ] || continue
    pid=$(cat "$D/$p.pid")
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$D"
}

start() {
  mkdir -p "$D"/{state,spool,log}
  chmod 700 "$D"
  local node ctld_port slurmd_port
  node=$(hostname -s)
  ctld_port=$(free_port) slurmd_port=$(free_port)
  head -c 1024 /dev/urandom >"$D/munge.key"
  chmod 600 "$D/munge.key"
  munged --force --key-file="$D/munge.key" --socket="$D/munge.sock" --pid-file="$D/munged.pid" \
    --log-file="$D/log/munged.log" --seed-file="$D/munged.seed"
  cat >"$D/slurm.conf" <<CONF
ClusterName=kestreltest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$D/munge.sock
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SwitchType=switch/none
MpiDefault=none
PlugStackConfig=$D/plugstack.conf
ReturnToService=2
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  : >"$D/plugstack.conf"
  export SLURM_CONF=$D/slurm.conf
  slurmctld -c -i
  slurmd
  for _ in $(seq 300); do  # the node is up when sinfo says idle (at most 30 s)
    [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && { echo "$SLURM_CONF"; return 0; }
    sleep 0.1
  done
  echo "cluster.sh: the Slurm node did not come up; logs:" >&2
  tail -n 20 "$D"/log/*.log >&2
  stop
  return 1
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
