#!/bin/sh
# NIC tuning in the guest: eth0 = e1000e (root bus, no NUMA node), eth1 =
# virtio-net with 4 combined channels on NUMA node 1 (CPUs 4-7).
# Cross-checks mltunectl against Debian's ethtool program.
. "$(dirname "$0")/lib.sh"
t_plan 17
M=/usr/sbin/mltunectl
if ! command -v ethtool >/dev/null || [ ! -d /sys/class/net/eth1 ]; then
	echo "# SKIP: needs ethtool (--bin /usr/sbin/ethtool) and both NICs"; exit 4
fi
ip link set eth0 up 2>/dev/null; ip link set eth1 up 2>/dev/null

# ethtool's "current" value of FIELD in `ethtool OPT IF`.
cur() { ethtool "$1" "$2" | awk -v f="$3:" '/^Current hardware settings/ {c=1} c && $1 == f {print $2; exit}'; }
coal() { ethtool -c "$1" | awk -v f="$2:" '$1 == f {print $2; exit}'; }
feat() { ethtool -k "$1" | awk -v f="$2:" '$1 == f {print $2; exit}'; }
state() { # a fingerprint of both NICs as ethtool sees them
	for i in eth0 eth1; do
		echo "$i $(cur -g $i RX) $(cur -g $i TX) $(coal $i rx-usecs) $(feat $i generic-receive-offload)"
	done
	cur -l eth1 Combined
	for i in $(ls /sys/class/net/eth1/queues | grep rx-); do cat /sys/class/net/eth1/queues/$i/rps_cpus; done
}
# msi_irqs IF: every MSI IRQ of IF's PCI device (virtio-net's is the
# device's parent), as the kernel numbers them now
msi_irqs() {
	d=$(readlink -f /sys/class/net/$1/device); [ -d "$d/msi_irqs" ] || d=$(dirname "$d")
	ls "$d/msi_irqs"
}
# every MSI IRQ of IF's PCI device is pinned to one CPU in LO-HI (the
# boot default spans every CPU, so an untouched IRQ fails this)
irqs_pinned() {
	n=0
	for irq in $(msi_irqs "$1"); do
		c=$(cat /proc/irq/$irq/smp_affinity_list)
		case $c in *[!0-9]*|'') echo "# $1: irq $irq on $c, not one CPU"; return 1 ;; esac
		[ "$c" -ge "$2" ] && [ "$c" -le "$3" ] || { echo "# $1: irq $irq on CPU $c, not in $2-$3"; return 1; }
		n=$((n + 1))
	done
	[ $n -gt 0 ] || { echo "# $1: no MSI IRQs"; return 1; }
}

# every MSI IRQ of both NICs with its CPUs
irq_state() {
	for i in eth0 eth1; do
		for irq in $(msi_irqs $i); do echo "$i irq $irq $(cat /proc/irq/$irq/smp_affinity_list)"; done
	done
}

orig=$(state)
ethtool -L eth1 combined 2 2>/dev/null
# What mltune finds: what switch baseline must give back.
base="$(state; irq_state)"
t_check "nic show lists both NICs" sh -c "$M nic show --json | grep -q '\"virtio_net\"' && $M nic show | grep -q e1000e"

t_check "apply training" $M nic apply -p training
t_check "training: e1000e rings at max 4096" sh -c "[ \"$(cur -g eth0 RX)\" = 4096 ] && [ \"$(cur -g eth0 TX)\" = 4096 ]"
t_check "training: e1000e rx-usecs 50" sh -c "[ \"$(coal eth0 rx-usecs)\" = 50 ]"
t_check "training: virtio-net 4 channels (node 1 CPUs)" sh -c "[ \"$(cur -l eth1 Combined)\" = 4 ]"
t_check "training: offloads on" sh -c "[ \"$(feat eth0 generic-receive-offload)\" = on ] && [ \"$(feat eth1 tcp-segmentation-offload)\" = on ]"
t_check "training: no diff left" $M nic diff -p training
# eth1 (node 1): each vector on one of node 1's CPUs; eth0 (no node): each
# on one housekeeping CPU.
if irqs_pinned eth1 4 7 && irqs_pinned eth0 0 7; then t_ok "irq placement"; else t_fail "irq placement"; fi

t_check "apply inference" $M nic apply -p inference
t_check "inference: rx-usecs 0 and RPS on node 1" sh -c "[ \"$(coal eth0 rx-usecs)\" = 0 ] && grep -q f0 /sys/class/net/eth1/queues/rx-0/rps_cpus"

# `switch` carries the profile's [nic] tables: from inference back to training.
if $M switch --backend direct training >/tmp/sw.out 2>&1 && [ "$(coal eth0 rx-usecs)" = 50 ] &&
	$M nic diff -p training >/dev/null && grep -q "rx-usecs" /tmp/sw.out; then
	t_ok "switch training applies the NIC settings too"
else t_fail "switch training NIC step"; sed 's/^/# /' /tmp/sw.out; fi
# switch baseline gives back every NIC setting a switch (or nic apply)
# changed, through either backend, and says so.
for be in direct kernel; do
	[ $be = direct ] || $M switch --backend $be training >/dev/null 2>&1 || echo "# switch --backend $be training failed"
	# The dry run names what the switch would restore and changes nothing.
	switched="$(state; irq_state)"
	if $M --dry-run --json switch --backend $be baseline >/tmp/sbd.json 2>&1 &&
		jq -e '.domains[] | select(.domain == "nic" and .state == "planned" and
			(.detail | test("rx-usecs")))' /tmp/sbd.json >/dev/null &&
		[ "$(state; irq_state)" = "$switched" ]; then
		t_ok "switch baseline --dry-run ($be backend): the NIC settings it would restore, nothing changed"
	else
		t_fail "switch baseline --dry-run ($be backend)"; sed 's/^/# /' /tmp/sbd.json
	fi
	if $M switch --backend $be baseline >/tmp/sb.out 2>&1 && [ "$(state; irq_state)" = "$base" ] &&
		grep -q "^  nic *restored" /tmp/sb.out; then
		t_ok "switch baseline ($be backend): rings, coalescing, offloads, RPS and IRQs as found"
	else
		t_fail "switch baseline ($be backend): rings, coalescing, offloads, RPS and IRQs as found"
		sed 's/^/# /' /tmp/sb.out; echo "$base" >/tmp/b; { state; irq_state; } >/tmp/n; diff /tmp/b /tmp/n | sed 's/^/# /'
	fi
done

# An unsupported setting on eth1: kernel message, exit 1, both NICs unchanged.
before=$(state)
out=$($M nic apply -p training --set eth1:coalesce.rx-usecs-irq=10 2>&1); rc=$?
after=$(state)
if [ $rc = 1 ] && echo "$out" | grep -q "unsupported parameter" && [ "$before" = "$after" ]; then
	t_ok "unsupported setting: kernel message, exit 1, both NICs restored"
else t_fail "unsupported setting (rc=$rc)"; echo "$out" | sed 's/^/# /'; fi

bad=0
for args in "apply eth9" "apply --set rings.rx=-1" "apply --set rings.rx=99999999" "apply eth1 --set rings.rx=4096" \
	"apply --set features.warp-drive=on"; do
	out=$($M nic $args -p inference 2>&1); rc=$?
	[ $rc = 2 ] && [ -n "$out" ] || { bad=1; echo "# '$args': rc=$rc $out"; }
done
[ "$before" = "$(state)" ] || bad=1
[ $bad = 0 ] && t_ok "bad input: exit 2, nothing changed" || t_fail "bad input"

# Everything mltune changed back as it found it (IRQ affinities and RPS
# included), then the test's own channel change of eth1.
$M off >/dev/null || echo "# mltunectl off failed"
ethtool -L eth1 combined 4 2>/dev/null
echo "$orig" | sed 's/^/# original: /'
t_done
