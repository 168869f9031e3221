#!/bin/sh
# Guest test: 'mltunectl topology --json' against what the guest kernel itself
# reports in sysfs (2 sockets x 2 cores x 2 threads, NUMA nodes 0 and 1,
# virtio-net and a VGA GPU stand-in behind a PCIe expander on node 1, e1000e
# with no node), and 'mltunectl plan' on top of it.
. "$(dirname "$0")/lib.sh"

t_plan 9
J=/tmp/topology.json
F=/tmp/topology.flat

# Flattens nlohmann's 2-space pretty print into "path=value" lines, e.g.
# nodes[1].cpus="4-7".  Scalars only; enough for the fields compared here.
flatten() {
	awk '
	function path(  i, p) {
		p = ""
		for (i = 1; i <= d; i++) {
			if (k[i] == "") continue
			if (substr(k[i], 1, 1) == "[") p = p k[i]; else p = (p == "" ? k[i] : p "." k[i])
		}
		return p
	}
	{
		line = $0; sub(/^[ \t]+/, "", line); sub(/,$/, "", line)
		key = ""; val = line
		if (match(line, /^"[^"]*": /)) { key = substr(line, 2, RLENGTH - 4); val = substr(line, RLENGTH + 1) }
		else if (d > 0 && arr[d]) { key = "[" idx[d] "]"; idx[d]++ }
		if (val == "{" || val == "[") { d++; k[d] = key; arr[d] = (val == "["); idx[d] = 0; next }
		if (val == "}" || val == "]") { d--; next }
		d++; k[d] = key; print path() "=" val; d--
	}' "$1"
}
# jget PATH: the value, string quotes removed.
jget() {
	awk -v k="$1=" 'index($0, k) == 1 { v = substr($0, length(k) + 1); sub(/^"/, "", v); sub(/"$/, "", v); print v }' "$F"
}
# joinc: stdin lines joined with commas (no paste(1) needed).
joinc() { tr '\n' ',' | sed 's/,$//'; }
# expect NAME WANT GOT
fails=""
expect() { [ "$2" = "$3" ] || fails="$fails
$1: kernel says '$2', mltunectl says '$3'"; }
report() { # report TESTNAME
	if [ -z "$fails" ]; then t_ok "$1"; else t_fail "$1"; echo "$fails" | sed '/^$/d; s/^/# /'; fi
	fails=""
}

if mltunectl topology --json >"$J" 2>/tmp/topology.err; then
	t_ok "topology --json exits 0"
else
	t_fail "topology --json exits 0"; sed 's/^/# /' /tmp/topology.err
fi
flatten "$J" >"$F"
[ -s /tmp/topology.err ] && sed 's/^/# warning: /' /tmp/topology.err

# CPUs, sockets, SMT.
expect "online CPUs" "$(cat /sys/devices/system/cpu/online)" "$(jget cpu.online)"
expect "sockets" "$(cat /sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id | sort -u | wc -l)" \
	"$(grep -c '^sockets\[[0-9]*\]\.id=' "$F")"
report "CPUs and sockets match sysfs"

i=0
for n in $(ls -d /sys/devices/system/node/node[0-9]* | sed 's/.*node//' | sort -n); do
	expect "node$n id" "$n" "$(jget "nodes[$i].id")"
	expect "node$n cpulist" "$(cat /sys/devices/system/node/node$n/cpulist)" "$(jget "nodes[$i].cpus")"
	expect "node$n distance" "$(cat /sys/devices/system/node/node$n/distance | tr -s ' ' ',')" \
		"$(grep "^nodes\[$i\]\.distances\[" "$F" | sed 's/.*=//' | joinc)"
	i=$((i + 1))
done
expect "NUMA nodes" "$i" "$(grep -c '^nodes\[[0-9]*\]\.id=' "$F")"
expect "two NUMA nodes in this guest" "2" "$i"
report "NUMA nodes, CPUs and distances match sysfs"

# Physical cores: one per distinct thread_siblings_list, each listed as a core.
cores=$(cat /sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list | sort -u)
expect "physical cores" "$(echo "$cores" | wc -l)" "$(jget cpu.physical_cores)"
for c in $cores; do
	grep -q "^cores\[[0-9]*\]\.cpus=\"$c\"$" "$F" || fails="$fails
core with threads $c missing from the JSON"
done
smt=false
for c in $cores; do case $c in *[,-]*) smt=true ;; esac; done
expect "SMT" "$smt" "$(jget cpu.smt)"
report "physical cores and SMT siblings match sysfs"

# GPUs: display (0x0300) and 3D (0x0302) controllers.
g=0
for d in /sys/bus/pci/devices/*; do
	case $(cat "$d/class") in 0x0300*|0x0302*) ;; *) continue ;; esac
	a=$(basename "$d")
	expect "GPU $g address" "$a" "$(jget "gpus[$g].pci")"
	expect "GPU $a numa_node" "$(cat "$d/numa_node")" "$(jget "gpus[$g].numa_node")"
	expect "GPU $a local_cpulist" "$(cat "$d/local_cpulist")" "$(jget "gpus[$g].local_cpus")"
	g=$((g + 1))
done
expect "GPUs" "$g" "$(grep -c '^gpus\[[0-9]*\]\.index=' "$F")"
expect "the stand-in GPU is on node 1" "1" "$(jget 'gpus[0].numa_node')"
report "GPUs match sysfs"

# NICs: name, driver, NUMA node of the PCI function, queues, MSI IRQs.
i=0
for nd in $(ls /sys/class/net); do
	[ -e "/sys/class/net/$nd/device" ] || continue
	dev=$(readlink -f "/sys/class/net/$nd/device")
	pci=$dev
	[ -f "$pci/class" ] || pci=$(dirname "$dev") # virtio: the PCI function is the parent
	expect "NIC $i name" "$nd" "$(jget "nics[$i].name")"
	expect "$nd driver" "$(basename "$(readlink "$dev/driver")")" "$(jget "nics[$i].driver")"
	expect "$nd PCI address" "$(basename "$pci")" "$(jget "nics[$i].pci")"
	expect "$nd numa_node" "$(cat "$pci/numa_node")" "$(jget "nics[$i].numa_node")"
	expect "$nd rx queues" "$(ls "/sys/class/net/$nd/queues" | grep -c '^rx-')" "$(jget "nics[$i].rx_queues")"
	expect "$nd tx queues" "$(ls "/sys/class/net/$nd/queues" | grep -c '^tx-')" "$(jget "nics[$i].tx_queues")"
	msi=$(ls "$pci/msi_irqs" 2>/dev/null | sort -n | joinc)
	expect "$nd IRQs" "$msi" "$(grep "^nics\[$i\]\.irqs\[[0-9]*\]\.irq=" "$F" | sed 's/.*=//' | joinc)"
	first=${msi%%,*}
	if [ -n "$first" ]; then
		expect "$nd IRQ $first name" \
			"$(sed -n "s/^ *$first:.* \([^ ]*\)\$/\1/p" /proc/interrupts)" "$(jget "nics[$i].irqs[0].name")"
	fi
	i=$((i + 1))
done
expect "NICs" "$i" "$(grep -c '^nics\[[0-9]*\]\.name=' "$F")"
report "NICs (driver, node, queues, IRQs) match sysfs and /proc/interrupts"

vi=$(grep '^nics\[[0-9]*\]\.driver="virtio_net"' "$F" | sed 's/^nics\[\([0-9]*\)\].*/\1/')
expect "virtio-net node" "1" "$(jget "nics[$vi].numa_node")"
report "the virtio-net NIC is found on node 1"

# The plan on this topology: feeder cores on the GPU's node, whole physical
# cores, never housekeeping; CPU 0 and every socket keep housekeeping CPUs.
# expand CPULIST: one CPU per line.
expand() {
	echo "$1" | tr ',' '\n' | while IFS=- read -r a b; do
		[ -n "$a" ] && seq "$a" "${b:-$a}"
	done
}
in_list() { expand "$2" | grep -qx "$1"; }
if mltunectl --json plan >/tmp/plan.json 2>/tmp/plan.err; then
	gnode=$(jget 'gpus[0].numa_node')
	flatten /tmp/plan.json >/tmp/plan.flat
	F=/tmp/plan.flat
	feeder=$(jget feeder)
	hk=$(jget housekeeping)
	[ -n "$feeder" ] || fails="$fails
no feeder CPUs planned"
	node_cpus=$(cat "/sys/devices/system/node/node$gnode/cpulist")
	for c in $(expand "$feeder"); do
		in_list "$c" "$node_cpus" || fails="$fails
feeder CPU $c is not on the GPU's node $gnode ($node_cpus)"
		in_list "$c" "$hk" && fails="$fails
feeder CPU $c is also a housekeeping CPU"
		for s in $(expand "$(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"); do
			in_list "$s" "$feeder" || fails="$fails
feeder CPU $c's SMT sibling $s is not a feeder CPU"
		done
	done
	in_list 0 "$hk" || fails="$fails
CPU 0 is not a housekeeping CPU ($hk)"
	for p in $(cat /sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id | sort -u); do
		n=0
		for c in $(expand "$hk"); do
			[ "$(cat /sys/devices/system/cpu/cpu$c/topology/physical_package_id)" = "$p" ] && n=1
		done
		[ "$n" = 1 ] || fails="$fails
socket $p has no housekeeping CPU ($hk)"
	done
	t_diag "plan: housekeeping $hk, feeder $feeder (GPU on node $gnode)"
	report "plan: feeder cores on the GPU's node, whole cores, housekeeping per socket"
else
	t_fail "plan: feeder cores on the GPU's node, whole cores, housekeeping per socket"; sed 's/^/# /' /tmp/plan.err
fi

if mltunectl plan >/tmp/plan.txt 2>&1 && grep -q '^why:' /tmp/plan.txt; then
	t_ok "plan explains its choices"
else
	t_fail "plan explains its choices"; sed 's/^/# /' /tmp/plan.txt | tail -n 20
fi
t_done
