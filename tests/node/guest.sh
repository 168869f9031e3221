#!/bin/sh
# The node test inside the Debian systemd guest (tests/node/run starts it,
# with the packages installed by apt before the first boot's command):
#
#   sh guest.sh installed   boot 1: the packages are in place, nothing is
#                           applied yet; record the baseline; configure
#   sh guest.sh booted      boot 2: what the boot applied, pool users and
#                           quota, reload, a failing apply, then apt purge
#                           and the node back on its baseline
#
# KTAP through tests/guest/lib.sh; the state between boots is in $STATE.
set -u
. /root/node/lib.sh
STATE=/var/lib/node-test
HP=/sys/kernel/mltune/hugepool
FEEDER=2-3,6-7

# ---- what the node looks like -------------------------------------------------

# The knobs of the training profile and their values now.
knob_values() {
	while read -r p; do
		printf '%s\t%s\n' "$p" "$(tr '\n' ' ' <"$p" 2>/dev/null)"
	done <"$STATE/knobs"
}

# Everything a configuration changes that can be read back; the NIC
# settings through a copy of mltunectl, which outlives the purge. The two
# NICs are told apart by driver, their queue IRQs by position: the kernel
# names (eth0, eth1) and numbers them in probe order, which udev's parallel
# module loading can change from one boot to the next.
node_state() {
	knob_values
	printf 'irq-default\t%s\n' "$(cat /proc/irq/default_smp_affinity)"
	printf 'wq-cpumask\t%s\n' "$(cat /sys/devices/virtual/workqueue/cpumask)"
	printf 'feeder-cgroup\t%s\n' "$(test -d /sys/fs/cgroup/mltune-feeder && echo present || echo absent)"
	# "DRIVER KEY = VALUE" lines; a queue IRQ as "DRIVER irq#K = CPUS", K
	# its position in number order.
	"$STATE/mltunectl" -v nic show | awk '
		/^[^ ]/ { match($0, /driver [^,]+/); drv = substr($0, RSTART + 7, RLENGTH - 7); next }
		$1 ~ /^irq\.[0-9]+$/ { print drv, "irq", substr($1, 5), $3; next }
		NF { print drv, $0 }' | sort -k1,1 -k2,2 -k3,3n |
		awk '$2 == "irq" { k[$1]++; print $1, "irq#" k[$1], "=", $4; next } { print }'
}

# same_as FILE CMD: CMD prints what FILE holds (else the difference).
same_as() {
	_want=$1; shift
	"$@" | diff "$_want" - >/tmp/same_as.diff && return 0
	cat /tmp/same_as.diff
	return 1
}

journal() { journalctl -b -u "$1" -o cat; }

is() { [ "$(cat "$1")" = "$2" ] || { echo "$1: '$(cat "$1")', expected '$2'"; return 1; }; }

# The boot's start jobs finished (mltune.service among them) and udev has
# handled its events (the group of /dev/mltune): the checks wait for these
# events, not for time.
settled() {
	systemctl is-system-running --wait >/dev/null
	udevadm settle
}

# ---- boot 1 -----------------------------------------------------------------------

pkgs_installed() {
	[ "$(dpkg-query -W -f '${Status}\n' mltune-dkms mltunectl | sort -u)" = "install ok installed" ]
}
dkms_installed() { dkms status mltune -k "$(uname -r)" | grep ': installed'; }
module_is_dkms() { modinfo -n mltune | grep /updates/dkms/mltune.ko; }
system_group() { gid=$(getent group mltune | cut -d: -f3) && [ "$gid" -lt 1000 ]; }
units_enabled() { [ "$(systemctl is-enabled mltune.service mltune-watch.service mltune-serve.socket | sort -u)" = enabled ]; }
# The package started the units; without a configuration both were skipped.
nothing_applied() {
	journal mltune.service | grep "skipped because of an unmet condition check (ConditionPathExists=/etc/mltune/mltune.toml)" &&
		[ "$(systemctl show -P ConditionResult mltune.service)" = no ] && [ ! -d /sys/module/mltune ] &&
		[ "$(systemctl is-active mltune-watch.service)" = inactive ]
}
add_users() { useradd -m -G mltune trainer && useradd -m outsider; }

installed() {
	settled
	t_check "mltune-dkms and mltunectl installed by apt" pkgs_installed
	t_check "dkms built and installed the module for $(uname -r)" dkms_installed
	t_check "modinfo finds the DKMS module" module_is_dkms
	t_check "system group mltune exists" system_group
	t_check "mltune.service, mltune-watch.service and mltune-serve.socket are enabled" units_enabled
	t_check "without a configuration mltune.service does nothing" nothing_applied
	t_check "profiles are in /usr/share/mltune/profiles" test -f /usr/share/mltune/profiles/training.toml

	# The baseline: what the node has before mltune ever ran.
	mkdir -p "$STATE"
	mltunectl --json profile show training | sed -n 's/^ *"path": "\(.*\)",$/\1/p' >"$STATE/knobs"
	t_check "the training profile names knobs" test -s "$STATE/knobs"
	cp /usr/sbin/mltunectl "$STATE/mltunectl"
	knob_values >"$STATE/knobs-baseline"
	node_state >"$STATE/baseline"
	{ dpkg-query -L mltune-dkms mltunectl; echo "/lib/modules/$(uname -r)/updates/dkms/mltune.ko"; } |
		while read -r f; do if [ -f "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done >"$STATE/files"
	t_diag "baseline: $(wc -l <"$STATE/baseline") values; $(wc -l <"$STATE/files") files of the packages"

	# The configuration: training, a pool on both nodes with a quota,
	# feeder cores, the watcher. One member of the group, one stranger.
	t_check "mltunectl persist writes the configuration" \
		mltunectl persist --profile training --pool 0:64M --pool 1:64M --user-quota 8M \
		--feeder "$FEEDER" --watcher on
	t_check "mltunectl config check accepts it" mltunectl config check
	t_check "users: trainer in group mltune, outsider not" add_users
	t_done
}

# ---- boot 2 -----------------------------------------------------------------------

# Early-boot messages come from the kernel log: by identifier, not by unit.
loaded_by_modules_load() { journalctl -b -o cat -t systemd-modules-load | grep "Inserted module 'mltune'"; }
applied_at_boot() {
	[ "$(systemctl is-active mltune.service)" = active ] && [ "$(systemctl show -P Result mltune.service)" = success ]
}
kernel_backend() { journal mltune.service | grep "switched to 'training' (kernel backend"; }
profile_active() { is /sys/kernel/mltune/profile training && grep "result=ok" /sys/kernel/mltune/last_switch; }
pool_reserved() { is $HP/node0/reserved 32 && is $HP/node1/reserved 32; }
feeder_on() { mltunectl --json feeder status | grep '"active": true' && is /sys/kernel/mltune/feeder/cpus $FEEDER; }
watcher_runs() { [ "$(systemctl is-active mltune-watch.service)" = active ] && pgrep -f "mltunectl watch"; }
dev_mode() { [ "$(stat -c '%U:%G %a' /dev/mltune)" = "root:mltune 660" ] || stat /dev/mltune; }
member_maps() { runuser -u trainer -- pool_map 1 3 | tee /dev/stderr | grep "charges it 3 pages"; }
member_over_quota() { runuser -u trainer -- pool_map 0 5; [ $? = 11 ]; }
outsider_refused() { runuser -u outsider -- pool_map 0 1; [ $? = 10 ]; }
nothing_charged() { is $HP/users "" && is $HP/node0/free 32 && is $HP/node1/free 32; }
reload_applies() {
	mltunectl persist --pool 0:32M --pool 1:32M && systemctl reload mltune.service &&
		is $HP/node0/reserved 16 && is $HP/node1/reserved 16 && is /sys/kernel/mltune/profile training
}
restart_fails() { ! systemctl restart mltune.service && [ "$(systemctl is-failed mltune.service)" = failed ]; }
# journald reads the unit's stderr on its own schedule: the line may land
# after systemctl has returned; wait for it (up to a minute), then show the
# unit's last lines.
journal_says_why() {
	for _ in $(seq 60); do
		journalctl --sync 2>/dev/null
		journal mltune.service |
			grep "error: pool apply: pool: node 1: .*could not supply.*rolled back: nic, feeder, knobs, modules" && return 0
		sleep 1
	done
	journal mltune.service | tail -n 15
	return 1
}
rest_as_before() {
	[ ! -d /sys/fs/cgroup/mltune-feeder ] && is $HP/node0/reserved 0 && is $HP/node1/reserved 0 &&
		is /sys/kernel/mltune/profile baseline
}
restart_applies() { systemctl restart mltune.service && is /sys/kernel/mltune/profile training && feeder_on; }
# node_exporter's textfile collector (Debian's prometheus-node-exporter, its
# default directory) serves what the package's mltune-metrics.service writes
# (started by its timer), the series follow a switch, and the conformance
# hash is the one mltunectl conformance prints.
TEXTFILE=/var/lib/prometheus/node-exporter/mltune.prom
scrape() { # scrape PROFILE: node_exporter serves it as the active profile (within 30 s)
	i=0
	while [ $i -lt 60 ]; do
		curl -sf http://127.0.0.1:9100/metrics >/tmp/scrape && grep -Eq "^mltune_profile_active\{.*profile=\"$1\".*\} 1$" /tmp/scrape &&
			grep -q '^mltune_in_line 1$' /tmp/scrape && return 0
		sleep 0.5
		i=$((i + 1))
	done
	grep -E '^mltune_(profile|in_line)|^node_textfile' /tmp/scrape
	return 1
}
metrics_now() { systemctl start mltune-metrics.service; }
exporter_serves_training() {
	[ "$(systemctl is-active prometheus-node-exporter.service)" = active ] ||
		{ echo "prometheus-node-exporter: $(systemctl is-active prometheus-node-exporter.service)"; return 1; }
	[ "$(systemctl is-active mltune-metrics.timer)" = active ] ||
		{ echo "mltune-metrics.timer: $(systemctl is-active mltune-metrics.timer)"; return 1; }
	metrics_now && scrape training || return 1
	conf=$(mltunectl conformance)
	# node_exporter serves the labels sorted by name
	grep -q "^mltune_conformance_info{hash=\"$conf\",profile=\"training\"} 1\$" /tmp/scrape || {
		echo "mltunectl conformance: '$conf'; served: $(grep '^mltune_conformance' /tmp/scrape)"
		mltunectl active
		return 1
	}
}
exporter_follows_switch() {
	mltunectl switch inference && metrics_now && scrape inference &&
		mltunectl switch training && metrics_now && scrape training
}

# The resident switcher: its socket listens from the install on, the first
# switch started the service, and the switches above ran in it.
serve_socket_listens() { [ "$(systemctl is-active mltune-serve.socket)" = active ] && [ -S /run/mltune/mltunectl.sock ]; }
switches_were_served() {
	[ "$(systemctl is-active mltune-serve.service)" = active ] &&
		journalctl -b -q -u mltune-serve.service | grep -q "switch inference: exit 0" &&
		journalctl -b -q -u mltune-serve.service | grep -q "switch training: exit 0" ||
		{ journalctl -b -q -u mltune-serve.service | tail -5; return 1; }
}
# A service killed between switches: the socket starts a new one for the
# next switch, which comes out the same.
served_after_kill() {
	systemctl kill -s KILL mltune-serve.service && mltunectl switch inference >/dev/null &&
		mltunectl verify inference >/dev/null && mltunectl switch training >/dev/null &&
		mltunectl verify training >/dev/null &&
		[ "$(systemctl is-active mltune-serve.service)" = active ]
}

# ---- the resident switcher: no caller can hold it up or misuse it ----------------
# (serve_checks runs these; they leave training active, as they found it)
SV=/tmp/serve-node
serve_pid() { systemctl show -p MainPID --value mltune-serve.service; }
serve_wait() { # serve_wait CMD...: CMD succeeds within 120 s (tried every 0.1 s)
	_n=1200
	until "$@" >/dev/null 2>&1; do
		_n=$((_n - 1))
		[ "$_n" -gt 0 ] || return 1
		sleep 0.1
	done
}
serve_in_syscall() { # serve_in_syscall PID NR...: PID waits in one of these (x86-64) system calls
	_p=$1
	shift
	read -r _s _r <"/proc/$_p/syscall" || return 1
	for _nr; do [ "$_s" = "$_nr" ] && return 0; done
	return 1
}
serve_count() { journalctl -b -q -u mltune-serve.service -o cat | grep -c "$1"; }
serve_logged_more() { [ "$(serve_count "$1")" -gt "$2" ]; } # PATTERN N: more than N lines
serve_running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status"; }
# serve_fifo N: a new FIFO $SV/fifoN, for this shell to hold open
# read-write and fill (its 64 KiB): whoever writes to it then waits.
serve_fifo() { mkdir -p $SV && rm -f "$SV/fifo$1" && mkfifo "$SV/fifo$1"; }
# A client whose stdout is a full FIFO that it holds itself: another switch
# is served meanwhile, and systemctl stop ends the service at once.
serve_full_stdout() {
	n=$(serve_count "switch inference: exit 0")
	serve_fifo 3 || return 1
	exec 3<>$SV/fifo3
	dd if=/dev/zero bs=4096 count=16 >&3 2>/dev/null
	mltunectl -v switch inference >&3 2>&3 &
	stuck=$!
	serve_wait serve_logged_more "switch inference: exit 0" "$n" &&
		timeout 120 mltunectl switch training >/dev/null &&
		timeout 60 systemctl stop mltune-serve.service &&
		[ "$(systemctl is-active mltune-serve.service)" != active ] && serve_running $stuck
	rc=$?
	kill -KILL $stuck
	exec 3>&-
	return $rc
}
# A client killed while its switch waits behind another: never run.  A
# direct switch holds the node lock meanwhile (its -v progress, written
# under the lock, waits on a full FIFO).
serve_killed_queued() {
	serve_fifo 4 || return 1
	exec 4<>$SV/fifo4
	dd if=/dev/zero bs=4096 count=16 >&4 2>/dev/null
	MLTUNE_NO_SERVICE=1 mltunectl -v switch training >/dev/null 2>&4 &
	holder=$!
	serve_wait serve_in_syscall $holder 1 || { echo "the direct switch does not hold the lock"; return 1; }
	mltunectl switch training >/dev/null 2>&1 &
	first=$!
	serve_wait sh -c 'read -r s r </proc/$(systemctl show -p MainPID --value mltune-serve.service)/syscall && [ "$s" = 73 ]' ||
		{ echo "the served switch does not wait for the lock"; return 1; }
	mltunectl switch inference >/dev/null 2>&1 &
	killed=$!
	serve_wait serve_in_syscall $killed 45 47 || { echo "the next client does not wait for its reply"; return 1; }
	kill -KILL $killed
	mltunectl switch training >/dev/null 2>&1 &
	last=$!
	serve_wait serve_in_syscall $last 45 47
	dd of=/dev/null bs=4096 count=16 <&4 2>/dev/null
	exec 4>&-
	wait $holder && wait $first && wait $last &&
		serve_logged_more "switch inference: its client went away before its turn: not run" 0 &&
		is /sys/kernel/mltune/profile training
}
# Root of another user namespace: refused by the service with its reason.
serve_refuses_userns() {
	out=$(unshare -r mltunectl switch inference 2>&1)
	rc=$?
	[ $rc = 1 ] && echo "$out" | grep -q "user namespace other than the initial one" &&
		is /sys/kernel/mltune/profile training || { echo "exit $rc: $out"; return 1; }
}
# Root without CAP_SYS_ADMIN: not run with the service's privileges (the
# client runs it itself, where the module refuses the switch).
serve_refuses_no_cap() {
	out=$(setpriv --bounding-set=-sys_admin mltunectl switch inference 2>&1)
	rc=$?
	[ $rc != 0 ] && is /sys/kernel/mltune/profile training && mltunectl verify training >/dev/null ||
		{ echo "exit $rc: $out"; return 1; }
}
serve_checks() {
	t_check "serve: a client with a full stdout holds up no other switch, nor systemctl stop" serve_full_stdout
	t_check "serve: a client killed while queued: its switch never runs" serve_killed_queued
	t_check "serve: the root of a user namespace is refused" serve_refuses_userns
	t_check "serve: root without CAP_SYS_ADMIN gets no switch" serve_refuses_no_cap
	t_check "serve: training still active and in line" mltunectl verify training
}
# ---- end of the resident switcher's checks ------------------------------------------
# ---- the units' sandboxes ------------------------------------------------------
# Each unit's exposure as `systemd-analyze security` rates it (0 to 10; up
# to 4.0 is "OK") may not rise above its bound: the figure measured in this
# guest when the sandboxes were made, plus a little (admin guide, "The
# units' sandboxes", has both). That the units still do their jobs inside
# them is what the rest of this test shows; the checks here add the parts
# it does not reach.
SANDBOX_BOUNDS="mltune.service:4.2 mltune-serve.service:3.7 mltune-watch.service:2.7 mltune-metrics.service:2.2"

# exposure UNIT: the overall figure, e.g. "3.7".
exposure() {
	systemd-analyze security --no-pager "$1" 2>&1 |
		sed -n 's/.*[Oo]verall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p'
}
# within_bound UNIT BOUND: its exposure is at most BOUND; what lowers the
# figure is listed on failure.
within_bound() {
	e=$(exposure "$1")
	[ -n "$e" ] || { systemd-analyze security --no-pager "$1" 2>&1 | tail -n 5; return 1; }
	awk -v e="$e" -v b="$2" 'BEGIN { exit !(e + 0 <= b + 0) }' && return 0
	echo "$1: exposure $e, bound $2"
	systemd-analyze security --no-pager "$1" 2>&1 | grep -v '^ *✓' | tail -n 40
	return 1
}
sandbox_exposure() {
	for ub in $SANDBOX_BOUNDS; do
		u=${ub%:*}
		t_diag "systemd-analyze security $u: exposure $(exposure "$u") (bound ${ub#*:})"
		t_check "$u: systemd-analyze security exposure at most ${ub#*:}" within_bound "$u" "${ub#*:}"
	done
}

# writable PID PATH / read_only PID PATH / hidden PID PATH: what PATH is in
# the mount namespace of process PID (a unit's sandbox), tried as root.
in_ns() { _p=$1; shift; nsenter -t "$_p" -m -- "$@"; }
writable() { in_ns "$1" test -w "$2" || { echo "$2: not writable in the sandbox of pid $1"; return 1; }; }
read_only() {
	in_ns "$1" test -e "$2" || { echo "$2: missing in the sandbox of pid $1"; return 1; }
	! in_ns "$1" test -w "$2" || { echo "$2: writable in the sandbox of pid $1"; return 1; }
}
hidden() { ! in_ns "$1" test -e "$2" || { echo "$2: visible in the sandbox of pid $1"; return 1; }; }

# The watcher writes cgroups (feeder placement) and its state, nothing else.
watcher_sandbox() {
	p=$(systemctl show -P MainPID mltune-watch.service)
	[ "${p:-0}" != 0 ] || { echo "mltune-watch.service has no main process"; return 1; }
	writable "$p" /sys/fs/cgroup/cgroup.procs && writable "$p" /run/mltune &&
		read_only "$p" /proc/sys/vm/swappiness && read_only "$p" /sys/kernel/mm/transparent_hugepage/enabled &&
		read_only "$p" /etc/mltune/mltune.toml && read_only "$p" /home/trainer && read_only "$p" /usr/sbin
}
# The resident switcher writes what a switch or off changes; the rest of
# the system is read-only, home directories are not there.
serve_sandbox() {
	p=$(systemctl show -P MainPID mltune-serve.service)
	[ "${p:-0}" != 0 ] || { echo "mltune-serve.service has no main process"; return 1; }
	writable "$p" /proc/sys/vm/swappiness && writable "$p" /sys/kernel/mltune/profile &&
		writable "$p" /sys/fs/cgroup/cgroup.procs && writable "$p" /run/mltune && writable "$p" /etc/mltune &&
		writable "$p" /etc/default && read_only "$p" /etc/passwd && read_only "$p" /usr/sbin &&
		read_only "$p" /var/lib/dpkg && hidden "$p" /home/trainer
}
# A trainer's NCCL threads (nccl_mimic, which names them as NCCL does) get
# the training profile's SCHED_DEADLINE from the sandboxed watcher, and the
# service thread can still create threads (reset-on-fork).
MIMIC=/tmp/sandbox-mimic
policy_of() { stat_of "/proc/$1/task/$2" policy; }
watcher_sets_deadline() {
	rm -f $MIMIC.release
	runuser -u trainer -- nccl_mimic --delay 200 --spawn-after 2000 --run 120000 --hold $MIMIC.release >$MIMIC.log &
	i=0
	while ! grep -q "^spawn result" $MIMIC.log && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	mpid=$(sed -n 's/^ready pid=//p' $MIMIC.log)
	ok=0
	for tid in $(sed -n 's/^named tid=\([0-9]*\) .*/\1/p' $MIMIC.log); do
		i=0
		while [ "$(policy_of "$mpid" "$tid")" != 6 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		if [ "$(policy_of "$mpid" "$tid")" = 6 ]; then ok=$((ok + 1)); else
			echo "thread $tid ($(cat "/proc/$mpid/task/$tid/comm")): policy $(policy_of "$mpid" "$tid")"; fi
	done
	touch $MIMIC.release
	wait
	cat $MIMIC.log
	[ "$ok" = 2 ] && grep -q "^spawn result=ok" $MIMIC.log ||
		{ journal mltune-watch.service | tail -n 10; return 1; }
}
# udevadm settle (mltune.service's ExecStartPre=, whose failure the unit
# ignores) ran and succeeded inside the sandbox.
settle_ran() {
	systemctl show -P ExecStartPre mltune.service | tee /dev/stderr | grep -q "code=exited ; status=0 "
}
# mltune-metrics.service runs and writes the textfile node_exporter reads.
metrics_writes_textfile() {
	rm -f $TEXTFILE
	systemctl start mltune-metrics.service &&
		[ "$(systemctl show -P Result mltune-metrics.service)" = success ] &&
		grep -q '^mltune_profile_active{.*} 1$' $TEXTFILE &&
		[ "$(stat -c '%U %a' $TEXTFILE)" = "root 644" ] ||
		{ ls -l $TEXTFILE; journal mltune-metrics.service | tail -n 5; return 1; }
}
sandbox_checks() {
	sandbox_exposure
	t_check "mltune-metrics.service writes $TEXTFILE in its sandbox" metrics_writes_textfile
	t_check "udevadm settle succeeded in mltune.service's sandbox" settle_ran
	t_check "the watcher's sandbox: cgroups and /run/mltune writable, the rest read-only" watcher_sandbox
	t_check "the watcher gives a trainer's NCCL threads SCHED_DEADLINE from its sandbox" watcher_sets_deadline
	t_check "mltune-serve.service's sandbox: what a switch changes writable, the rest not" serve_sandbox
}

purge() {
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -q mltunectl mltune-dkms >/tmp/purge.log 2>&1 ||
		{ cat /tmp/purge.log; return 1; }
}
all_gone() {
	! pgrep -f "mltunectl watch" && ! pgrep -f "mltunectl serve" &&
		! systemctl cat mltune.service mltune-watch.service 2>/dev/null &&
		! systemctl cat mltune-metrics.service mltune-metrics.timer 2>/dev/null &&
		! systemctl cat mltune-serve.socket mltune-serve.service 2>/dev/null && [ ! -e $TEXTFILE ]
}
no_file_left() {
	left=""
	while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then left="$left $f"; fi; done <"$STATE/files"
	for d in /etc/mltune /usr/src/mltune-0.1.0 /var/lib/dkms/mltune /run/mltune /var/lib/mltune; do
		if [ -e "$d" ]; then left="$left $d"; fi
	done
	[ -z "$left" ] || { echo "left:$left"; return 1; }
}

booted() {
	settled
	t_check "systemd-modules-load loaded the module" loaded_by_modules_load
	t_check "mltune.service applied the configuration at boot" applied_at_boot
	journal mltune.service | sed 's/^/# mltune.service: /'
	t_check "it applied after the module was loaded (kernel backend)" kernel_backend
	t_check "profile training active in the module" profile_active
	t_check "pool reserved on node 0 and node 1 (32 pages each)" pool_reserved
	t_check "per-user quota of 4 pages" is $HP/user_quota 4
	t_check "feeder cores $FEEDER on" feeder_on
	t_check "mltune-watch.service runs the watcher" watcher_runs
	t_check "mltunectl verify training exits 0" mltunectl verify training

	t_check "/dev/mltune is root:mltune 0660" dev_mode
	t_check "a member of mltune maps a pool buffer, charged to it" member_maps
	t_check "beyond the quota the member gets EDQUOT" member_over_quota
	t_check "a user outside the group gets EACCES" outsider_refused
	t_check "nothing stays charged or mapped" nothing_charged

	t_check "systemctl reload mltune applies a new pool size" reload_applies

	# A failing apply: a pool larger than node 1's memory. The knobs, the
	# NIC settings and the feeder cores are applied before the pool step
	# fails; all of them go back.
	cp /etc/mltune/mltune.toml "$STATE/good.toml"
	sed -i 's/^reserve = .*/reserve = { 0 = "32M", 1 = "1G" }/' /etc/mltune/mltune.toml
	t_check "an apply that fails fails the unit" restart_fails
	t_check "the journal says why" journal_says_why
	t_check "the failed apply left the knobs on their baseline" same_as "$STATE/knobs-baseline" knob_values
	t_check "... the feeder off, the pool as before the boot, the module on baseline" rest_as_before
	cp "$STATE/good.toml" /etc/mltune/mltune.toml
	t_check "with the configuration fixed, restart applies it again" restart_applies

	t_check "node_exporter serves mltunectl metrics: training active, in line" exporter_serves_training
	t_check "... and inference after switch inference, training after switching back" exporter_follows_switch
	sandbox_checks
	t_check "mltune-serve.socket listens on /run/mltune/mltunectl.sock" serve_socket_listens
	t_check "those switches ran in mltune-serve.service (its journal)" switches_were_served
	t_check "after the service is killed, the next switch starts it again" served_after_kill
	serve_checks

	t_check "apt purge removes both packages" purge
	t_check "the module is unloaded" test ! -d /sys/module/mltune
	t_check "the node is back on its baseline" same_as "$STATE/baseline" node_state
	t_check "the watcher, the resident switcher and the units are gone" all_gone
	t_check "no file of the packages is left" no_file_left
	t_done
}

case ${1:-} in
installed) installed ;;
booted) booted ;;
*) echo "usage: guest.sh installed|booted" >&2; exit 2 ;;
esac
