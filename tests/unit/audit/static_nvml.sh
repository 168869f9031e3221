#!/bin/sh
# The mltunectl executable (static by default) loads NVML with dlopen at run
# time: point it at the fake library and check what the audit read. Then the
# same through mltune-nvml, the dynamically linked helper a static mltunectl
# runs on a node whose glibc is another (MLTUNE_NVML_HELPER forces it here).
#   static_nvml.sh MLTUNECTL FAKE_NVML_LIB FIXTURE_DIR MLTUNE_NVML
set -eu
ctl=$1 lib=$2 root=$3 helper=$4
cfg=$(mktemp)
trap 'rm -f "$cfg"' EXIT
printf 'driver=550.90.07\ngpu 00000000:18:00.0 persistence=0\n' >"$cfg"
# audit_reads VIA SOURCE [VAR=VALUE...]: the audit, with the variables set,
# exits 1 (findings) and reports NVML as SOURCE and GPU 0's persistence off.
audit_reads() {
	via=$1 source=$2 rc=0
	shift 2
	out=$(env MLTUNE_FAKE_NVML="$cfg" "$@" "$ctl" --sysroot "$root" audit -v --nvml "$lib" --no-nvidia-smi) || rc=$?
	echo "mltunectl ($(file -b "$ctl" | cut -d, -f1-2)) $via exited $rc"
	[ "$rc" = 1 ] || { echo "FAIL: $via: expected exit 1 (findings)"; exit 1; }
	for want in "$source: 1 GPUs" "Enabled on 0/1 GPUs (off: GPU 0 (0000:18:00.0))"; do
		if ! printf '%s\n' "$out" | grep -qF "$want"; then
			echo "FAIL: $via: no '$want' in:"
			printf '%s\n' "$out" | grep -A3 'gpu:' || true
			exit 1
		fi
		echo "ok: $want"
	done
}
audit_reads "in-process" "NVML ($lib), driver 550.90.07"
case $(file -b "$helper") in
*"dynamically linked"*) echo "ok: mltune-nvml is dynamically linked" ;;
*) echo "FAIL: mltune-nvml is not dynamically linked: $(file -b "$helper")"; exit 1 ;;
esac
audit_reads "through mltune-nvml" "NVML ($lib), driver 550.90.07 through mltune-nvml" MLTUNE_NVML_HELPER="$helper"
