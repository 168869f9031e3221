# shellcheck shell=sh
# ctr, sourced by the guest parts of the fleet test (container.sh,
# k8s-node.sh): a command in a container as a runtime builds one.
#
# ctr [UNSHARE-OPTIONS] -- CMD...: CMD in a container: a mount namespace
# whose root is a tmpfs with the guest's /usr and /etc bound read-only (the
# image), a proc of the container's PID namespace, a read-only sysfs (as a
# container runtime mounts them), and the node at /host. C names the
# directory where the container's root is mounted (in its own namespace:
# containers at the same time may share it).
ctr() {
	[ -n "${C:-}" ] || { echo "ctr: C (the container root's mount point) is not set" >&2; return 2; }
	opts=""
	while [ "$1" != -- ]; do opts="$opts $1"; shift; done
	shift
	# shellcheck disable=SC2086,SC2016 # options split on purpose; the inner shell expands
	unshare -m --propagation private $opts sh -ec '
		C=$1; shift
		mkdir -p $C && mount -t tmpfs ctr $C
		for d in usr etc; do
			mkdir -p $C/$d && mount --rbind /$d $C/$d && mount -o remount,bind,ro $C/$d
		done
		for l in bin sbin lib lib64; do ln -s usr/$l $C/$l; done
		mkdir -p $C/host $C/proc $C/sys $C/dev $C/tmp $C/run
		mount --rbind / $C/host
		mount -t proc proc $C/proc
		mount -t sysfs -o ro sysfs $C/sys
		mount --rbind /dev $C/dev
		exec chroot $C "$@"' sh "$C" "$@"
}
