#!/bin/bash
# Host-side VM test: a guest booted with isolcpus= domain isolation on the
# feeder CPUs of the guest's own plan.  `mltunectl feeder status` (text and
# --json) reports the boot isolation; sched_ext is refused with the reason
# (on 7.2, which has sched_ext: the isolcpus= domain isolation; on 6.1 and
# 6.12: the kernel has no sched_ext) and `feeder on --mechanism sched_ext`
# exits 2 with it; `feeder on` (auto) uses the cpuset mechanism (an
# `isolated` partition, or cpuset.cpus alone where the kernel refuses every
# partition on isolcpus= CPUs), `feeder run` places on the feeder CPUs only,
# and `feeder off` undoes it.  A control boot without isolcpus=
# checks that none of this is reported there (on 7.2 sched_ext is chosen).
# Usage: feeder_isolcpus.sh [6.1|6.12|7.2]        Two boots, about a minute.
set -u
. "$(dirname "$0")/lib.sh"
# check NAME LOG CONDITION...: ok when the condition (a command) succeeds.
check() { local name=$1 log=$2; shift 2; if "$@"; then ok "$series: $name"; else notok "$series: $name"; show "$log"; fi; }

hv_begin 8
vm() { MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-180} "$ROOT/tests/vm/run" --kernel "$series" --no-build "$@"; }

# sched_ext is expected exactly where the kernel package has it.
has_scx=0
[ "$series" = 7.2 ] && has_scx=1

# The guest side: prints marked sections the host checks.
cat >"$tmp/guest.sh" <<'GUEST'
echo "FEEDER=$(mltunectl plan --json | sed -n 's/^  "feeder": "\(.*\)",$/\1/p')"
echo "ISOLATED=$(cat /sys/devices/system/cpu/isolated)"
echo "SCX=$([ -e /sys/kernel/sched_ext/state ] && echo yes || echo no)"
echo "---- status"; mltunectl feeder status; echo "STATUS_RC=$?"
echo "---- json"; mltunectl --json feeder status >/tmp/status.json; echo "JSON_RC=$?"; cat /tmp/status.json
[ "${1:-}" = control ] && exit 0
echo "---- on-scx"; mltunectl feeder on --mechanism sched_ext; echo "ONSCX_RC=$?"
echo "---- on-auto"; mltunectl feeder on; echo "ON_RC=$?"
mltunectl feeder status; mltunectl --json feeder status >/tmp/on.json
echo "PARTITION=$(cat /sys/fs/cgroup/mltune-feeder/cpuset.cpus.partition 2>/dev/null)"
echo "PART_CPUS=$(cat /sys/fs/cgroup/mltune-feeder/cpuset.cpus.effective 2>/dev/null)"
echo "RUN_CPUS=$(mltunectl feeder run -- sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
echo "PLAIN_CPUS=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
echo "SCX_OPS=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
echo "---- on-json"; cat /tmp/on.json
echo "---- off"; mltunectl feeder off; echo "OFF_RC=$?"
echo "AFTER_OFF=$(mltunectl feeder status | head -n 1)"
GUEST
val() { sed -n "s/^$1=//p" "$2" | tr -d '\r' | tail -n 1; }
# section LOG NAME: the lines after "---- NAME" up to the next marker
section() { awk -v s="---- $2" '$0 == s {on = 1; next} /^---- / {on = 0} on' "$1" | tr -d '\r'; }
# jq-less JSON checks: json LOG SECTION PYTHON-EXPR (j is the document)
json() {
	section "$1" "$2" | sed -n '/^{/,/^}/p' | python3 -c "import json, sys
j = json.load(sys.stdin)
sys.exit(0 if ($3) else 1)" 2>>"$1.py"
}

# 1. Control boot, no isolcpus=: the plan's feeder CPUs, no boot isolation.
vm --file "$tmp/guest.sh:/root/guest.sh" -- sh /root/guest.sh control >"$tmp/control.log" 2>&1
rc_control=$?
F=$(val FEEDER "$tmp/control.log")
want_mech=cpuset
[ "$has_scx" = 1 ] && want_mech=sched_ext
check "control boot: plan feeder CPUs '$F', status reports no boot isolation, chooses $want_mech" "$tmp/control.log" \
	eval '[ -n "$F" ] && [ "$(val SCX "$tmp/control.log")" = "$([ $has_scx = 1 ] && echo yes || echo no)" ] &&
		grep -q "^boot isolation: none" "$tmp/control.log" &&
		grep -q "^mechanism choice: $want_mech" "$tmp/control.log" &&
		json "$tmp/control.log" json "j[\"boot_isolation\"][\"isolated\"] == \"\" and j[\"choice\"][\"mechanism\"] == \"$want_mech\""'
[ -n "$F" ] || F=6-7 # keep going with the guest's usual plan

# 2. Booted with isolcpus= on the feeder CPUs (the form 'boot show' uses).
iso="managed_irq,domain,$F"
vm --cmdline "isolcpus=$iso" --file "$tmp/guest.sh:/root/guest.sh" -- sh /root/guest.sh >"$tmp/iso.log" 2>&1
rc_iso=$?
echo "# booted with isolcpus=$iso; /sys/devices/system/cpu/isolated: $(val ISOLATED "$tmp/iso.log")"
if [ "$has_scx" = 1 ]; then
	why="isolcpus= domain isolation is active on CPUs $F: sched_ext refuses to attach"
else
	why="the kernel has no sched_ext"
fi
check "isolcpus boot: feeder status reports the boot isolation and refuses sched_ext ($why)" "$tmp/iso.log" \
	eval '[ "$(val ISOLATED "$tmp/iso.log")" = "$F" ] && [ "$(val STATUS_RC "$tmp/iso.log")" = 0 ] &&
		section "$tmp/iso.log" status | grep -qx "boot isolation: isolated=$F nohz_full=[^ ]* isolcpus=$iso rcu_nocbs=" &&
		section "$tmp/iso.log" status | grep -qF "sched_ext refused: $why" &&
		section "$tmp/iso.log" status | grep -qx "mechanism choice: cpuset"'
check "isolcpus boot: feeder status --json reports the boot isolation and the refusal" "$tmp/iso.log" \
	eval '[ "$(val JSON_RC "$tmp/iso.log")" = 0 ] &&
		json "$tmp/iso.log" json "j[\"boot_isolation\"][\"isolated\"] == \"$F\" and
			j[\"boot_isolation\"][\"isolcpus\"] == \"$iso\" and
			j[\"choice\"][\"sched_ext_usable\"] is False and
			\"$why\" in j[\"choice\"][\"sched_ext_refused\"] and j[\"choice\"][\"mechanism\"] == \"cpuset\" and
			any(r.startswith(\"boot isolation present: isolated=$F\") for r in j[\"choice\"][\"reasons\"])"'
check "isolcpus boot: feeder on --mechanism sched_ext exits 2 with the reason" "$tmp/iso.log" \
	eval '[ "$(val ONSCX_RC "$tmp/iso.log")" = 2 ] &&
		section "$tmp/iso.log" on-scx | grep -qF "mltunectl: error: sched_ext refused: $why"'
# A 'root' partition on isolcpus= CPUs is invalid since 6.10 ("partition
# config conflicts with housekeeping setup"): the cpuset path asks for an
# 'isolated' one there (6.1 and 7.2 accept it); 6.12 refuses every partition
# on isolcpus= CPUs, and then the feeder cgroup is confined by cpuset.cpus
# alone (a member cgroup), which status explains ("cpuset: no partition ...").
# Either way a feeder task runs only on the feeder CPUs and an ordinary task
# only off them.
check "isolcpus boot: feeder on (auto) keeps CPUs $F with the cpuset mechanism ($(val PARTITION "$tmp/iso.log") cgroup), sched_ext not attached" "$tmp/iso.log" \
	eval '[ "$(val ON_RC "$tmp/iso.log")" = 0 ] &&
		section "$tmp/iso.log" on-auto | grep -qx "feeder on: CPUs $F with cpuset, housekeeping .*" &&
		[ "$(val PART_CPUS "$tmp/iso.log")" = "$F" ] && [ -z "$(val SCX_OPS "$tmp/iso.log")" ] &&
		json "$tmp/iso.log" on-json "j[\"mechanism\"] == \"cpuset\" and j[\"active\"] and j[\"cpus\"] == \"$F\" and
			any(\"type \x27isolated\x27\" in r for r in j[\"choice\"][\"reasons\"]) and
			((j[\"partition\"] == \"isolated\" and j[\"cpuset_note\"] == \"\") or
			 (j[\"partition\"] == \"member\" and j[\"cpuset_note\"].startswith(\"no partition (the kernel refused one: isolated invalid\")))"'
check "isolcpus boot: feeder run places on $F only ($(val RUN_CPUS "$tmp/iso.log")), an ordinary task off it ($(val PLAIN_CPUS "$tmp/iso.log"))" "$tmp/iso.log" \
	eval '[ "$(val RUN_CPUS "$tmp/iso.log")" = "$F" ] && [ -n "$(val PLAIN_CPUS "$tmp/iso.log")" ] &&
		python3 -c "import sys
def cpus(s):
    out = set()
    for r in s.split(\",\"):
        a, _, b = r.partition(\"-\")
        out |= set(range(int(a), int(b or a) + 1))
    return out
sys.exit(0 if not (cpus(sys.argv[1]) & cpus(sys.argv[2])) else 1)" "$(val PLAIN_CPUS "$tmp/iso.log")" "$F"'
check "isolcpus boot: feeder off undoes it" "$tmp/iso.log" \
	eval '[ "$(val OFF_RC "$tmp/iso.log")" = 0 ] && [ "$(val AFTER_OFF "$tmp/iso.log")" = "feeder: off" ]'
# Both guests ran to the end without a splat (tests/vm/run: 124 timeout,
# 125 kernel splat, 126 the command never completed).
check "both guests ran clean (exit $rc_control, $rc_iso)" "$tmp/iso.log" test "$rc_control" = 0 -a "$rc_iso" = 0
hv_end
