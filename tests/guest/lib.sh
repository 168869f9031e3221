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
