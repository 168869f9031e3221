#!/bin/sh
# 'mltunectl plan' on the 8-GPU fixture (2x48 cores, 192 CPUs, 8 GPUs,
# 8 NICs with 65 IRQs each, /proc/interrupts of 192 columns): median wall
# time of the whole command over N runs, side by side with 'topology' (the
# discovery alone) and '--version' (process start-up), in one run.
# Goal (issue 6): plan under 50 ms.
#
#   bench/plan/run.sh [RUNS]        default 50; uses build/userspace/mltunectl
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${MLTUNE_BUILD:-$ROOT/build}
runs=${1:-50}
out=$BUILD/bench/plan
mkdir -p "$out"
python3 "$ROOT/tests/fixtures/gen_fixtures.py" "$out/fixtures" hgx-2s-8gpu >/dev/null
exec python3 - "$BUILD/userspace/mltunectl" "$out/fixtures/hgx-2s-8gpu" "$runs" <<'PY'
import statistics, subprocess, sys, time
ctl, root, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def median_ms(args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)  # warm the page cache
    t = []
    for _ in range(runs):
        s = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        t.append((time.perf_counter() - s) * 1000)
    return statistics.median(t), min(t), max(t)
res = {
    "plan --json": median_ms([ctl, "--sysroot", root, "plan", "--json"]),
    "plan": median_ms([ctl, "--sysroot", root, "plan"]),
    "topology --json": median_ms([ctl, "--sysroot", root, "topology", "--json"]),
    "--version": median_ms([ctl, "--version"]),
}
base = res["--version"][0]
print(f"mltunectl on hgx-2s-8gpu (192 CPUs, 8 GPUs, 8 NICs), {runs} runs each")
for k, (med, lo, hi) in res.items():
    print(f"  {k:16s} median {med:7.2f} ms  (min {lo:6.2f}, max {hi:6.2f})  {med / base:5.1f}x start-up")
med = res["plan"][0]
print(f"plan: {'PASS' if med < 50 else 'FAIL'}: median {med:.2f} ms (goal < 50 ms)")
sys.exit(0 if med < 50 else 1)
PY
