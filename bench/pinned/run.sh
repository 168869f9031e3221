#!/bin/bash
# Pinned host memory on a real GPU machine, in one command:
#
#   bench/pinned/run.sh [--gpu N] [--size MIB] [--repeats R] [--copies C]
#
# 1. builds userspace/examples/pinned_h2d.cpp with nvcc (or the host C++
#    compiler against $CUDA_HOME, default /usr/local/cuda);
# 2. measures host-to-device copy bandwidth and cudaHostRegister() time for
#    pageable memory, 4 KiB-page pinned memory, THP-backed and hugetlbfs
#    2 MiB-page pinned memory (the mltune pool's page size; standing in for
#    the pool where the module is not loaded) and cudaHostAlloc(), medians
#    over the repeats, on the GPU's NUMA node (mltunectl exec, else numactl);
# 3. records, read-only, what mltune sees on the machine: mltunectl topology,
#    audit --json and plan (when mltunectl is built), nvidia-smi, the GPU's
#    PCIe link, kernel, THP and hugetlb settings.
#
# Everything goes to bench/pinned/results/HOST-DATE/ (summary.txt first).
# The machine is left as it was: when hugetlbfs pages are short and the
# script runs as root, it raises vm.nr_hugepages on the GPU's node for the
# run and puts the old value back on exit (as root only; otherwise the 2 MiB
# hugetlbfs column says why it was skipped). Exit 2 when there is no NVIDIA
# GPU or no CUDA toolkit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
gpu=0 size=1024 repeats=10 copies=5
while [ $# -gt 0 ]; do
	case $1 in
	--gpu) gpu=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--repeats) repeats=$2; shift 2 ;;
	--copies) copies=$2; shift 2 ;;
	-h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 ||
	{ echo "run.sh: no NVIDIA GPU (nvidia-smi -L fails): nothing to measure" >&2; exit 2; }
out=$ROOT/bench/pinned/results/$(hostname -s)-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" "$ROOT/build/bench"
bin=$ROOT/build/bench/pinned_h2d
src=$ROOT/userspace/examples/pinned_h2d.cpp
cuda=${CUDA_HOME:-/usr/local/cuda}
if command -v nvcc >/dev/null; then
	nvcc -O2 -std=c++17 -o "$bin" "$src"
elif [ -x "$cuda/bin/nvcc" ]; then
	"$cuda/bin/nvcc" -O2 -std=c++17 -o "$bin" "$src"
elif [ -f "$cuda/include/cuda_runtime.h" ]; then
	${CXX:-c++} -O2 -std=c++17 -I"$cuda/include" -o "$bin" "$src" -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64"
else
	echo "run.sh: no CUDA toolkit (nvcc, or $cuda/include/cuda_runtime.h; set CUDA_HOME)" >&2
	exit 2
fi

# The GPU's PCI address and NUMA node, as sysfs names them.
bus=$(nvidia-smi -i "$gpu" --query-gpu=pci.bus_id --format=csv,noheader | tr 'A-F' 'a-f' | sed 's/^0000//')
node=$(cat "/sys/bus/pci/devices/$bus/numa_node" 2>/dev/null || echo -1)
[ "$node" -ge 0 ] 2>/dev/null || node=0

# hugetlbfs 2 MiB pages for one buffer, on the GPU's node, for this run only.
need=$((size / 2 + 1))
hp=/sys/devices/system/node/node$node/hugepages/hugepages-2048kB
restore=""
if [ -d "$hp" ] && [ "$(cat "$hp/free_hugepages")" -lt "$need" ] && [ "$(id -u)" = 0 ]; then
	old=$(cat "$hp/nr_hugepages")
	restore="echo $old > $hp/nr_hugepages"
	echo $((old + need - $(cat "$hp/free_hugepages"))) >"$hp/nr_hugepages"
fi
trap '[ -z "$restore" ] || sh -c "$restore"' EXIT

# Placement: mltune's own launch binding when it can place this GPU (it
# leaves only that GPU visible: CUDA device 0 then), else numactl; CUDA
# numbers GPUs in PCI order as nvidia-smi and mltunectl do.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
cuda_gpu=$gpu
ctl=""
for c in "$ROOT/build/userspace/mltunectl" "$(command -v mltunectl || true)"; do
	[ -n "$c" ] && [ -x "$c" ] && { ctl=$c; break; }
done
place=()
if [ -n "$ctl" ] && "$ctl" --dry-run exec --gpu "$gpu" -- true >"$out/placement.txt" 2>&1; then
	place=("$ctl" exec --gpu "$gpu" --)
	cuda_gpu=0
elif command -v numactl >/dev/null; then
	place=(numactl "--cpunodebind=$node" "--membind=$node")
	echo "numactl --cpunodebind=$node --membind=$node" >"$out/placement.txt"
else
	echo "not placed (neither mltunectl exec nor numactl)" >"$out/placement.txt"
fi

{
	echo "# $(date -Is) $(hostname) GPU $gpu ($bus, NUMA node $node)"
	echo "# kernel $(uname -r); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
	echo "# placement: $(head -n 1 "$out/placement.txt")"
	"${place[@]}" "$bin" --gpu "$cuda_gpu" --size "$size" --repeats "$repeats" --copies "$copies" --json "$out/pinned.json"
} | tee "$out/summary.txt"

# What mltune sees here (read-only commands only).
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1 || true
nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1 || true
{ command -v lspci >/dev/null && lspci -vv -s "$bus" 2>&1 | grep -E 'LnkCap|LnkSta|MaxReadReq'; } >"$out/gpu-link.txt" || true
if [ -n "$ctl" ]; then
	"$ctl" topology >"$out/topology.txt" 2>&1 || true
	"$ctl" --json audit >"$out/audit.json" 2>"$out/audit.stderr" || true
	"$ctl" plan >"$out/plan.txt" 2>&1 || true
fi
echo "results: $out"
