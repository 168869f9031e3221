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
