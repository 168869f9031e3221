#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Isolation proof: foreign interruptions per second on the feeder cores under
# a fixed noisy load, for every isolation mechanism, per kernel of the
# matrix, counted by `mltunectl noise` (BPF).  Two boots per kernel: one
# plain (no isolation, the training profile with feeder cores through the
# cpuset partition, through sched_ext where the kernel has it), one with the
# boot isolation that `mltunectl boot show` recommends for the guest (boot
# isolation alone, and with the training profile and feeder cores: the full
# training setup).  The plain boot also runs the training profile with an
# isolated cpuset partition (`feeder on --partition isolated`): with
# sched_ext, the runtime setups.  bench.sh runs in the guests.  Then the
# overhead of noise itself on this machine.  Results and their account:
# bench/noise/README.md.
#
#   bench/noise/run.sh [--no-build] [--kernel S]... [--boot-rounds N] [--plain-only]
#                      [--overhead-only] [SECONDS [ROUNDS]]
#                      (default: the matrix, 5 s windows, 3 rounds; the
#                      boot-isolated guest ROUNDS too, --boot-rounds fewer:
#                      under TCG it runs about 25 times slower: one round
#                      of one setup takes 20 to 35 minutes; --plain-only
#                      leaves the boot-isolated guest out)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
kernels="" nobuild="" brounds="" plain_only=""
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernels="$kernels $2"; shift 2 ;;
	--no-build) nobuild=--no-build; shift ;;
	--boot-rounds) brounds=$2; shift 2 ;;
	--plain-only) plain_only=1; shift ;;
	--overhead-only) kernels=" "; shift ;;
	*) break ;;
	esac
done
kernels=${kernels:-$("$ROOT/scripts/kernels.sh" matrix guest)}
secs=${1:-5}
rounds=${2:-3}
brounds=${brounds:-$rounds}
out=$ROOT/build/bench/noise
mkdir -p "$out"
plant=$ROOT/build/userspace/noise_plant
[ -x "$plant" ] || { echo "noise bench: $plant missing (make userspace)" >&2; exit 1; }
for b in stress-ng jq; do
	command -v $b >/dev/null || { echo "noise bench: $b missing (make deps)" >&2; exit 1; }
done
# The veth module of a kernel (the guest loads only a few drivers itself).
veth() { # veth KERNEL -> path of the uncompressed module
	local kdir f
	kdir=$("$ROOT/scripts/kernels.sh" fetch "$1") || return 1
	f=$(find "$kdir/modules" -name 'veth.ko*' | head -n 1)
	case $f in
	*.xz) xz -dc "$f" >"$out/veth-$1.ko" ;;
	*.zst) zstd -qdc "$f" >"$out/veth-$1.ko" ;;
	*) cp "$f" "$out/veth-$1.ko" ;;
	esac
	echo "$out/veth-$1.ko"
}
vm() { # vm KERNEL LOG ROUNDS MINUTES_PER_ROUND [--cmdline ARGS] -- SETUPS...
	local k=$1 log=$2 r=$3 m=$4; shift 4
	local cmd=()
	while [ "$1" != -- ]; do cmd+=("$1"); shift; done
	shift
	MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-$((1200 + 60 * m * r * $#))} \
		"$ROOT/tests/vm/run" --kernel "$k" $nobuild "${cmd[@]}" --bin "$plant" --bin stress-ng --bin jq \
		--bin /usr/sbin/ip --file "$(veth "$k"):/root/veth.ko" \
		--file "$ROOT/bench/noise/bench.sh:/root/bench.sh" -- \
		sh /root/bench.sh "$secs" "$r" "$@" >"$log" 2>&1
	nobuild=--no-build
	grep -q '^BENCH_DONE' "$log"
}
rc=0
for k in $kernels; do
	echo "==== kernel $k"
	setups="none cpuset isolated"
	[ "$k" = 7.2 ] && setups="$setups sched_ext"
	vm "$k" "$out/$k-plain.log" "$rounds" 1 -- $setups || { rc=1; tail -n 20 "$out/$k-plain.log"; }
	boot=$(sed -n 's/^BOOT //p' "$out/$k-plain.log" | tr -d '\r')
	# only the CPU isolation parameters of the recommendation
	iso=$(echo "$boot" | tr ' ' '\n' | grep -E '^(isolcpus|nohz_full|rcu_nocbs|irqaffinity|skew_tick|nosoftlockup)' | tr '\n' ' ')
	echo "boot isolation: $iso"
	if [ -n "$plain_only" ]; then
		echo "boot-isolated guest: left out (--plain-only)"
	elif [ -n "$iso" ]; then
		vm "$k" "$out/$k-boot.log" "$brounds" 30 --cmdline "$iso" -- boot boot+cpuset || { rc=1; tail -n 20 "$out/$k-boot.log"; }
	else
		echo "noise bench: no boot isolation recommended" >&2; rc=1
	fi
	grep -h '^bench:' "$out/$k"-*.log | sort | uniq -c
done

# The overhead of noise itself, on this machine's kernel (TCG guests time too
# unevenly for a 1% question; instruction counting stalls the guests' SMP
# bring-up): a CPU-bound loop pinned to the last CPU, alone and with
# `mltunectl noise` watching that CPU, alternating which goes first, the
# median of each.  Needs root and a kernel with BTF; skipped otherwise.
ctl=$ROOT/build/userspace/mltunectl
orounds=${MLTUNE_NOISE_OVERHEAD_ROUNDS:-11}
echo "==== overhead of noise on a CPU-bound loop (this machine, $(uname -r), $orounds rounds of 2 s)"
if [ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ] && [ -x "$ctl" ]; then
	c=$(($(nproc) - 1))
	alone() { taskset -c $c "$plant" loop loop 2 | sed -n 's/^iterations //p'; }
	watched() { "$ctl" noise --cpus $c -- taskset -c $c "$plant" loop loop 2 | sed -n 's/^iterations //p'; }
	for r in $(seq 1 "$orounds"); do
		if [ $((r % 2)) = 1 ]; then a=$(alone); b=$(watched); else b=$(watched); a=$(alone); fi
		echo "LOOP host alone $r $a"
		echo "LOOP host noise $r $b"
	done >"$out/host-overhead.log"
	# Each round's pair ran back to back: the median of the per-round losses
	# cancels what the rest of the machine did meanwhile.
	awk '$1 == "LOOP" { v[$3] = v[$3] " " $5; it[$3, $4] = $5 }
		function median(s,   a, m, i, j, x) { m = split(s, a, " "); for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
			return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
		END { for (r = 1; ("alone", r) in it; r++) l = l " " 100 * (it["alone", r] - it["noise", r]) / it["alone", r]
			printf "OVERHEAD host loop alone %d noise %d (medians), loss per round: median %.3f%%\n",
				median(v["alone"]), median(v["noise"]), median(l) }' "$out/host-overhead.log"
else
	echo "overhead: skipped (needs root, /sys/kernel/btf/vmlinux and $ctl)"
fi

echo "==== foreign interruptions per second and feeder core (median of $rounds rounds of $secs s)"
for k in $kernels; do
	cat "$out/$k"-*.log 2>/dev/null | tr -d '\r' | awk -v k="$k" '
		$1 == "RESULT" { n[$2, $3] += $5; t[$2, $3] = $6; c[$2, $3]++; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
		function median(s,   a, m, i, j, x) { m = split(s, a, " "); for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
			return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
		END {
			for (i = 1; i <= ns; i++) { s = order[i]; r = ""
				for (key in c) { split(key, p, SUBSEP); if (p[1] == s) r = r " " n[key] / (c[key] * t[key]) }
				med[s] = median(r) }
			for (i = 1; i <= ns; i++) { s = order[i]
				printf "RATE %s %s %.1f/s none/%s=%s\n", k, s, med[s], s,
					(med[s] > 0 ? sprintf("%.0fx", med["none"] / med[s]) : "inf") }
		}'
done
echo "==== sources per setup (per second and feeder core, summed over rounds)"
for k in $kernels; do
	cat "$out/$k"-*.log 2>/dev/null | tr -d '\r' | awk -v k="$k" -v secs="$secs" -v rounds="$rounds" '
		$1 == "RESULT" { ncpu[$2, $4] = 1; t[$2] += $6 }
		# SOURCE setup round id count name...: summed by name, pids left out
		$1 == "SOURCE" { name = $6; for (i = 7; i <= NF; i++) name = name " " $i
			sub(/ \(pid [0-9]+\)$/, "", name); cnt[$2 SUBSEP name] += $5 }
		END { for (key in ncpu) { split(key, p, SUBSEP); nc[p[1]]++ }
			for (key in cnt) { split(key, p, SUBSEP); s = p[1]
				per = cnt[key] / t[s]
				if (per >= 0.1) printf "SRC %s %s %.1f %s\n", k, s, per, p[2] } }' | sort -k3,3 -k4,4nr
done
echo "==== what ran inside them: details (per second and feeder core, summed over rounds)"
for k in $kernels; do
	cat "$out/$k"-*.log 2>/dev/null | tr -d '\r' | awk -v k="$k" '
		$1 == "RESULT" { t[$2] += $6 }
		$1 == "DETAIL" { cnt[$2 SUBSEP $4] += $5 }
		END { for (key in cnt) { split(key, p, SUBSEP); per = cnt[key] / t[p[1]]
				if (per >= 0.1) printf "DET %s %s %.1f %s\n", k, p[1], per, p[2] } }' | sort -k3,3 -k4,4nr
done
exit $rc
