#!/bin/sh
# Guest side of bench/nic/run.sh.  Alternates two settings so every round
# really changes the NICs; prints per-round medians (ms) and the ratio.
N=${1:-20}
ip link set eth0 up; ip link set eth1 up
now() { awk '{print $1 * 1000}' /proc/uptime; } # ms, 10 ms resolution: time whole batches
batch() { # batch CMD: N rounds, prints total ms
	t0=$(date +%s%N); i=0
	while [ $i -lt "$N" ]; do "$@" $((i % 2)); i=$((i + 1)); done
	echo $((($(date +%s%N) - t0) / 1000000))
}
mlt() {
	if [ "$1" = 0 ]; then r=2048 u=20 c=2 g=off; else r=4096 u=50 c=4 g=on; fi
	/usr/sbin/mltunectl nic apply -p none --set eth0:rings.rx=$r --set eth0:rings.tx=$r \
		--set eth0:coalesce.rx-usecs=$u --set eth0:features.gro=$g \
		--set eth1:channels.combined=$c --set eth1:features.gro=$g >/dev/null
}
eth() {
	if [ "$1" = 0 ]; then r=2048 u=20 c=2 g=off; else r=4096 u=50 c=4 g=on; fi
	ethtool -G eth0 rx $r tx $r; ethtool -C eth0 rx-usecs $u; ethtool -K eth0 gro $g
	ethtool -L eth1 combined $c; ethtool -K eth1 gro $g
}
for k in 1 2 3; do
	echo "mltunectl_ms=$(batch mlt) ethtool_ms=$(batch eth)"
done
