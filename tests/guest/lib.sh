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

# node_settings KNOBS PID: every setting a profile domain touches, one
# "what=value" line each (the one-transaction snapshot): the knob files
# KNOBS, both NICs (ethtool -g/-c/-l/-k, MTU, queue length, RPS), every
# IRQ's affinity, loaded modules, the policies of PID's threads, cgroup
# cpusets, pool reservations, block queues, CPU governor and idle states.
node_settings() {
	for p in $1; do
		[ -e "$p" ] && echo "$p=$(tr -s ' \t\n' ' ' <"$p" | sed 's/ $//')"
	done
	for i in eth0 eth1; do
		for o in -g -c -l -k; do
			ethtool $o $i 2>/dev/null | sed "s/^/$i $o /"
		done
		echo "$i mtu=$(cat /sys/class/net/$i/mtu) txqlen=$(cat /sys/class/net/$i/tx_queue_len)"
		for q in /sys/class/net/$i/queues/rx-*; do
			echo "$q rps=$(cat $q/rps_cpus) flow=$(cat $q/rps_flow_cnt)"
		done
	done
	echo "rps_sock_flow_entries=$(cat /proc/sys/net/core/rps_sock_flow_entries)"
	for f in /proc/irq/*/smp_affinity_list; do echo "$f=$(cat $f)"; done
	echo "irq default=$(cat /proc/irq/default_smp_affinity)"
	echo "modules: $(cut -d' ' -f1 /proc/modules | sort | tr '\n' ' ')"
	# thread policies of the test process: policy, priority, nice
	for t in /proc/$2/task/*; do
		echo "$(cat $t/comm): $(stat_of $t policy) $(stat_of $t prio) $(stat_of $t nice)"
	done
	for f in /sys/fs/cgroup/cpuset.cpus*; do [ -e "$f" ] && echo "$f=$(cat "$f")"; done
	# Each cgroup's cpuset files, read together. Left out: a cgroup that
	# goes while it is read, and the cgroup of a systemd unit with no
	# cpuset of its own (it takes its parent's, which is listed): units
	# come and go by themselves (mltune-metrics.timer every 30 s).
	find /sys/fs/cgroup -mindepth 2 -name cpuset.cpus 2>/dev/null | sort | while read -r f; do
		d=${f%/cpuset.cpus}
		lines=$(for x in "$d"/cpuset.cpus*; do
			v=$(cat "$x" 2>/dev/null) || exit 1
			echo "$x=$v"
		done) || continue
		# the first line is cpuset.cpus itself
		case $d:${lines%%
*} in
		*.service:"$f=" | *.scope:"$f=" | *.socket:"$f=" | *.mount:"$f=" | *.swap:"$f=") continue ;;
		esac
		echo "$lines"
	done
	for f in /sys/kernel/mltune/hugepool/node*/reserved; do [ -e $f ] && echo "$f=$(cat $f)"; done
	for f in /sys/block/*/queue/scheduler /sys/block/*/queue/wbt_lat_usec /sys/block/*/queue/read_ahead_kb \
		/sys/block/*/queue/nr_requests; do
		[ -e $f ] && echo "$f=$(cat $f)"
	done
	for f in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor /sys/devices/system/cpu/cpu*/cpuidle/state*/disable; do
		[ -e $f ] && echo "$f=$(cat $f)"
	done
}
# stat_of TASKDIR policy|prio|nice: fields 41, 18, 19 of stat, counted after
# the comm, which may hold spaces ("NCCL Service  0")
stat_of() {
	sed 's/.*) //' $1/stat 2>/dev/null | awk -v f=$2 '{print f == "policy" ? $39 : f == "prio" ? $16 : $17}'
}
