#!/bin/sh
# Guest side of bench/nic/run.sh: applying rings + coalesce + channels +
# features to both NICs through one `mltunectl nic apply` versus the
# equivalent `ethtool` program invocations (5 per round), in two series:
#
#   steady:    every round applies the same settings (the NICs already hold
#              them after the first): what each tool costs per apply, the
#              kernel does no device work for an unchanged setting;
#   changing:  rounds alternate between two settings, so every round resets
#              rings and channels: device work (the same for both tools)
#              dominates.
#
#   bench.sh [N [R]]   N rounds per batch (default 20), R batches per tool (default 5)
#
# The batches of the two tools are interleaved; the result is the median over
# the R batches of the per-round time, and the ratio ethtool / mltunectl.
N=${1:-20}
R=${2:-5}
ip link set eth0 up; ip link set eth1 up

# Microseconds; busybox date without %N support falls back to /proc/uptime (10 ms).
now_us() {
	t=$(date +%s%N 2>/dev/null)
	case $t in
	*N* | "") awk '{printf "%.0f\n", $1 * 1000000}' /proc/uptime ;;
	*) echo $((t / 1000)) ;;
	esac
}
batch() { # batch steady|changing CMD: N rounds, prints the mean per round in microseconds
	mode=$1; shift
	t0=$(now_us); i=0
	while [ $i -lt "$N" ]; do
		if [ "$mode" = steady ]; then v=1; else v=$((i % 2)); fi
		"$@" $v || echo "# round $i of $1 failed" >&2
		i=$((i + 1))
	done
	echo $((($(now_us) - t0) / N))
}
vals() { if [ "$1" = 0 ]; then r=2048 u=20 c=2 g=off; else r=4096 u=50 c=4 g=on; fi; }
mlt() {
	vals "$1"
	/usr/sbin/mltunectl nic apply -p none --set eth0:rings.rx=$r --set eth0:rings.tx=$r \
		--set eth0:coalesce.rx-usecs=$u --set eth0:features.gro=$g \
		--set eth1:channels.combined=$c --set eth1:features.gro=$g >/dev/null
}
eth() {
	vals "$1"
	ethtool -G eth0 rx $r tx $r && ethtool -C eth0 rx-usecs $u && ethtool -K eth0 gro $g &&
		ethtool -L eth1 combined $c && ethtool -K eth1 gro $g
}
# Both tools must leave the same state (the last round, N-1, picks the set).
state() {
	echo "$(ethtool -g eth0 | awk '/^Current/ {c=1} c && $1 == "RX:" {print $2; exit}')" \
		"$(ethtool -c eth0 | awk '$1 == "rx-usecs:" {print $2; exit}')" \
		"$(ethtool -l eth1 | awk '/^Current/ {c=1} c && $1 == "Combined:" {print $2; exit}')" \
		"$(ethtool -k eth1 | awk '$1 == "generic-receive-offload:" {print $2; exit}')"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
series() { # series steady|changing
	: >/tmp/mlt.us; : >/tmp/eth.us
	eth 1 # the steady settings (also the state the changing rounds end in)
	k=1
	while [ $k -le "$R" ]; do
		m=$(batch "$1" mlt); sm=$(state)
		e=$(batch "$1" eth); se=$(state)
		echo "# $1 batch $k: mltunectl ${m} us/round, ethtool ${e} us/round (state after: mltunectl '$sm', ethtool '$se')"
		[ "$sm" = "$se" ] || echo "# WARNING: the two tools left different states"
		echo "$m" >>/tmp/mlt.us; echo "$e" >>/tmp/eth.us
		k=$((k + 1))
	done
	mm=$(median </tmp/mlt.us); me=$(median </tmp/eth.us)
	echo "$1: mltunectl_median_ms=$(awk -v v="$mm" 'BEGIN {printf "%.2f", v / 1000}')" \
		"ethtool_median_ms=$(awk -v v="$me" 'BEGIN {printf "%.2f", v / 1000}')" \
		"ratio_ethtool_over_mltunectl=$(awk -v a="$me" -v b="$mm" 'BEGIN {printf "%.2f", a / b}')"
}
echo "rounds_per_batch=$N batches=$R"
series steady
series changing
