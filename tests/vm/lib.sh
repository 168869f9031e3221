# shellcheck shell=bash
# What every guest of the VM bed shares: the virtual hardware, the kernel
# command line and the kernel-splat detection. Sourced by tests/vm/run (the
# busybox guest) and tests/vm/debian (the Debian systemd guest); see
# tests/vm/README.md.

# vm_hw_args: the machine, one argument per line (read it with mapfile).
# Two sockets x 2 cores x 2 threads, one NUMA node per socket. The e1000e
# sits on the root bus; the multi-queue virtio-net NIC and a stand-in
# display controller (PCI class 0x0300, what topology code sees of a GPU)
# sit behind a PCIe expander bridge on NUMA node 1. Both NICs use qemu's
# user-mode network with restrict=on or a tap in an empty network
# namespace: nothing leaves the VM. The tap (mlt0) is created by
# vm_netns_exec.
vm_hw_args() {
	printf '%s\n' \
		-accel "tcg,thread=${MLTUNE_VM_TCG_THREAD:-single}" -M q35 -cpu max \
		-smp 8,sockets=2,cores=2,threads=2 -m 1536 \
		-object memory-backend-ram,id=m0,size=768M \
		-object memory-backend-ram,id=m1,size=768M \
		-numa node,nodeid=0,cpus=0-3,memdev=m0 \
		-numa node,nodeid=1,cpus=4-7,memdev=m1 \
		-netdev user,id=n0,restrict=on \
		-device e1000e,netdev=n0,mac=52:54:00:12:34:01 \
		-device pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0 \
		-device pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1 \
		-device pcie-root-port,id=rp2,bus=pxb1,chassis=2,slot=2 \
		-netdev tap,id=n1,ifname=mlt0,script=no,downscript=no,queues=4,vhost=off \
		-device virtio-net-pci,netdev=n1,mq=on,vectors=10,bus=rp1,mac=52:54:00:12:34:02 \
		-device VGA,bus=rp2 \
		-vga none -display none -no-reboot -nodefaults
}

# The kernel command line every guest gets (the console and root options
# are each runner's own).
# Emulation headroom for the stall detectors: on a loaded host the single
# TCG thread can be starved while guest time runs on. Real stalls and
# lockups are still reported (RCU after 60 s, soft lockups after 40 s).
# no_timer_check: a starved emulator can fail the IO-APIC timer check at
# boot ("IO-APIC + timer doesn't work!"), as on any virtual machine.
VM_CMDLINE="ignore_loglevel panic=-1 sysctl.kernel.hung_task_timeout_secs=30 tsc=reliable"
VM_CMDLINE="$VM_CMDLINE rcupdate.rcu_cpu_stall_timeout=60 watchdog_thresh=20"
VM_CMDLINE="$VM_CMDLINE net.ifnames=0 mitigations=off no_timer_check"

# Kernel splats anywhere in a guest's kernel log fail the run.
VM_SPLAT_RE='(^|[^a-zA-Z_])(BUG:|WARNING:|Oops|KFENCE:|general protection fault|list_add corruption|list_del corruption|list corruption|blocked for more than [0-9]+ seconds|soft lockup|hard LOCKUP|self-detected stall|detected stalls? on CPU|rcu_.* stall|Kernel panic|kernel BUG at|UBSAN:|refcount_t:)'

# The kernel's last line before it stops the other CPUs (kernel/reboot.c:
# "Restarting system", "Power down", "System halted"; machine_shutdown()
# follows). x86's stop_other_cpus() marks each CPU offline as it takes the
# stop IPI while the others still run: a wake-up aimed at a stopped CPU in
# that window warns ("Unexpected reschedule of offline CPU", ipi.c), a race
# of the arch's shutdown, outside anything a test exercises.
VM_STOP_RE='reboot: (Restarting system|Power down|System halted)'

# vm_splats KERNEL_LOG: the offending lines with their line numbers, if any,
# up to the kernel's stop line.
vm_splats() {
	awk -v re="$VM_SPLAT_RE" -v stop="$VM_STOP_RE" \
		'$0 ~ stop { exit } $0 ~ re { print NR ":" $0 }' "$1"
}

# vm_late_splats KERNEL_LOG: splats after the stop line (reported as notes,
# not failures).
vm_late_splats() {
	awk -v re="$VM_SPLAT_RE" -v stop="$VM_STOP_RE" \
		'$0 ~ stop { late = 1; next } late && $0 ~ re { print NR ":" $0 }' "$1"
}

# Emulator faults: lines no kernel bug prints, only an emulator that raised a
# CPU event the guest never asked for. exc_debug_kernel() warns on a
# single-step #DB taken in kernel mode that neither kprobes nor kgdb claims;
# arch/x86/kernel/traps.c names a hypervisor leaking #DB as the known way to
# get one. Under qemu 7.2's TCG it came once among the project's many
# hundreds of boots (a node test's first boot: PID 34 at 1.9 s, before any
# mltune code ran, then a user-space crash in ld.so): such a run is void. Its runner
# says so on a "vm: void run:" line and runs once more (vm_rerun_void); a
# fault in the repeated run, or any other splat beside the fault, fails.
VM_FAULT_RE='WARNING: CPU: [0-9]+ PID: [0-9]+ at arch/x86/kernel/traps\.c:[0-9]+ exc_debug_kernel'
# A user-space crash report (show_signal_msg()), not a kernel splat; it
# only travels with an emulator fault, and fails the run anywhere else.
VM_USER_CRASH_RE='\] traps: [^ ]+\[[0-9]+\] general protection fault ip:'

# vm_run_begins KVER: the line that opens each attempt of a run in its
# output (vm_drop_void drops a void attempt from there).
vm_run_begins() {
	echo "vm: run begins: $1 (attempt ${MLTUNE_VM_ATTEMPT:-1})" >&2
}

# vm_rerun_void KERNEL_LOG COMMAND [ARGS...]: when the splats of KERNEL_LOG
# are an emulator fault (with at most user-space crashes beside it) in a
# first attempt, say so and exec COMMAND ARGS as the second attempt;
# otherwise return.
vm_rerun_void() {
	local klog=$1 splats faults
	shift
	splats=$(vm_splats "$klog")
	faults=$(grep -E "$VM_FAULT_RE" <<<"$splats" || true)
	[ -n "$faults" ] || return 0
	! grep -qvE "$VM_FAULT_RE|$VM_USER_CRASH_RE" <<<"$splats" || return 0
	if [ "${MLTUNE_VM_ATTEMPT:-1}" != 1 ]; then
		echo "vm: the emulator faulted in the repeated run as well: the run fails" >&2
		return 0
	fi
	echo "vm: void run: the emulator faulted (${faults%%$'\n'*}, see $klog): the output of this attempt is void; running it once more" >&2
	MLTUNE_VM_ATTEMPT=2 exec "$@"
}

# vm_drop_void LOG: move each void attempt (from its "vm: run begins:" line
# up to its "vm: void run:" line) out of LOG into LOG.void, so that only
# the counted attempt's results remain; the "vm: void run:" line stays.
vm_drop_void() {
	local log=$1
	grep -q '^vm: void run: ' "$log" 2>/dev/null || return 0
	awk -v void="$log.void" '
		/^vm: run begins: / { b = n + 1 }
		/^vm: void run: / {
			for (i = (b ? b : 1); i <= n; i++) print line[i] > void
			n = (b ? b : 1) - 1; b = 0
		}
		{ line[++n] = $0 }
		END { for (i = 1; i <= n; i++) print line[i] }' "$log" >"$log.tmp" &&
		mv "$log.tmp" "$log"
}

# vm_netns_exec QEMU ARGS...: inside a private network namespace (run it
# under 'unshare --net'), create the multi-queue tap the virtio-net NIC
# uses, then become qemu. Reached through 'tests/vm/run --netns-exec'.
vm_netns_exec() {
	ip tuntap add dev mlt0 mode tap multi_queue
	ip link set mlt0 up
	ip link set lo up
	# tests/vm/debian --host-run enters this namespace through the emulator's pid.
	[ -n "${VM_NETNS_PIDFILE:-}" ] && echo $$ >"$VM_NETNS_PIDFILE"
	exec "$@"
}
