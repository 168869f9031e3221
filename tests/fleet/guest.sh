#!/bin/sh
# The guest side of make fleet-test (tests/fleet/run), one boot of the
# Debian guest: container mode first (it compares the node with its state
# before any part ran), then the DaemonSet's entrypoint on the real NICs,
# then Slurm, then the host's Ansible run over ssh.
# Exit 0 only when every part passed.
. /root/fleet/lib.sh
rc=0
# part NAME: runs /root/fleet/NAME.sh; its time as a "# time:" line
part() {
	_s=$(date +%s)
	sh "/root/fleet/$1.sh" || rc=1
	echo "# time: $1: $(( $(date +%s) - _s )) s"
}
mltunectl off >/dev/null 2>&1
part container
part k8s-node
part slurm
# The host's Ansible run reaches this guest over ssh (tests/vm/debian
# forwards 127.0.0.1:$VM_SSH_PORT in the VM's network namespace to port 22
# of 10.0.2.15, the user-network NIC; the image configures no network, and
# the NIC's name depends on probe order: found by its MAC).
nic=$(grep -l '^52:54:00:12:34:01$' /sys/class/net/*/address | cut -d/ -f5)
if ip link set "$nic" up && ip addr add 10.0.2.15/24 dev "$nic" && ip route add default via 10.0.2.2; then
	i=0
	while [ "$(cat "/sys/class/net/$nic/carrier" 2>/dev/null)" != 1 ] && [ $i -lt 120 ]; do
		sleep 0.5
		i=$((i + 1))
	done
	# qemu's user network learns the guest's MAC from its first packet.
	python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("10.0.2.2", 9))'
	install -d -m 700 /root/.ssh && install -m 600 /root/fleet/key.pub /root/.ssh/authorized_keys
	if systemctl start ssh; then
		_s=$(date +%s)
		vm_host_run 2400 || { echo "# the host's ansible run failed (exit $?)"; rc=1; }
		echo "# time: ansible: $(( $(date +%s) - _s )) s"
	else
		echo "not ok 1 - sshd does not start"
		rc=1
	fi
else
	echo "not ok 1 - the user-network NIC ($nic) cannot be configured"
	rc=1
fi
exit $rc
