# Helpers for guest integration tests (sourced; busybox sh).
# Prints KTAP lines like the kselftest harness, then "# Totals:" via t_done.
_t_n=0 _t_pass=0 _t_fail=0 _t_skip=0
t_plan() { echo "TAP version 13"; echo "1..$1"; }
t_ok() { _t_n=$((_t_n + 1)); _t_pass=$((_t_pass + 1)); echo "ok $_t_n $*"; }
t_fail() { _t_n=$((_t_n + 1)); _t_fail=$((_t_fail + 1)); echo "not ok $_t_n $*"; }
t_skip() { _t_n=$((_t_n + 1)); _t_skip=$((_t_skip + 1)); echo "ok $_t_n $* # SKIP"; }
# t_check NAME CMD...: ok when CMD exits 0; its output is shown on failure.
t_check() {
	_name=$1; shift
	if _out=$("$@" 2>&1); then t_ok "$_name"; else
		t_fail "$_name"; echo "$_out" | sed 's/^/# /' | tail -n 20; fi
}
t_diag() { echo "# $*"; }
# t_wait SEC CMD...: polls CMD every 0.1 s until it exits 0 (returns 0) or
# SEC seconds have passed (returns CMD's last status): waits for an event,
# not for a fixed time.
t_wait() {
	_w=$(($1 * 10)); shift
	while [ "$_w" -gt 0 ]; do
		"$@" && return 0
		sleep 0.1; _w=$((_w - 1))
	done
	"$@"
}
t_done() {
	echo "# Totals: pass:$_t_pass fail:$_t_fail xfail:0 xpass:0 skip:$_t_skip error:0"
	[ "$_t_fail" = 0 ]
}
# vm_host_run: in the Debian guest (tests/vm/debian --host-run HOSTCMD), run
# HOSTCMD on the host in the VM's network namespace (it reaches this guest's
# sshd on 127.0.0.1:$VM_SSH_PORT) and return its exit status; 125 when the
# host gives no answer within $1 seconds (default 1800).
vm_host_run() {
	_w=0
	[ -n "${MLTUNE_VM_OUT:-}" ] || return 125
	rm -f "$MLTUNE_VM_OUT/host-run.rc"
	: >"$MLTUNE_VM_OUT/host-run.request"
	while [ ! -f "$MLTUNE_VM_OUT/host-run.rc" ]; do
		[ "$_w" -ge "$((${1:-1800} * 2))" ] && { rm -f "$MLTUNE_VM_OUT/host-run.request"; return 125; }
		sleep 0.5; _w=$((_w + 1))
	done
	_rc=$(cat "$MLTUNE_VM_OUT/host-run.rc")
	rm -f "$MLTUNE_VM_OUT/host-run.request"
	rm -f "$MLTUNE_VM_OUT/host-run.rc"
	return "$_rc"
}

# file_value FILE: FILE's lines joined, runs of blanks squeezed to one
# space, in $fv; 1 when FILE cannot be read. Shell builtins only: the
# snapshot below reads hundreds of files, and a process per file (cat, tr,
# sed) cost seconds per snapshot under emulation. Only for files the
# kernel serves whole from its first read (sysfs, cgroupfs, the seq_files
# of /proc): the shell reads a byte at a time, and a /proc/sys file gives
# nothing after its first byte (use read_knobs).
file_value() {
	fv=''
	{
		while IFS= read -r _l || [ -n "$_l" ]; do fv="$fv $_l"; done
	} <"$1" 2>/dev/null || return 1
	set -f
	# shellcheck disable=SC2086 # split on blanks on purpose
	set -- $fv
	set +f
	fv=$*
}

# read_knobs FILE...: "FILE=value" for each readable FILE, in the order
# given, its lines joined and runs of blanks squeezed to one space (one
# process for all of them; /proc/sys files included).
read_knobs() {
	_r=''
	for _f in "$@"; do [ -r "$_f" ] && _r="$_r $_f"; done
	[ -n "$_r" ] || return 0
	# shellcheck disable=SC2086 # paths without blanks, split on purpose
	awk 'BEGIN { for (i = 1; i < ARGC; i++) v[ARGV[i]] = "" }
		{ v[FILENAME] = v[FILENAME] " " $0 }
		END {
			for (i = 1; i < ARGC; i++) {
				s = v[ARGV[i]]; gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
				print ARGV[i] "=" s
			}
		}' $_r
}

# node_settings KNOBS PID: every setting a profile domain touches, one
# "what=value" line each (the one-transaction snapshot): the knob files
# KNOBS, both NICs (ethtool -g/-c/-l/-k, MTU, queue length, RPS), every
# IRQ's affinity, loaded modules, the policies of PID's threads, cgroup
# cpusets, pool reservations, block queues, CPU governor and idle states.
node_settings() {
	_knobs=$1 _pid=$2 _tmp=/tmp/node_settings.$$
	# shellcheck disable=SC2086 # the knob paths, split on purpose
	read_knobs $_knobs
	for i in eth0 eth1; do
		for o in -g -c -l -k; do
			ethtool "$o" "$i" >"$_tmp" 2>/dev/null
			while IFS= read -r _l; do echo "$i $o $_l"; done <"$_tmp"
		done
		file_value "/sys/class/net/$i/mtu"; _mtu=$fv
		file_value "/sys/class/net/$i/tx_queue_len"
		echo "$i mtu=$_mtu txqlen=$fv"
		for q in /sys/class/net/$i/queues/rx-*; do
			file_value "$q/rps_cpus"; _rps=$fv
			file_value "$q/rps_flow_cnt"
			echo "$q rps=$_rps flow=$fv"
		done
	done
	rm -f "$_tmp"
	echo "rps_sock_flow_entries=$(cat /proc/sys/net/core/rps_sock_flow_entries)"
	for f in /proc/irq/*/smp_affinity_list; do file_value "$f"; echo "$f=$fv"; done
	file_value /proc/irq/default_smp_affinity
	echo "irq default=$fv"
	echo "modules: $(cut -d' ' -f1 /proc/modules | sort | tr '\n' ' ')"
	# thread policies of the test process: policy, priority, nice
	for t in /proc/$_pid/task/*; do
		file_value "$t/comm"; _comm=$fv
		stat_fields "$t"
		echo "$_comm: $sf_policy $sf_prio $sf_nice"
	done
	for f in /sys/fs/cgroup/cpuset.cpus*; do [ -e "$f" ] && file_value "$f" && echo "$f=$fv"; done
	# Each cgroup's cpuset files, read together. Left out: a cgroup that
	# goes while it is read, and the cgroup of a systemd unit with no
	# cpuset of its own (it takes its parent's, which is listed): units
	# come and go by themselves (mltune-metrics.timer every 30 s).
	find /sys/fs/cgroup -mindepth 2 -name cpuset.cpus 2>/dev/null | sort | while read -r f; do
		d=${f%/cpuset.cpus}
		lines=$(for x in "$d"/cpuset.cpus*; do
			file_value "$x" || exit 1
			echo "$x=$fv"
		done) || continue
		# the first line is cpuset.cpus itself
		case $d:${lines%%
*} in
		*.service:"$f=" | *.scope:"$f=" | *.socket:"$f=" | *.mount:"$f=" | *.swap:"$f=") continue ;;
		esac
		echo "$lines"
	done
	for f in /sys/kernel/mltune/hugepool/node*/reserved; do [ -e "$f" ] && file_value "$f" && echo "$f=$fv"; done
	for f in /sys/block/*/queue/scheduler /sys/block/*/queue/wbt_lat_usec /sys/block/*/queue/read_ahead_kb \
		/sys/block/*/queue/nr_requests; do
		[ -e "$f" ] && file_value "$f" && echo "$f=$fv"
	done
	for f in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor /sys/devices/system/cpu/cpu*/cpuidle/state*/disable; do
		[ -e "$f" ] && file_value "$f" && echo "$f=$fv"
	done
}
# stat_fields TASKDIR: its policy, priority and nice (fields 41, 18, 19 of
# stat, counted after the comm, which may hold spaces: "NCCL Service  0")
# in $sf_policy, $sf_prio, $sf_nice; empty when the task is gone. Builtins
# only: the snapshot reads it for every thread.
stat_fields() {
	sf_policy='' sf_prio='' sf_nice=''
	file_value "$1/stat" || return 0
	set -f
	# shellcheck disable=SC2086 # the fields after "(comm) ", split on purpose
	set -- ${fv##*) }
	set +f
	sf_policy=${39:-} sf_prio=${16:-} sf_nice=${17:-}
}
# stat_of TASKDIR policy|prio|nice: one of them, printed
stat_of() {
	stat_fields "$1"
	case $2 in
	policy) echo "$sf_policy" ;;
	prio) echo "$sf_prio" ;;
	*) echo "$sf_nice" ;;
	esac
}
