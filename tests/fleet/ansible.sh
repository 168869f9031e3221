#!/bin/bash
# tests/fleet/ansible.sh: the Ansible role deploy/ansible/roles/mltune.
#
# Runs on the host, as root, from the repository root. Prints TAP lines
# ("ok N - ..." / "not ok N - ...", diagnostics as "# ...") and exits 0
# only when every check passed.
#
# Always: ansible-lint (default rules, no skips, offline: in a network
# namespace of its own when it can make one) and a syntax check of the
# example playbook.
#
# With VM_SSH_PORT set (tests/vm/debian --host-run runs this script inside
# the guest's network namespace, where 127.0.0.1:$VM_SSH_PORT is the Debian
# guest's sshd): runs deploy/ansible/site.yml against the guest "mltune-node"
# (mltunectl from build/deb, no mltune-dkms, profile training) and checks
#   1. the first run changes the node, which then verifies;
#   2. a second run changes nothing (changed=0 in the PLAY RECAP);
#   3. after drift planted over ssh (vm.swappiness=60) a third run reports
#      the drift, switches again (changed > 0) and the node verifies;
#   4. --check on a drifted node reports the drift and changes nothing;
#   5. with mltune_fail_on_drift=true a drifted node fails the play (failed=1)
#      and is left as it was;
#   6. after 'mltunectl off' (no profile active) a run switches the node
#      without reporting drift, even with mltune_fail_on_drift=true.
# The guest recipe is in Documentation/fleet.rst ("Ansible").
#
# The guest side: the user-network NIC (MAC 52:54:00:12:34:01) up as
# 10.0.2.15/24, root's authorized key, 'systemctl start ssh', then
# vm_host_run. python3-apt, which the image lacks, is installed over ssh
# from build/fleet/debs (MLTUNE_FLEET_PYAPT_DIR).
#
# Environment: VM_SSH_PORT; MLTUNE_FLEET_KEY (ssh private key, default
# build/fleet/id_ed25519); MLTUNE_FLEET_DEB (the mltunectl package, default
# the newest build/deb/mltunectl_*_amd64.deb); MLTUNE_FLEET_SSH_WAIT (seconds to wait for the
# guest's sshd, default 900). Output of every ansible command:
# build/fleet/ansible-<time>.log (build/fleet/ansible-last.log).
# Host packages: ansible ansible-lint openssh-client jq.

set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
diag() { sed 's/^/# /'; }

mkdir -p build/fleet
LOG=$ROOT/build/fleet/ansible-$(date +%Y%m%d-%H%M%S)-$$.log
: >"$LOG"
ln -sfn "$(basename "$LOG")" build/fleet/ansible-last.log
tmp=$(mktemp -d /tmp/mltune-ansible.XXXXXX)

# logged TITLE CMD...: run CMD, its output (stdout and stderr) appended to
# the log under TITLE and kept in $tmp/last.out; returns CMD's status.
logged() {
	local title=$1 rc
	shift
	printf '\n===== %s: %s\n' "$title" "$*" >>"$LOG"
	"$@" >"$tmp/last.out" 2>&1
	rc=$?
	cat "$tmp/last.out" >>"$LOG"
	printf '===== %s: exit %d\n' "$title" "$rc" >>"$LOG"
	return "$rc"
}
tail_last() { tail -n "${1:-40}" "$tmp/last.out" | diag; }

missing=()
for t in ansible-lint ansible-playbook ssh jq; do
	command -v "$t" >/dev/null || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "# missing on the host: ${missing[*]}"
	echo "# apt-get install -y --no-install-recommends ansible ansible-lint openssh-client jq"
	not_ok "host tools present (ansible, ansible-lint, openssh-client, jq)"
	exit 1
fi

export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0
export ANSIBLE_LOCAL_TEMP=$tmp/local ANSIBLE_SSH_CONTROL_PATH_DIR=$tmp/cp

# ---- lint -------------------------------------------------------------------
# --offline: no version check and no collection install. Run in an empty
# network namespace (as root) so that a lint that wants the network fails
# here rather than on a build machine without one.
lint=(ansible-lint --offline --nocolor deploy/ansible)
netns=()
if [ -z "${VM_SSH_PORT:-}" ] && [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
	netns=(unshare --net)
fi
if logged "ansible-lint${netns:+ (no network)}" "${netns[@]}" "${lint[@]}"; then
	ok "ansible-lint deploy/ansible passes (default rules, offline${netns:+, no network})"
	tail -n 1 "$tmp/last.out" | diag
else
	not_ok "ansible-lint deploy/ansible passes (default rules, offline${netns:+, no network})"
	tail_last 40
fi
# No rule is skipped behind the test's back.
if [ -e deploy/ansible/.ansible-lint ] || [ -e .ansible-lint ] || [ -e .config/ansible-lint.yml ] ||
	grep -rqE 'noqa|skip_ansible_lint' deploy/ansible; then
	not_ok "no ansible-lint skips (configuration file, noqa, skip_ansible_lint)"
	grep -rnE 'noqa|skip_ansible_lint' deploy/ansible | diag
else
	ok "no ansible-lint skips (configuration file, noqa, skip_ansible_lint)"
fi
if logged "syntax check" ansible-playbook --syntax-check -i deploy/ansible/inventory.example deploy/ansible/site.yml; then
	ok "ansible-playbook --syntax-check deploy/ansible/site.yml"
else
	not_ok "ansible-playbook --syntax-check deploy/ansible/site.yml"
	tail_last 20
fi

# ---- the guest --------------------------------------------------------------
finish() {
	# ssh control masters ansible left behind (ControlPersist)
	local s
	for s in "$tmp"/cp/*; do
		[ -S "$s" ] && ssh -o ControlPath="$s" -O exit mltune-node >/dev/null 2>&1
	done
	rm -rf "$tmp"
	echo "# log: $LOG"
	[ "$failed" = 0 ]
	exit
}

if [ -z "${VM_SSH_PORT:-}" ]; then
	echo "# no guest: VM_SSH_PORT is not set (run through tests/vm/debian --host-run); lint checks only"
	finish
fi

key=${MLTUNE_FLEET_KEY:-build/fleet/id_ed25519}
case $key in /*) ;; *) key=$ROOT/$key ;; esac
# A copy of the package: build/deb may be rebuilt while the test runs.
debs=("$ROOT"/build/deb/mltunectl_*_amd64.deb)
src=${MLTUNE_FLEET_DEB:-${debs[-1]}}
mkdir -p "$tmp/debs"
if [ ! -r "$key" ] || ! cp "$src" "$tmp/debs/" 2>/dev/null; then
	not_ok "ssh key ($key) and the package ($src) present"
	finish
fi
deb=$tmp/debs/$(basename "$src")
echo "# package: $src"
chmod 600 "$key"

ssh_opts=(-o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
	-o LogLevel=ERROR -o ConnectTimeout=30 -i "$key" -p "$VM_SSH_PORT")
# shellcheck disable=SC2029 # the commands are meant to be expanded here
node() { ssh "${ssh_opts[@]}" root@127.0.0.1 "$@"; }

cat >"$tmp/inventory" <<EOF
[gpu_nodes]
mltune-node ansible_host=127.0.0.1 ansible_port=$VM_SSH_PORT ansible_user=root ansible_ssh_private_key_file=$key ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'
EOF
# What the test changes from the role's defaults: the package from the
# tree's build (the guest has no network), no kernel module.
jq -n --arg deb "$deb" '{mltune_deb_files: [$deb], mltune_dkms: false, mltune_profile: "training"}' >"$tmp/vars.json"
export ANSIBLE_TIMEOUT=60 ANSIBLE_PIPELINING=1
# each task's time in the log (ansible.posix, shipped with Debian's ansible)
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks

# The guest runs under TCG: its sshd may take minutes to answer.
wait_s=${MLTUNE_FLEET_SSH_WAIT:-900}
deadline=$((SECONDS + wait_s))
t0=$SECONDS
until node true 2>"$tmp/ssh.err"; do
	if [ "$SECONDS" -ge "$deadline" ]; then
		not_ok "the guest's sshd answers on 127.0.0.1:$VM_SSH_PORT within ${wait_s}s"
		diag <"$tmp/ssh.err"
		echo "# the guest must bring up its user-network NIC (MAC 52:54:00:12:34:01, eth0 or eth1)"
		echo "# as 10.0.2.15/24 (the port forward's target), install the key and start sshd"
		finish
	fi
	sleep 2
done
ok "the guest's sshd answers on 127.0.0.1:$VM_SSH_PORT (after $((SECONDS - t0)) s)"

# Ansible's apt module needs python3-apt on the node (the guest image has
# it, as any node Ansible manages with apt does).
if ! node "python3 -c 'import apt_pkg'" 2>/dev/null; then
	not_ok "the node has python3-apt (Ansible's apt module needs it)"
	finish
fi
# play LABEL [ANSIBLE-PLAYBOOK OPTIONS]: site.yml against the guest, logged;
# sets rc, recap (the guest's PLAY RECAP line), changed and failures.
play() {
	local label=$1 t0=$SECONDS
	shift
	logged "$label" ansible-playbook -i "$tmp/inventory" -e "@$tmp/vars.json" "$@" deploy/ansible/site.yml
	rc=$?
	recap=$(grep -E '^mltune-node +:' "$tmp/last.out" | tail -1 | tr -s ' ')
	changed=$(echo "$recap" | sed -n 's/.* changed=\([0-9]*\).*/\1/p')
	failures=$(echo "$recap" | sed -n 's/.* failed=\([0-9]*\).*/\1/p')
	echo "# $label ($((SECONDS - t0)) s, exit $rc): ${recap:-no recap}"
}
# The node is on training and verifies.
node_in_line() {
	node 'mltunectl active | grep -q "^profile: training " && mltunectl verify training' >/dev/null 2>&1
}

# 1. first run: the package installed, the configuration written, training
play "run 1"
if [ "$rc" = 0 ] && [ "${failures:-x}" = 0 ] && [ "${changed:-0}" -gt 0 ]; then
	ok "first run succeeds and changes the node (changed=$changed failed=0)"
else
	not_ok "first run succeeds and changes the node (exit $rc, ${recap:-no recap})"
	tail_last 40
fi
if node_in_line; then
	ok "the node: 'mltunectl active' says training, 'mltunectl verify training' exits 0"
else
	not_ok "the node: 'mltunectl active' says training, 'mltunectl verify training' exits 0"
fi
node cat /etc/mltune/mltune.toml >"$tmp/toml" 2>&1
if grep -qx 'profile = "training"' "$tmp/toml" && grep -qx 'watcher = true' "$tmp/toml" &&
	! grep -qE '^\[(pool|feeder)\]' "$tmp/toml" && node mltunectl config check >/dev/null 2>&1; then
	ok "the node: /etc/mltune/mltune.toml has profile = \"training\", watcher = true, no [pool]/[feeder], and checks"
else
	not_ok "the node: /etc/mltune/mltune.toml has profile = \"training\", watcher = true, no [pool]/[feeder], and checks"
	diag <"$tmp/toml"
fi
st=$(node systemctl is-active mltune.service mltune-watch.service 2>&1 | tr '\n' ' ')
if [ "$st" = "active active " ]; then
	ok "the node: mltune.service and mltune-watch.service active (the configuration was applied)"
else
	not_ok "the node: mltune.service and mltune-watch.service active (the configuration was applied): $st"
	node journalctl -b -u mltune.service -u mltune-watch.service --no-pager 2>&1 | tail -20 | diag
fi

# 2. second run: nothing to do
play "run 2"
if [ "$rc" = 0 ] && [ "${failures:-x}" = 0 ] && [ "${changed:-x}" = 0 ]; then
	ok "second run changes nothing (changed=0 failed=0)"
else
	not_ok "second run changes nothing (exit $rc, ${recap:-no recap})"
	grep -E '^(changed|fatal|failed):|^TASK' "$tmp/last.out" | grep -B1 -E '^(changed|fatal|failed):' | diag
fi

# 3. drift: the training profile sets vm.swappiness = 1
node sysctl -qw vm.swappiness=60 >/dev/null 2>&1
if node mltunectl verify training >/dev/null 2>&1; then
	not_ok "drift planted: vm.swappiness=60 makes 'mltunectl verify training' fail"
else
	ok "drift planted: vm.swappiness=60 makes 'mltunectl verify training' fail"
fi
play "run 3 (drifted node)"
if [ "$rc" = 0 ] && [ "${failures:-x}" = 0 ] && [ "${changed:-0}" -gt 0 ] &&
	grep -q "drift from 'training'" "$tmp/last.out" && grep -q 'vm.swappiness: expected 1, found 60' "$tmp/last.out"; then
	ok "third run reports the drift (vm.swappiness) and switches again (changed=$changed failed=0)"
else
	not_ok "third run reports the drift (vm.swappiness) and switches again (exit $rc, ${recap:-no recap})"
	tail_last 40
fi
if node_in_line && [ "$(node sysctl -n vm.swappiness)" = 1 ]; then
	ok "the node verifies again after the third run (vm.swappiness = 1)"
else
	not_ok "the node verifies again after the third run (vm.swappiness = 1)"
fi

# 4. drift in check mode: reported, the switch skipped, the node left alone
node sysctl -qw vm.swappiness=60 >/dev/null 2>&1
play "run 4 (drifted node, --check)" --check
if [ "$rc" = 0 ] && [ "${failures:-x}" = 0 ] && grep -q 'vm.swappiness: expected 1, found 60' "$tmp/last.out" &&
	[ "$(node sysctl -n vm.swappiness)" = 60 ]; then
	ok "--check reports the drift and leaves the node as it was (vm.swappiness = 60)"
else
	not_ok "--check reports the drift and leaves the node as it was (exit $rc, ${recap:-no recap})"
	tail_last 40
fi

# 5. drift with mltune_fail_on_drift: the play fails, the node is left alone
play "run 5 (drifted node, mltune_fail_on_drift=true)" -e mltune_fail_on_drift=true
if [ "$rc" != 0 ] && [ "${failures:-x}" = 1 ] && grep -q 'mltune_fail_on_drift is set' "$tmp/last.out"; then
	ok "with mltune_fail_on_drift=true a drifted node fails the play (exit $rc, failed=1)"
else
	not_ok "with mltune_fail_on_drift=true a drifted node fails the play (exit $rc, ${recap:-no recap})"
	tail_last 40
fi
if [ "$(node sysctl -n vm.swappiness)" = 60 ]; then
	ok "the failed play left the drifted node as it was (vm.swappiness = 60)"
else
	not_ok "the failed play left the drifted node as it was (vm.swappiness = 60)"
fi

# 6. no active profile ('mltunectl off'): switched, not reported as drift
node mltunectl off >"$tmp/off.out" 2>&1 || diag <"$tmp/off.out"
play "run 6 (after 'mltunectl off', mltune_fail_on_drift=true)" -e mltune_fail_on_drift=true
if [ "$rc" = 0 ] && [ "${failures:-x}" = 0 ] && [ "${changed:-0}" -gt 0 ] && ! grep -q "drift from" "$tmp/last.out"; then
	ok "after 'mltunectl off' a run switches the node without reporting drift (changed=$changed failed=0)"
else
	not_ok "after 'mltunectl off' a run switches the node without reporting drift (exit $rc, ${recap:-no recap})"
	tail_last 40
fi
if node_in_line; then
	ok "the node verifies again after the sixth run"
else
	not_ok "the node verifies again after the sixth run"
fi

finish
