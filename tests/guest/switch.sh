#!/bin/sh
# mltunectl switch through the kernel backend (module loaded) and through the
# direct backend (module unloaded) on a real kernel:
#   - verify exits 1 before and 0 after a switch,
#   - both backends leave identical knob values,
#   - switch baseline (and unloading the module) restores the original values.
. "$(dirname "$0")/lib.sh"
t_plan 12
M=/usr/sbin/mltunectl
[ -x "$M" ] || { echo "# SKIP: no mltunectl in the guest"; exit 4; }

# Knob paths of a profile, from "name = value ... # file:line" lines.
knob_paths() {
	"$M" profile show "$1" | sed -nE 's/^([^# ][^ ]*) (=|>=|<=) .*/\1/p' | while read -r k; do
		case $k in
		*/*) echo "/sys/$k" ;;
		*) echo "/proc/sys/$(echo "$k" | tr . /)" ;;
		esac
	done
}
# One "path=value" line per knob present on this kernel.
snapshot() {
	for p in $PATHS; do
		[ -e "$p" ] && echo "$p=$(tr -s ' \t\n' ' ' <"$p" | sed 's/ $//')"
	done
}

PATHS=$(knob_paths training)
[ -n "$PATHS" ] || { t_fail "knob list of training"; t_done; exit 1; }
orig=$(snapshot)
t_diag "training has $(echo "$PATHS" | wc -w) knobs"

if "$M" verify training >/tmp/v.out 2>&1; then
	t_fail "verify training exits 1 before the switch"; sed 's/^/# /' /tmp/v.out
else
	[ $? = 1 ] && t_ok "verify training exits 1 before the switch" ||
		t_fail "verify training exits 1 before the switch (exit code)"
fi

# Kernel backend: the module is loaded.
t_check "switch training (kernel backend)" "$M" switch training --backend kernel
kern=$(snapshot)
t_check "verify training exits 0 after the kernel switch" "$M" verify training
t_check "module reports training active" grep -qx training /sys/kernel/mltune/profile
t_check "switch baseline (kernel backend)" "$M" switch baseline --backend kernel
if [ "$(snapshot)" = "$orig" ]; then t_ok "kernel baseline restores every value"; else
	t_fail "kernel baseline restores every value"
	echo "$orig" >/tmp/o; snapshot >/tmp/n
	diff /tmp/o /tmp/n | sed 's/^/# /'
fi

# Direct backend: the module is unloaded.
"$M" switch training --backend kernel >/dev/null 2>&1
rmmod mltune
if [ "$(snapshot)" = "$orig" ]; then t_ok "unloading the module restores the baseline"; else
	t_fail "unloading the module restores the baseline"
	echo "$orig" >/tmp/o; snapshot >/tmp/n; diff /tmp/o /tmp/n | sed 's/^/# /'
fi
t_check "switch training (direct backend, no module)" "$M" switch training
direct=$(snapshot)
if [ "$direct" = "$kern" ]; then t_ok "direct and kernel backends leave identical values"; else
	t_fail "direct and kernel backends leave identical values"
	echo "$kern" >/tmp/k; echo "$direct" >/tmp/d; diff /tmp/k /tmp/d | sed 's/^/# /'
fi
t_check "verify training exits 0 after the direct switch" "$M" verify training
t_check "switch baseline (direct backend)" "$M" switch baseline
if [ "$(snapshot)" = "$orig" ]; then t_ok "direct baseline restores every value"; else
	t_fail "direct baseline restores every value"
	echo "$orig" >/tmp/o; snapshot >/tmp/n; diff /tmp/o /tmp/n | sed 's/^/# /'
fi

insmod "$MLTUNE_KO" 2>/dev/null
t_done
