#!/bin/sh
# mltune with a real Slurm (22.05, Debian 12) inside the Debian systemd
# guest (tests/vm/debian): one node, mltune-node, running slurmctld and
# slurmd, with the Prolog, Epilog and node-features helper of deploy/slurm.
#
#   tests/vm/debian --kernel 6.12 --timeout 1800 \
#     --deb build/deb/mltunectl_0.1.0_amd64.deb \
#     --file tests/fleet/slurm.sh:/root/fleet/slurm.sh \
#     --file tests/guest/lib.sh:/root/fleet/lib.sh \
#     --file deploy/slurm:/root/fleet/slurm --run 'sh /root/fleet/slurm.sh'
#
# Runs as root in the guest (mltunectl installed from the .deb; munge and
# Slurm installed in the image with their services disabled). It writes
# the munge key and slurm.conf, starts munge, slurmctld and slurmd, and
# checks: a job with --constraint=mltune_inference runs on inference and
# the node is back on training after it; a job that asks for nothing runs
# on training; the node-features helper (query with the conformance hash,
# activate, idempotence, timing); a switch that fails drains the node with
# an "mltune:" reason, the job never runs and the node stays on a clean
# profile; resume; srun; on a shared node (partition "shared",
# OverSubscribe=NO) a job that asks for another profile than the running
# one is refused (the reason in its output file and AdminComment; requeued
# and held, or requeued) while the node stays in service (MIXED, never
# drained), and both run once the node is free; a stale job record (an
# epilog that never ran) is dropped by the next prolog instead of refusing
# the job or draining the node; an epilog that fails; and slurmd's own use
# of the helper (node_features/helpers: ActiveFeatures, mltune_conf_*
# dropped by the plugin).
#
# Every wait is a poll for an event with a deadline (the guest runs under
# TCG). KTAP through lib.sh. Environment: FLEET_DIR (/root/fleet: lib.sh),
# MLTUNE_SLURM_SCRIPTS (the deploy/slurm copy, $FLEET_DIR/slurm),
# FLEET_SLURM_OUT (job files, /var/tmp/fleet-slurm).
set -u
FLEET=${FLEET_DIR:-/root/fleet}
. "$FLEET/lib.sh"
SCRIPTS=${MLTUNE_SLURM_SCRIPTS:-$FLEET/slurm}
OUT=${FLEET_SLURM_OUT:-/var/tmp/fleet-slurm}
NODE=$(hostname -s)
CTL=/usr/sbin/mltunectl
PLAN=88

# ---- helpers -----------------------------------------------------------------

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_for SECONDS CMD...: poll CMD once a second until it succeeds (0) or
# SECONDS have passed (1).
wait_for() {
	_end=$(($(date +%s) + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 1
	done
	return 0
}

node_field() { scontrol -o show node "$NODE" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
node_state() { node_field State; }
node_is() { [ "$(node_state)" = "$1" ]; }
node_reason() { sinfo -h -n "$NODE" -o '%E' 2>/dev/null | head -n 1; }
job_field() { scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
job_state() { job_field "$1" JobState; }
job_finished() {
	case $(job_state "$1") in
	COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0 ;;
	*) return 1 ;;
	esac
}
# The active profile, as 'mltunectl active --field profile' prints it.
active_profile() { "$CTL" active --field profile 2>/dev/null; }
is_active() { [ "$(active_profile)" = "$1" ] && "$CTL" verify "$1" >/dev/null 2>&1; }
# The journal lines of a script of deploy/slurm (tag mltune-slurm-NAME).
journal_of() { journalctl -q -t "mltune-slurm-$1" -o cat 2>/dev/null; }
journal_has() { journal_of "$1" | grep -qF -- "$2"; }

# submit NAME [SBATCH OPTIONS...]: a batch job that records what the node
# looked like while it ran (NAME.ran marks that its script ran at all);
# prints the job id.
submit() {
	_n=$1; shift
	rm -f "$OUT/$_n".*
	cat >"$OUT/$_n.sh" <<-EOF
	#!/bin/sh
	echo ran >$OUT/$_n.ran
	$CTL active >$OUT/$_n.active 2>&1
	p=\$(sed -n '1s/^profile: \([^ ]*\) .*\$/\1/p' $OUT/$_n.active)
	$CTL verify "\$p" >$OUT/$_n.verify 2>&1; echo \$? >$OUT/$_n.verify.rc
	EOF
	sbatch --parsable -J "$_n" -o "$OUT/$_n.out" "$@" "$OUT/$_n.sh" 2>"$OUT/$_n.sbatch.err" | cut -d';' -f1
}

# run_job NAME [SBATCH OPTIONS...]: submit, wait until the job has finished
# and its epilog has run (the node idle again); JOB holds its id.
run_job() {
	JOB=$(submit "$@")
	[ -n "$JOB" ] || { t_diag "sbatch failed: $(cat "$OUT/$1.sbatch.err")"; return 1; }
	_t0=$(now_ms)
	wait_for 300 job_finished "$JOB" || { t_diag "job $JOB: $(job_state "$JOB") after 300 s"; return 1; }
	wait_for 300 node_is IDLE || { t_diag "node $(node_state) 300 s after job $JOB"; return 1; }
	t_diag "job $JOB ($1): $(job_state "$JOB") $(job_field "$JOB" ExitCode), node idle again $(($(now_ms) - _t0)) ms after submission"
}

# t_run NAME CMD...: like t_check, but CMD runs in this shell (it may set
# variables: run_job sets JOB) and its output is not captured.
t_run() {
	_rn=$1; shift
	if "$@"; then t_ok "$_rn"; else t_fail "$_rn"; fi
}

saw() { [ -f "$OUT/$1.active" ] && sed -n '1s/^profile: \([^ ]*\) .*$/\1/p' "$OUT/$1.active" | grep -qx -- "$2"; }

dump_logs() {
	t_diag "---- slurmctld.log (tail)"; tail -n 25 /var/log/slurm/slurmctld.log 2>/dev/null | sed 's/^/# /'
	t_diag "---- slurmd.log (tail)"; tail -n 40 /var/log/slurm/slurmd.log 2>/dev/null | sed 's/^/# /'
	t_diag "---- mltune-slurm journal"; journalctl -q -t mltune-slurm-prolog -t mltune-slurm-epilog \
		-t mltune-slurm-helper -o short-monotonic 2>/dev/null | tail -n 20 | sed 's/^/# /'
}

# bail REASON: the rest of the plan cannot run; count it as failed.
bail() {
	t_diag "bail out: $*"
	dump_logs
	while [ "$_t_n" -lt "$PLAN" ]; do t_fail "not run: $*"; done
	t_done
	exit 1
}

t_plan "$PLAN"
mkdir -p "$OUT"
t_diag "$(uname -r); mltunectl $($CTL --version 2>&1 | head -n 1); $(slurmd -V 2>&1)"
t0_all=$(now_ms)

# ---- munge, slurm.conf, the daemons -------------------------------------------

munge_key() {
	install -d -o munge -g munge -m 0700 /etc/munge &&
	rm -f /etc/munge/munge.key &&
	dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null &&
	chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key &&
	[ "$(stat -c '%U %a %s' /etc/munge/munge.key)" = "munge 400 1024" ]
}
t_check "munge key: /etc/munge/munge.key, 1024 random bytes, munge 0400" munge_key
munge_works() { munge -n | unmunge >/dev/null; }
systemctl start munge.service
t_check "munged started and a credential round-trips (munge -n | unmunge)" wait_for 60 munge_works

# slurmd -C: the node as slurmd sees it (the guest: 8 CPUs, 2 sockets x 2
# cores x 2 threads, about 1.5 GiB).
hw=$(slurmd -C 2>/dev/null | head -n 1)
t_diag "slurmd -C: $hw"
hwf() { printf '%s\n' "$hw" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
t_check "slurmd -C: CPUs=8 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2" \
	test "$(hwf CPUs) $(hwf SocketsPerBoard) $(hwf CoresPerSocket) $(hwf ThreadsPerCore)" = "8 2 2 2"
mem=$(hwf RealMemory)
mem=$((${mem:-1024} * 9 / 10))

# The controller's name must resolve (the image has no nss-myhostname),
# and slurmctld binds with getaddrinfo(AI_ADDRCONFIG), which fails while
# no interface but lo has an address (the guest's NICs are unconfigured):
# a dummy interface with a private address. Before the first switch, so
# that the NIC settings of the profile see every interface there will be.
getent hosts "$NODE" >/dev/null || echo "127.0.1.1 $NODE" >>/etc/hosts
if ! ip -4 -o addr show scope global | grep -q .; then
	modprobe dummy 2>/dev/null
	if ! { ip link add fleet0 type dummy && ip addr add 10.233.0.1/24 dev fleet0 &&
		ip link set fleet0 up; }; then
		t_diag "could not add the dummy interface fleet0"
	fi
fi
# No D-Bus in the image: slurmd's cgroup/v2 plugin creates its cgroups
# itself instead of asking systemd for a scope.
cat >/etc/slurm/cgroup.conf <<-EOF
	CgroupPlugin=cgroup/v2
	IgnoreSystemd=yes
	EOF

install -d -o slurm -g slurm /var/lib/slurm/slurmctld /var/log/slurm
install -d /var/lib/slurm/slurmd
write_conf() {
	cat >/etc/slurm/slurm.conf <<-EOF
	# tests/fleet/slurm.sh: one node running slurmctld and slurmd
	ClusterName=fleet
	SlurmctldHost=$NODE
	SlurmUser=slurm
	AuthType=auth/munge
	StateSaveLocation=/var/lib/slurm/slurmctld
	SlurmdSpoolDir=/var/lib/slurm/slurmd
	SlurmctldPidFile=/run/slurmctld.pid
	SlurmdPidFile=/run/slurmd.pid
	SlurmctldLogFile=/var/log/slurm/slurmctld.log
	SlurmdLogFile=/var/log/slurm/slurmd.log
	SlurmdDebug=debug
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	MpiDefault=none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core_Memory
	SchedulerType=sched/backfill
	ReturnToService=2
	# TCG: everything is ten to a hundred times slower than on hardware.
	SlurmctldTimeout=300
	SlurmdTimeout=300
	MessageTimeout=60
	BatchStartTimeout=300
	PrologEpilogTimeout=600
	MinJobAge=3600
	# mltune (deploy/slurm/slurm.conf.example)
	Prolog=$SCRIPTS/prolog
	Epilog=$SCRIPTS/epilog
	PrologFlags=Alloc,DeferBatch
	$1
	NodeName=$NODE CPUs=$(hwf CPUs) Boards=$(hwf Boards) SocketsPerBoard=$(hwf SocketsPerBoard) CoresPerSocket=$(hwf CoresPerSocket) ThreadsPerCore=$(hwf ThreadsPerCore) RealMemory=$mem Feature=mltune_training,mltune_inference,mltune_broken State=UNKNOWN
	PartitionName=batch Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
	# Jobs that share the node (one core and 64 MiB each): the profile conflicts.
	PartitionName=shared Nodes=$NODE Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO
	EOF
}
write_conf ""

# The node starts on training, its default profile (mltune.toml), through
# the direct backend (no module in this guest).
t_check "mltunectl switch training (the node's starting point)" "$CTL" switch training
t_check "mltunectl persist --profile training: the default in /etc/mltune/mltune.toml" \
	"$CTL" persist --profile training
backend=$("$CTL" active --field backend)
t_check "without the module mltunectl picks the direct backend by itself (active --json: $backend)" \
	test "$backend" = direct

t1=$(now_ms)
systemctl start slurmctld.service slurmd.service
if wait_for 180 node_is IDLE; then
	t_ok "slurmctld and slurmd started (systemctl), the node registered idle in $(($(now_ms) - t1)) ms"
else
	t_fail "the node registered idle within 180 s (state '$(node_state)')"
	bail "no idle Slurm node"
fi
t_diag "$(scontrol -o show node "$NODE" | tr ' ' '\n' | grep -E '^(CPUTot|RealMemory|AvailableFeatures|ActiveFeatures)=' | tr '\n' ' ')"

# ---- a job that asks for inference --------------------------------------------

t_run "job with --constraint=mltune_inference ran to completion" run_job inf --constraint=mltune_inference
j_inf=$JOB
t_check "the job's script saw 'mltunectl active' = inference" saw inf inference
t_check "the job's 'mltunectl verify inference' exited 0" grep -qx 0 "$OUT/inf.verify.rc"
t_check "scontrol show job: Features=mltune_inference" test "$(job_field "$j_inf" Features)" = mltune_inference
# What the Prolog got from slurmd: SLURM_JOB_CONSTRAINTS, logged by it.
t_check "the prolog saw SLURM_JOB_CONSTRAINTS=mltune_inference and switched" \
	wait_for 30 journal_has prolog "job $j_inf: constraint 'mltune_inference': switched from training to inference"
t_check "the epilog returned the node to training" \
	wait_for 30 journal_has epilog "job $j_inf ended: switched from inference to training"
t_check "after the job: mltunectl active = training and verify training exits 0" is_active training

# ---- a job that asks for nothing ----------------------------------------------

t_run "job without a constraint ran to completion" run_job plain
j_plain=$JOB
t_check "it ran on training (the default) and verify exited 0" \
	sh -c "grep -qx 0 '$OUT/plain.verify.rc' && sed -n 1p '$OUT/plain.active' | grep -q '^profile: training '"
t_check "its prolog and epilog switched nothing" sh -c \
	"journalctl -q -t mltune-slurm-prolog -o cat | grep -qF \"job $j_plain: constraint '': already on training\" &&
	 journalctl -q -t mltune-slurm-epilog -o cat | grep -qF 'job $j_plain ended: already on training'"
t_check "after it: still training, verified" is_active training

# ---- the node-features helper -------------------------------------------------

H=$SCRIPTS/node-features
q=$("$H"); qrc=$?
t_check "node-features (query) exits 0 and prints mltune_training first" \
	test "$qrc:$(printf '%s\n' "$q" | head -n 1)" = "0:mltune_training"
t_diag "node-features query: $(printf '%s' "$q" | tr '\n' ' ')"
# The node is on training and verified: conformance must answer (exit 0,
# 8 hex digits); a usage error or any other exit is a failure here.
crc=0; conf=$("$CTL" conformance 2>/dev/null) || crc=$?
t_check "mltunectl conformance exits 0 with 8 hex digits on the verified node (exit $crc, '$conf')" \
	sh -c "[ '$crc' = 0 ] && printf '%s\n' '$conf' | grep -qx '[0-9a-f]\{8\}'"
t_check "node-features prints mltune_conf_$conf" \
	sh -c "printf '%s\n' '$q' | grep -qx 'mltune_conf_$conf'"
t_check "node-features query prints nothing but mltune features" \
	sh -c "! printf '%s\n' '$q' | grep -v '^mltune_'"
# ExecTime of node_features/helpers is 10 s: the slowest of three queries.
max=0
for _i in 1 2 3; do
	_s=$(now_ms); "$H" >/dev/null 2>&1; _d=$(($(now_ms) - _s))
	[ "$_d" -gt "$max" ] && max=$_d
done
t_diag "node-features query: slowest of 3 runs $max ms (ExecTime 10000 ms)"
t_check "node-features query well inside ExecTime: under 5 s (slowest $max ms)" test "$max" -lt 5000

_s=$(now_ms)
t_check "node-features mltune_inference exits 0" "$H" mltune_inference
d_set=$(($(now_ms) - _s))
t_diag "node-features mltune_inference: $d_set ms (switch, verify, persist)"
t_check "then mltunectl active = inference, verify inference exits 0" is_active inference
t_check "and mltune.toml makes inference the boot profile (persist)" \
	grep -qx 'profile = "inference"' /etc/mltune/mltune.toml
t_check "node-features (query) now prints mltune_inference" sh -c "'$H' | head -n 1 | grep -qx mltune_inference"
_s=$(now_ms)
t_check "node-features mltune_inference again: exit 0, nothing switched (idempotent)" sh -c \
	"'$H' mltune_inference && journalctl -q -t mltune-slurm-helper -o cat | tail -n 1 | grep -q 'feature mltune_inference: already on inference'"
t_diag "node-features mltune_inference when active: $(($(now_ms) - _s)) ms"
t_check "node-features mltune_training: back on training, verified" sh -c "'$H' mltune_training && test \"\$('$CTL' active | sed -n '1s/^profile: \([^ ]*\) .*/\1/p')\" = training && '$CTL' verify training >/dev/null"
t_check "mltune.toml back on training" grep -qx 'profile = "training"' /etc/mltune/mltune.toml
hrc=0; "$H" mltune_conf_0123abcd 2>/dev/null || hrc=$?
hrc2=0; "$H" gpu 2>/dev/null || hrc2=$?
t_check "node-features refuses mltune_conf_* and foreign features (exit 2)" test "$hrc:$hrc2" = "2:2"

# ---- a switch that fails ----------------------------------------------------------
# A site profile that loads and validates but whose last knob the kernel
# refuses (ip_local_port_range with its low end above its high end: EINVAL):
# the switch writes inference's knobs, fails on it, rolls back.

mkdir -p /etc/mltune/profiles
cat >/etc/mltune/profiles/broken.toml <<'EOF'
description = "tests/fleet/slurm.sh: inference, then a value the kernel refuses"
include = ["inference"]

[sysctl]
"net.ipv4.ip_local_port_range" = { value = "60000 1000", reason = "low end above the high end: EINVAL" }
EOF
t_check "broken.toml passes 'mltunectl profile check'" "$CTL" profile check /etc/mltune/profiles/broken.toml
before_range=$(cat /proc/sys/net/ipv4/ip_local_port_range)
before_swap=$(cat /proc/sys/vm/swappiness)

JOB=$(submit broken --constraint=mltune_broken)
j_broken=$JOB
t_diag "job $j_broken: --constraint=mltune_broken"
drained() { case $(node_state) in *DRAIN*) return 0 ;; *) return 1 ;; esac; }
t_check "the node is drained" wait_for 300 drained
# Slurm requeues a job whose prolog failed and holds it (or cancels it).
not_started() {
	case $(job_state "$j_broken") in
	PENDING) [ "$(job_field "$j_broken" Restarts)" -ge 1 ] ;;
	CANCELLED|FAILED|NODE_FAIL|BOOT_FAIL) return 0 ;;
	*) return 1 ;;
	esac
}
t_check "the job was sent back: requeued and held (or ended) without running" wait_for 300 not_started
t_diag "job $j_broken: JobState=$(job_state "$j_broken") Reason=$(job_field "$j_broken" Reason) Restarts=$(job_field "$j_broken" Restarts)"
t_check "the job's script never ran (no marker file)" test ! -e "$OUT/broken.ran"
reason=$(node_reason)
t_diag "drain reason: $reason"
t_check "drain reason starts with 'mltune: switch to broken failed:'" \
	sh -c "case \"\$1\" in 'mltune: switch to broken failed: '*) exit 0 ;; *) exit 1 ;; esac" sh "$reason"
t_check "the reason quotes mltunectl's error (the knob that failed)" \
	sh -c "printf '%s' \"\$1\" | grep -q 'ip_local_port_range'" sh "$reason"
t_check "sinfo -R lists the node with that reason" sh -c "sinfo -R -h -o '%N|%E' | grep -qF '$NODE|mltune: switch to broken failed'"
drained_idle() { case $(node_state) in IDLE+DRAIN|DRAINED) return 0 ;; *) return 1 ;; esac; }
t_check "the node settles drained with no job left (IDLE+DRAIN)" wait_for 300 drained_idle
t_diag "node: State=$(node_state)"
t_check "the node is left on training, verify exits 0 (the switch rolled back)" is_active training
t_check "nothing half-applied: ip_local_port_range and swappiness as before" \
	test "$(cat /proc/sys/net/ipv4/ip_local_port_range)|$(cat /proc/sys/vm/swappiness)" = "$before_range|$before_swap"
t_check "mltunectl conformance: exit 0 and the same hash as before the failed switch ($conf)" \
	test "$("$CTL" conformance 2>&1)" = "$conf"
t_check "the prolog logged the failure" journal_has prolog "job $j_broken: constraint 'mltune_broken': switch to broken failed:"

t_check "scancel the held job" scancel "$j_broken"
t_check "scontrol update nodename=NODE state=resume exits 0" sh -c \
	"scontrol update nodename='$NODE' state=resume"
t_check "after resume the node is IDLE (no drain, reason cleared)" wait_for 120 node_is IDLE
t_run "a job without a constraint runs on the resumed node" run_job after
t_check "it ran on training" saw after training

# ---- srun: a job step asks for inference ----------------------------------------
srun_saw() {
	timeout 300 srun -J srun-inf --constraint=mltune_inference "$CTL" active --field profile >"$OUT/srun.active" 2>&1 &&
		grep -qx inference "$OUT/srun.active"
}
t_check "srun --constraint=mltune_inference mltunectl active: inference" srun_saw
srun_after() { wait_for 300 node_is IDLE && is_active training; }
t_check "after the srun job the node is idle and back on training" srun_after

# ---- a shared node: a job that asks for another profile is refused -----------------
# Partition "shared" lets jobs share the node. Job A (inference) runs until
# $OUT/shareA.release exists; jobs B and C ask for training while it runs:
# each is refused by its prolog (the reason in its output file and its
# AdminComment) and sent back: B with MLTUNE_SLURM_CONFLICT=hold (requeued
# and held), C with the default (requeued). The node stays in service
# (MIXED, never drained) on A's profile. Once A has ended, B (released) and
# C (after Slurm's requeue delay) run on training.

# submit_waiting NAME [SBATCH OPTIONS...]: like submit, but the job keeps
# running until $OUT/NAME.release exists (the test's event, polled).
submit_waiting() {
	_n=$1; shift
	rm -f "$OUT/$_n".*
	cat >"$OUT/$_n.sh" <<-EOF
	#!/bin/sh
	echo ran >$OUT/$_n.ran
	$CTL active >$OUT/$_n.active 2>&1; echo \$? >$OUT/$_n.active.rc
	while [ ! -e $OUT/$_n.release ]; do sleep 1; done
	EOF
	sbatch --parsable -J "$_n" -o "$OUT/$_n.out" "$@" "$OUT/$_n.sh" 2>"$OUT/$_n.sbatch.err" | cut -d';' -f1
}
not_drained() {
	case $(node_state) in *DRAIN*) echo "node state $(node_state)"; return 1 ;; esac
	! sinfo -R -h -o '%N' | grep -qx "$NODE"
}
node_mixed() { case $(node_state) in MIXED|MIXED+*) return 0 ;; *) echo "node state $(node_state)"; return 1 ;; esac; }
# refused JOB: pending again after a refusal (requeued at least once).
refused() { [ "$(job_state "$1")" = PENDING ] && [ "$(job_field "$1" Restarts)" -ge 1 ]; }
# held JOB: held (priority 0; Reason JobHeldAdmin or a "held" reason).
held() {
	[ "$(job_field "$1" Priority)" = 0 ] && return 0
	case $(job_field "$1" Reason) in *[Hh]eld*) return 0 ;; esac
	echo "Priority=$(job_field "$1" Priority) Reason=$(job_field "$1" Reason)"
	return 1
}
admin_comment_has() { scontrol show job "$1" | grep -qF "AdminComment=mltune: $2"; }
# ran_on NAME PROFILE: within 400 s the job's script ran on PROFILE and its
# verify exited 0.
ran_on() { wait_for 400 test -e "$OUT/$1.verify.rc" && verified_run "$1" "$2"; }
# NAME.active is complete once NAME.active.rc exists (NAME.ran is written
# before 'active' runs).
a_runs() { [ "$(job_state "$j_a")" = RUNNING ] && [ -e "$OUT/shareA.active.rc" ]; }
a_untouched() { [ "$(job_state "$j_a")" = RUNNING ] && is_active inference; }
idle_on_training() { wait_for 300 node_is IDLE && is_active training; }
not_held() { ! held "$1" >/dev/null; }
settled_clean() { idle_on_training && not_drained; }
clean_on_training() { not_drained && is_active training; }
refusals_harmless() { not_drained && a_untouched; }
verified_run() { saw "$1" "$2" && grep -qx 0 "$OUT/$1.verify.rc"; }

j_a=$(submit_waiting shareA -p shared -n 1 --mem=64M --constraint=mltune_inference)
t_check "shared node: job A (inference, one core) runs" wait_for 300 a_runs
t_check "shared node: A's script saw inference" saw shareA inference
t_check "shared node: the node is MIXED" node_mixed

printf 'MLTUNE_SLURM_CONFLICT=hold\n' >/etc/default/mltune-slurm
j_b=$(submit shareB -p shared -n 1 --mem=64M --constraint=mltune_training)
t_diag "job $j_a (inference) runs; job $j_b asks for training on the same node"
t_check "job B (training) is refused while A runs: pending again, Restarts >= 1" wait_for 300 refused "$j_b"
t_diag "job $j_b: JobState=$(job_state "$j_b") Reason=$(job_field "$j_b" Reason) Restarts=$(job_field "$j_b" Restarts)"
t_check "job B is held (MLTUNE_SLURM_CONFLICT=hold)" held "$j_b"
t_check "job B's script never ran" test ! -e "$OUT/shareB.ran"
t_check "job B's output file says why (asks for training, job A runs on inference)" \
	grep -qF "mltune: job $j_b asks for profile training, but job(s) $j_a run on $NODE on inference" "$OUT/shareB.out"
t_check "job B's AdminComment carries the reason" admin_comment_has "$j_b" "job $j_b asks for profile training"
t_check "the prolog logged the refusal and the policy" \
	journal_has prolog "job $j_b requeued and held (MLTUNE_SLURM_CONFLICT=hold)"
t_check "the node is not drained (no DRAIN state, no sinfo -R reason)" not_drained
t_check "the node is still MIXED" node_mixed
t_check "job A still runs, the node still on inference and verified" a_untouched

rm -f /etc/default/mltune-slurm # the default policy: requeue
j_c=$(submit shareC -p shared -n 1 --mem=64M --constraint=mltune_training)
t_check "job C (training) is refused too: pending again, Restarts >= 1" wait_for 300 refused "$j_c"
t_diag "job $j_c: JobState=$(job_state "$j_c") Reason=$(job_field "$j_c" Reason) Restarts=$(job_field "$j_c" Restarts)"
t_check "job C is not held (the default policy: requeue)" not_held "$j_c"
t_check "job C's output file says why" \
	grep -qF "mltune: job $j_c asks for profile training, but job(s) $j_a run on $NODE on inference" "$OUT/shareC.out"
t_check "the prolog logged job C's refusal (requeued)" \
	journal_has prolog "job $j_c requeued (MLTUNE_SLURM_CONFLICT=requeue)"
t_check "still not drained after two refusals, A still running on inference" refusals_harmless

touch "$OUT/shareA.release"
t_check "job A completes once released" wait_for 300 job_finished "$j_a"
t_check "the last epilog (A's) returned the node to training" \
	wait_for 120 journal_has epilog "job $j_a ended: switched from inference to training"
scontrol release "$j_b"
t_check "released, job B runs on training (verify exits 0)" ran_on shareB training
t_check "job C starts by itself after Slurm's requeue delay and runs on training" ran_on shareC training
t_check "then the node is idle on training, not drained" settled_clean
t_diag "jobs $j_b, $j_c: $(job_state "$j_b"), $(job_state "$j_c"); node $(node_state)"

# ---- a stale job record heals ------------------------------------------------------
# An epilog that never ran (slurmd restarted while the job ended, the epilog
# killed by PrologEpilogTimeout) leaves /run/mltune/slurm/job.ID. Planted
# here for a job Slurm does not have: the next prolog compares the records
# with Slurm's jobs on the node (squeue), drops it, and switches for its
# job; the node is neither drained nor is the job refused.
STALE=/run/mltune/slurm/job.999999
echo inference >"$STALE"
t_check "a stale record planted ($STALE: job 999999 on inference, unknown to Slurm)" \
	sh -c "! squeue -h -j 999999 -o %A 2>/dev/null | grep -q ."
t_run "job with --constraint=mltune_inference runs despite the stale record" run_job stale --constraint=mltune_inference
j_stale=$JOB
t_check "it ran on inference (verify exited 0)" verified_run stale inference
t_check "its prolog dropped the stale record, and said so" sh -c \
	"[ ! -e '$STALE' ] && journalctl -q -t mltune-slurm-prolog -o cat | grep -qF 'job 999999: Slurm has no such job on $NODE any more'"
t_check "the node was not drained and is back on training" clean_on_training
no_records() {
	for _f in /run/mltune/slurm/job.*; do
		[ -e "$_f" ] && { echo "left: $_f"; return 1; }
	done
	return 0
}
t_check "no job record is left behind in /run/mltune/slurm" no_records
t_diag "job $j_stale: $(job_state "$j_stale")"

# ---- an epilog that fails ----------------------------------------------------------
# The settings file (slurmd gives the scripts no environment of its own):
# the default profile is the broken one, so the epilog's switch fails.
printf 'MLTUNE_SLURM_DEFAULT_PROFILE=broken\n' >/etc/default/mltune-slurm
JOB=$(submit epi --constraint=mltune_training)
j_epi=$JOB
epi_ran() { wait_for 300 job_finished "$j_epi" && [ "$(job_state "$j_epi")" = COMPLETED ] && [ -e "$OUT/epi.ran" ]; }
t_check "job with --constraint=mltune_training ran and completed" epi_ran
t_diag "job $j_epi: JobState=$(job_state "$j_epi")"
t_check "its epilog failed to return the node to 'broken': node drained, no job left" wait_for 300 drained_idle
reason=$(node_reason)
t_diag "drain reason: $reason"
t_check "drain reason 'mltune: switch to broken failed: ...', logged by the epilog" sh -c \
	"case \"\$1\" in 'mltune: switch to broken failed: '*) ;; *) exit 1 ;; esac &&
	 journalctl -q -t mltune-slurm-epilog -o cat | grep -qF 'job $j_epi ended: switch to broken failed'" sh "$reason"
t_check "the node stayed on training, verified" is_active training
rm -f /etc/default/mltune-slurm /etc/mltune/profiles/broken.toml
scontrol update nodename="$NODE" state=resume
t_check "resumed: the node is IDLE" wait_for 120 node_is IDLE

# ---- slurmd runs the helper itself: node_features/helpers -------------------------
# slurmd asks the helper for the active features when it registers; the
# job-driven reboot into a feature is not exercised here.

# A stand-in mltunectl whose 'conformance' answers (this mltunectl may have
# none): the helper then prints mltune_conf_0badc0de too, which the plugin
# is expected to drop (it keeps the Features of helpers.conf only). The
# settings file points the helper at it: slurmd's environment does not.
cat >"$OUT/mltunectl-conf" <<EOF
#!/bin/sh
[ "\$1" = conformance ] && { echo 0BADC0DE; exit 0; }
exec $CTL "\$@"
EOF
chmod 0755 "$OUT/mltunectl-conf"
printf 'MLTUNE_SLURM_MLTUNECTL=%s\n' "$OUT/mltunectl-conf" >/etc/default/mltune-slurm
t_check "with a conformance hash the helper prints mltune_training and mltune_conf_0badc0de" \
	test "$("$H" | tr '\n' ' ')" = "mltune_training mltune_conf_0badc0de "
cat >/etc/slurm/helpers.conf <<EOF
Feature=mltune_training Helper=$H
Feature=mltune_inference Helper=$H
MutuallyExclusive=mltune_training,mltune_inference
ExecTime=10
EOF
write_conf "NodeFeaturesPlugins=node_features/helpers"
t1=$(now_ms)
systemctl restart slurmctld.service && systemctl restart slurmd.service
features_from_helper() {
	[ "$(node_state)" = IDLE ] || return 1
	_a=,$(node_field ActiveFeatures),
	case $_a in *,mltune_training,*) ;; *) return 1 ;; esac
	case $_a in *,mltune_inference,*|*,mltune_conf_*) return 1 ;; esac
	return 0
}
t_check "node_features/helpers: idle, ActiveFeatures has mltune_training, no mltune_inference, no mltune_conf_" \
	wait_for 180 features_from_helper
t_diag "restart to idle: $(($(now_ms) - t1)) ms; AvailableFeatures=$(node_field AvailableFeatures) ActiveFeatures=$(node_field ActiveFeatures)"
t_check "both helper features are available (AvailableFeatures)" sh -c \
	"case ,\$1, in *,mltune_training,*) ;; *) exit 1;; esac; case ,\$1, in *,mltune_inference,*) ;; *) exit 1;; esac" \
	sh "$(node_field AvailableFeatures)"
t_check "slurmd.log: the helper's query became FeaturesActive=mltune_training" \
	grep -q 'FeaturesAvail=mltune_training,mltune_inference FeaturesActive=mltune_training$' /var/log/slurm/slurmd.log
t_check "the node is still on training, verified" is_active training

# ---- timings ----------------------------------------------------------------------
journal_of prolog | sed -n 's/^\(job [0-9]*\): .*: \(.*\) in \([0-9]*\) ms$/prolog \1: \2: \3 ms/p' | while read -r l; do t_diag "$l"; done
journal_of epilog | sed -n 's/^\(job [0-9]*\) ended: \(.*\) in \([0-9]*\) ms$/epilog \1: \2: \3 ms/p' | while read -r l; do t_diag "$l"; done
t_diag "whole test: $(($(now_ms) - t0_all)) ms"

# ---- clean up ---------------------------------------------------------------------
systemctl stop slurmd.service slurmctld.service munge.service >/dev/null 2>&1
rm -f /etc/slurm/helpers.conf /etc/default/mltune-slurm
[ "$_t_fail" = 0 ] || dump_logs
t_done
