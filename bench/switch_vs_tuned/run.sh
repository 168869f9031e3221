#!/bin/bash
# mltunectl switch (direct backend) vs tuned (one-shot, no daemon) vs a Python
# loop writing the same sysctls; the whole profile (every domain the host
# has) vs tuned with its sysctl, sysfs, cpu, disk and net plugins; mltunectl
# verify and audit vs tuned-adm verify.
# Run as root on the build host. Every knob is captured first and restored on
# exit (trap), with `mltunectl off` for the other domains, and each timed
# run starts from the captured values.
#
#   bench/switch_vs_tuned/run.sh [REPEATS]      (MLTUNECTL=path to override)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MLTUNECTL=${MLTUNECTL:-$ROOT/build/userspace/mltunectl}
REPEATS=${1:-15}
PROFILE=training
PY=/usr/bin/python3

[ "$(id -u)" = 0 ] || { echo "run.sh: must run as root" >&2; exit 2; }
[ -x "$MLTUNECTL" ] || { echo "run.sh: build mltunectl first ($MLTUNECTL)" >&2; exit 2; }

SCRATCH=$(mktemp -d /tmp/mltune-bench.XXXXXX)
SNAP=$SCRATCH/snapshot
mkdir -p "$SNAP" "$SCRATCH/profiles/mltune-bench" "$SCRATCH/storage"

# Knobs of the profile that exist on this host: "PATH<TAB>VALUE" lines.
"$MLTUNECTL" --json profile show "$PROFILE" |
	jq -r '.knobs[] | [.path, .value] | @tsv' |
	while IFS=$'\t' read -r path value; do
		[ -e "$path" ] && printf '%s\t%s\n' "$path" "$value"
	done >"$SCRATCH/knobs.tsv"

# The same knobs as an mltune profile file, like the tuned profile below: the
# like-for-like comparison (the built-in 'training' also has [nic] tables, a
# step tuned's profile does not do; it is timed as well).
{
	echo 'description = "the knobs of training that exist on this host (benchmark)"'
	for kind in sysctl sysfs; do
		echo "[$kind]"
		"$MLTUNECTL" --json profile show "$PROFILE" | jq -r --arg k "$kind" '.knobs[] | select(.kind == $k) |
			"\(.path)\t\"\(.key)\" = { \(.compare) = \(.value | @json), reason = \"as in training\"\(if .optional == true then ", optional = true" elif .optional == "missing" then ", optional = \"missing\"" else "" end) }"' |
			while IFS=$'\t' read -r path line; do [ -e "$path" ] && echo "$line"; done
	done
} >"$SCRATCH/mltune-bench.toml"
"$MLTUNECTL" profile check "$SCRATCH/mltune-bench.toml" >/dev/null

# Capture: one file per knob, the selected word for sysfs choice files.
snapname() { echo "$SNAP/$(echo "$1" | tr / _)"; }
while IFS=$'\t' read -r path _; do
	sed 's/.*\[\(.*\)\].*/\1/' "$path" >"$(snapname "$path")"
done <"$SCRATCH/knobs.tsv"
had_state=0
[ -e /run/mltune/baseline.json ] && { had_state=1; cp /run/mltune/baseline.json "$SCRATCH/state.json"; }

# The NIC settings tuned's net plugin is given below (rings, channels and
# coalescing of every NIC with a device): captured as ethtool commands that
# put them back, run by restore.sh after `mltunectl off` (which restores what
# mltunectl changed, not what tuned did).
nic_restore() {
	local dev path vals
	for path in /sys/class/net/*/device; do
		dev=$(basename "$(dirname "$path")")
		vals=$(ethtool -g "$dev" 2>/dev/null | awk '/^Current/{c=1} c && /^(RX|TX):/{gsub(":","",$1); printf "%s %s ", tolower($1), $2}')
		[ -n "$vals" ] && echo "ethtool -G $dev $vals >/dev/null 2>&1 || true"
		vals=$(ethtool -l "$dev" 2>/dev/null | awk '/^Current/{c=1} c && /^Combined:/{print "combined " $2}')
		[ -n "$vals" ] && echo "ethtool -L $dev $vals >/dev/null 2>&1 || true"
		vals=$(ethtool -c "$dev" 2>/dev/null | awk '/^Adaptive RX:/{if ($3 != "n/a") printf "adaptive-rx %s ", $3; if ($5 != "n/a") printf "adaptive-tx %s ", $5}
			/^(rx-usecs|tx-usecs|rx-frames|tx-frames):/{if ($2 != "n/a") printf "%s %s ", substr($1, 1, length($1) - 1), $2}')
		[ -n "$vals" ] && echo "ethtool -C $dev $vals >/dev/null 2>&1 || true"
	done
	return 0
}
# tuned's net plugin takes numbers where the profile says "max" and "local":
# the device maxima and the channels the switch plans; the coalescing of the profile's table for the
# driver ([nic."virtio_net"] on a virtio NIC).
tuned_net() {
	local path dev drv ring ch co node ncpu
	for path in /sys/class/net/*/device; do
		dev=$(basename "$(dirname "$path")")
		drv=$(basename "$(readlink -f "$path/driver")")
		ring=$(ethtool -g "$dev" 2>/dev/null | awk '/^Pre-set/{p=1} /^Current/{p=0} p && /^(RX|TX):/{gsub(":","",$1); printf "%s %s ", tolower($1), $2}')
		# "local": one channel per CPU of the NIC's node, capped by the device.
		node=$(cat "$path/numa_node" 2>/dev/null || echo -1)
		if [ -r "/sys/devices/system/node/node$node/cpulist" ]; then
			ncpu=$(awk -F, '{n=0; for (i=1; i<=NF; i++) {split($i, r, "-"); n += (r[2] == "" ? 1 : r[2] - r[1] + 1)} print n}' "/sys/devices/system/node/node$node/cpulist")
		else
			ncpu=$(nproc)
		fi
		ch=$(ethtool -l "$dev" 2>/dev/null | awk -v n="$ncpu" '/^Pre-set/{p=1} /^Current/{p=0} p && /^Combined:/{print "combined " ($2 < n ? $2 : n)}')
		if [ "$drv" = virtio_net ]; then
			co="adaptive-rx off adaptive-tx off rx-usecs 0 tx-usecs 0 rx-frames 1"
		else
			co="adaptive-rx off adaptive-tx off rx-usecs 50 tx-usecs 50 rx-frames 64"
		fi
		printf '[net_%s]\ntype=net\ndevices=%s\nfeatures=gro on, gso on, tso on, rx on, tx on\ncoalesce=%s\n' "$dev" "$dev" "$co"
		[ -n "$ring" ] && printf 'ring=%s\n' "$ring"
		[ -n "$ch" ] && printf 'channels=%s\n' "$ch"
	done
	return 0
}
nic_restore >"$SCRATCH/nic-restore.sh"

cat >"$SCRATCH/restore.sh" <<EOS
#!/bin/bash
# NIC settings, threads and modules the whole-profile runs changed, then the
# knobs as captured (the direct backend's record goes with them).
"$MLTUNECTL" off >/dev/null 2>&1
sh "$SCRATCH/nic-restore.sh"
while IFS=\$'\t' read -r path _; do
	f="$SNAP/\$(echo "\$path" | tr / _)"
	cat "\$f" >"\$path" 2>/dev/null || echo "restore failed: \$path" >&2
done <"$SCRATCH/knobs.tsv"
rm -f /run/mltune/baseline.json
EOS
chmod +x "$SCRATCH/restore.sh"

# The resident switcher (mltunectl serve), as the package's
# mltune-serve.socket starts it: the one listening, or one started here for
# the run (stopped again by cleanup).
SOCK=/run/mltune/mltunectl.sock
SERVE_PID=""
STARTED_SERVE=""
if ! SERVE_PID=$(pgrep -f -o "mltunectl serve"); then
	mkdir -p /run/mltune
	"$MLTUNECTL" serve 2>"$SCRATCH/serve.log" &
	STARTED_SERVE=$!
	SERVE_PID=$STARTED_SERVE
	for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
	[ -S "$SOCK" ] || { echo "run.sh: mltunectl serve did not start: $(cat "$SCRATCH/serve.log")" >&2; exit 1; }
fi

cleanup() {
	"$SCRATCH/restore.sh"
	if [ -n "$STARTED_SERVE" ]; then kill "$STARTED_SERVE" 2>/dev/null; wait "$STARTED_SERVE" 2>/dev/null || true; fi
	if [ "$had_state" = 1 ]; then cp "$SCRATCH/state.json" /run/mltune/baseline.json; fi
	rmdir /run/mltune 2>/dev/null || true
	# Verify that every knob is back.
	local bad=0
	while IFS=$'\t' read -r path _; do
		if [ "$(sed 's/.*\[\(.*\)\].*/\1/' "$path" | tr -s ' \t' '  ')" != "$(tr -s ' \t' '  ' <"$(snapname "$path")")" ]; then
			echo "NOT RESTORED: $path" >&2
			bad=1
		fi
	done <"$SCRATCH/knobs.tsv"
	[ "$bad" = 0 ] && echo "all $(wc -l <"$SCRATCH/knobs.tsv") knobs restored"
	rm -rf "$SCRATCH"
}
trap cleanup EXIT INT TERM

# The equivalent tuned profile: same sysctls and sysfs values.
tuned_knobs() {
	echo "[main]"
	echo "summary=mltune $PROFILE equivalent (benchmark)"
	echo "[sysctl]"
	while IFS=$'\t' read -r path value; do
		case $path in /proc/sys/*) k=${path#/proc/sys/}; echo "${k//\//.}=$value" ;; esac
	done <"$SCRATCH/knobs.tsv"
	echo "[sysfs]"
	while IFS=$'\t' read -r path value; do
		case $path in /sys/*) echo "$path=$value" ;; esac
	done <"$SCRATCH/knobs.tsv"
}
tuned_knobs >"$SCRATCH/profiles/mltune-bench/tuned.conf"
# The closest tuned has to the whole profile: its cpu plugin for [cpu], its
# disk plugin for [block."nvme*"], its net plugin for [nic."*"] (offloads,
# coalescing, rings and channels, with this host's maxima for "max" and
# "local"; queue IRQ placement, RPS and the thread rules have no tuned
# equivalent: its scheduler plugin, the nearest to the thread rules, needs
# python3-perf and cannot express SCHED_DEADLINE).
mkdir -p "$SCRATCH/profiles/mltune-bench-all"
{
	tuned_knobs | sed 's/^summary=.*/summary=mltune whole-profile equivalent (benchmark)/'
	printf '[cpu]\ngovernor=performance\nenergy_perf_bias=performance\nenergy_performance_preference=performance\n'
	printf '[disk]\ndevices=nvme*\nelevator=none\n'
	tuned_net
	# modules = ["tcp_bbr"]: "+r" makes tuned load it now (modprobe -r, then
	# modprobe), as the switch does (one modprobe).
	printf '[modules]\ntcp_bbr=+r\n'
} >"$SCRATCH/profiles/mltune-bench-all/tuned.conf"
printf 'daemon = 0\ndynamic_tuning = 0\nreapply_sysctl = 0\n' >"$SCRATCH/tuned-main.conf"

# The Python loop: plain open/write per sysctl, as in the seed material.
{
	echo "knobs = ["
	while IFS=$'\t' read -r path value; do echo "    ('$path', '$value'),"; done <"$SCRATCH/knobs.tsv"
	echo "]"
	echo "for path, value in knobs:"
	echo "    with open(path, 'w') as f:"
	echo "        f.write(value)"
} >"$SCRATCH/loop.py"

T() { "$PY" "$HERE/timeit.py" "$REPEATS" "$SCRATCH/restore.sh" -- "$@"; }
# A served command: the service's CPU time counts too.
TS() { "$PY" "$HERE/timeit.py" "$REPEATS" "$SCRATCH/restore.sh" "$SERVE_PID" -- "$@"; }
# Without a reset between runs (verify changes nothing).
TV() { "$PY" "$HERE/timeit.py" "$REPEATS" "" -- "$@"; }
echo "host: $(uname -r), $(nproc) CPUs; $(wc -l <"$SCRATCH/knobs.tsv") knobs of '$PROFILE'; median of $REPEATS runs"
echo "switch training: through mltunectl serve (pid $SERVE_PID$([ -n "$STARTED_SERVE" ] && echo ", started for this run")); its CPU time is in the cpu column"

mlt=$(T "$MLTUNECTL" switch --backend direct "$SCRATCH/mltune-bench.toml")
"$SCRATCH/restore.sh"
mltb=$(TS "$MLTUNECTL" switch --backend direct "$PROFILE")
"$SCRATCH/restore.sh"
mltp=$(MLTUNE_NO_SERVICE=1 T "$MLTUNECTL" switch --backend direct "$PROFILE")
"$SCRATCH/restore.sh"
"$MLTUNECTL" switch --backend direct "$PROFILE" >/dev/null
"$MLTUNECTL" verify "$PROFILE" >/dev/null || echo "warning: node does not verify after mltunectl switch" >&2
tnd=$(T "$PY" "$HERE/tuned_oneshot.py" "$SCRATCH" mltune-bench)
"$SCRATCH/restore.sh"
tnda=$(T "$PY" "$HERE/tuned_oneshot.py" "$SCRATCH" mltune-bench-all)
"$SCRATCH/restore.sh"
"$MLTUNECTL" switch --backend direct "$PROFILE" >/dev/null
ver=$(TV "$MLTUNECTL" verify "$PROFILE")
"$SCRATCH/restore.sh"
"$PY" "$HERE/tuned_oneshot.py" "$SCRATCH" mltune-bench >/dev/null 2>&1
"$MLTUNECTL" verify "$PROFILE" >/dev/null || echo "note: tuned left the node different from '$PROFILE' (optional knobs?)" >&2
pyl=$(T "$PY" "$SCRATCH/loop.py")
aud=$(TIMEIT_OK="0 1" T "$MLTUNECTL" audit --profile "$PROFILE")
"$SCRATCH/restore.sh"

tv="not runnable"
if timeout 20 tuned-adm verify >"$SCRATCH/tv.out" 2>&1; then
	tv="$(T tuned-adm verify) (wall cpu, ms)"
else
	tv="not runnable: $(head -c 120 "$SCRATCH/tv.out" | tr '\n' ' ')"
fi

ratio() { "$PY" -c "print(f'{$1/$2:.1f}x')"; }
row() { # label "WALL CPU" [baseline "WALL CPU"]
	local w c bw bc
	read -r w c <<<"$2"
	if [ $# -gt 2 ]; then
		read -r bw bc <<<"$3"
		printf '%-30s %10s ms %10s ms   %8s %8s\n' "$1" "$w" "$c" "$(ratio "$w" "$bw")" "$(ratio "$c" "$bc")"
	else
		printf '%-30s %10s ms %10s ms\n' "$1" "$w" "$c"
	fi
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-30s %13s %13s   %8s %8s\n' "" "wall" "cpu" "wall x" "cpu x"
row "mltunectl switch (direct)" "$mlt"
row "tuned one-shot (no daemon)" "$tnd" "$mlt"
row "python loop (sysctl writes)" "$pyl" "$mlt"
row "mltunectl switch training" "$mltb"
row "tuned over switch training" "$tnd" "$mltb"
row "tuned +cpu,disk,net,modules" "$tnda" "$mltb"
row "  same, no service (one process)" "$mltp"
row "tuned +cpu,disk,net,modules" "$tnda" "$mltp"
row "mltunectl verify (< 5 ms)" "$ver"
row "mltunectl audit (< 20 ms)" "$aud"
printf '%-30s %s\n' "tuned-adm verify" "$tv"
