#!/bin/sh
# mltunectl serve (the resident switcher) with the module loaded:
#   - the service and its clients find one socket through MLTUNE_SOCKET;
#     `serve --socket`, which bound a socket no client used, is refused,
#   - the service keeps the knob files of the switches it runs open,
#   - a client whose stdout is a full FIFO it holds open itself holds up
#     neither the service, nor other served or direct commands, nor SIGTERM,
#   - a client killed while its switch waits for its turn: never run,
#   - the root of another user namespace gets no switch from the service.
. "$(dirname "$0")/lib.sh"
t_plan 16
M=/usr/sbin/mltunectl
[ -x "$M" ] || { echo "# SKIP: no mltunectl in the guest"; exit 4; }
[ -d /sys/kernel/mltune ] || { echo "# SKIP: the module is not loaded"; exit 4; }

T=/tmp/serve-test
rm -rf $T && mkdir -p $T
export MLTUNE_SOCKET=$T/s.sock
LOG=$T/serve.log
SVC=
# How long a check waits for something to happen before it fails: far
# beyond what it takes in a loaded TCG guest.
B=${MLTUNE_SERVE_WAIT:-60}

# wait_until CMD...: CMD succeeds within $B seconds (tried every 0.1 s).
wait_until() {
	_n=$((B * 10))
	until "$@" >/dev/null 2>&1; do
		_n=$((_n - 1))
		[ "$_n" -gt 0 ] || return 1
		sleep 0.1
	done
}
# in_syscall PID NR...: PID waits in one of these system calls (x86-64
# numbers: 1 write, 45 recvfrom, 47 recvmsg, 73 flock).
in_syscall() {
	_p=$1; shift
	read -r _s _rest </proc/"$_p"/syscall || return 1
	for _nr; do [ "$_s" = "$_nr" ] && return 0; done
	return 1
}
running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' /proc/"$1"/status; }
stopped() { ! running "$1"; }
logged() { grep -q "$1" $LOG; }
# (not under t_check: the service must not hold its command substitution open)
start_service() {
	"$M" serve >/dev/null 2>>$LOG &
	SVC=$!
	wait_until test -S "$MLTUNE_SOCKET"
}
stop_service() {
	[ -n "$SVC" ] || return 0
	kill -TERM "$SVC" 2>/dev/null
	wait_until stopped "$SVC" || kill -KILL "$SVC" 2>/dev/null
	wait "$SVC" 2>/dev/null
	SVC=
}
cleanup() {
	stop_service
	for p in $KILL_AT_END; do kill -KILL "$p" 2>/dev/null; done
	exec 3>&- 4>&-
	MLTUNE_NO_SERVICE=1 "$M" off >/dev/null 2>&1
	rm -rf $T
}
KILL_AT_END=
trap cleanup EXIT

# ---- one socket for the service and its clients -----------------------------
if timeout 30 "$M" serve --socket $T/other.sock >$T/opt.out 2>&1; then rc=0; else rc=$?; fi
if [ "$rc" = 2 ] && grep -q -- "--socket" $T/opt.out; then t_ok "serve --socket is refused (exit 2)"; else
	t_fail "serve --socket is refused (exit 2)"
	t_diag "exit $rc: $(cat $T/opt.out)"
fi
if start_service; then t_ok "serve listens on \$MLTUNE_SOCKET"; else t_fail "serve listens on \$MLTUNE_SOCKET"; fi
t_check "switch training (served)" "$M" switch training
t_check "... ran in the service" wait_until logged "switch training: exit 0"
# What the service keeps between requests (its Caches, current on the
# thread that runs them): the knob files the switch read and wrote stay open.
kept_knob_files() {
	for _fd in /proc/"$SVC"/fd/*; do
		case $(readlink "$_fd") in /proc/sys/* | /sys/*) return 0 ;; esac
	done
	return 1
}
t_check "the service keeps the switch's knob files open" kept_knob_files

# ---- a client with a full stdout --------------------------------------------
# The shell holds a FIFO open read-write on fd 3 with its 64 KiB filled:
# whoever writes to it waits until someone reads (a stalled log collector).
mkfifo $T/fifo3 && exec 3<>$T/fifo3
dd if=/dev/zero bs=4096 count=16 >&3 2>/dev/null
"$M" -v switch inference >&3 2>&3 &
STUCK=$!
KILL_AT_END="$KILL_AT_END $STUCK"
t_check "the service ran the switch of a client with a full stdout" wait_until logged "switch inference: exit 0"
t_check "another client's off is served meanwhile" timeout "$B" "$M" off
t_check "a direct off (MLTUNE_NO_SERVICE) meanwhile" env MLTUNE_NO_SERVICE=1 timeout "$B" "$M" off
t_check "the client with the full stdout still waits on it" running "$STUCK"
kill -TERM "$SVC"
t_check "SIGTERM stops the service meanwhile" wait_until stopped "$SVC"
stop_service
kill -KILL "$STUCK" 2>/dev/null
exec 3>&-

# ---- a client killed while queued ---------------------------------------------
LOG=$T/serve2.log # this part's own log
start_service || t_diag "serve did not start again"
mkfifo $T/fifo4 && exec 4<>$T/fifo4
dd if=/dev/zero bs=4096 count=16 >&4 2>/dev/null
# A direct switch that holds the node lock: its -v progress (written under
# the lock) waits on a full FIFO.
MLTUNE_NO_SERVICE=1 "$M" -v switch training >/dev/null 2>&4 &
HOLDER=$!
KILL_AT_END="$KILL_AT_END $HOLDER"
queued_client() {
	wait_until in_syscall "$HOLDER" 1 || { echo "the direct switch does not wait on its stderr"; return 1; }
	"$M" switch training >/dev/null 2>&1 &
	FIRST=$!
	wait_until in_syscall "$SVC" 73 || { echo "the served switch does not wait for the lock"; return 1; }
	"$M" switch inference >/dev/null 2>&1 &
	KILLED=$!
	wait_until in_syscall "$KILLED" 45 47 || { echo "the next client does not wait for its reply"; return 1; }
	kill -KILL "$KILLED"
	wait "$KILLED" 2>/dev/null
	"$M" off >$T/off.out 2>&1 &
	LAST=$!
	wait_until in_syscall "$LAST" 45 47 || { echo "off does not wait for its reply"; return 1; }
}
if queued_client >$T/queued.out 2>&1; then
	t_ok "a switch waits in the service behind a direct one, the next client is killed while queued"
else
	t_fail "a switch waits in the service behind a direct one, the next client is killed while queued"
	sed 's/^/# /' $T/queued.out
fi
dd of=/dev/null bs=4096 count=16 <&4 2>/dev/null # the direct switch goes on
wait "$HOLDER"
if wait "$FIRST" && wait "$LAST"; then t_ok "the served switch before it and the off after it ran"; else
	t_fail "the served switch before it and the off after it ran"
	sed 's/^/# /' $T/off.out
fi
if logged "switch inference: its client went away before its turn: not run" && ! logged "switch inference: exit"
then t_ok "the killed client's switch inference was not run"; else
	t_fail "the killed client's switch inference was not run"
	sed 's/^/# /' $LOG
fi
t_check "the module is not on inference after the later off" sh -c "! grep -qx inference /sys/kernel/mltune/profile"
exec 4>&-

# ---- the root of another user namespace ----------------------------------------
if unshare -r true 2>/dev/null; then
	if unshare -r "$M" switch inference >$T/ns.out 2>&1; then rc=0; else rc=$?; fi
	if [ "$rc" = 1 ] && grep -q "user namespace other than the initial one" $T/ns.out; then
		t_ok "root of a user namespace is refused by the service (exit 1)"
	else
		t_fail "root of a user namespace is refused by the service (exit 1)"
		t_diag "exit $rc: $(cat $T/ns.out)"
	fi
	t_check "... and the module stays off inference" sh -c "! grep -qx inference /sys/kernel/mltune/profile"
else
	t_skip "root of a user namespace is refused by the service (no user namespaces)"
	t_skip "... and the module stays off inference"
fi
t_done
