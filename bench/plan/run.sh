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
import os, statistics, subprocess, sys, time
ctl, root, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def one(args):
    s = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - s) * 1000
    if status != 0:
        sys.exit(f"{args}: exit status {status}")
    return wall, (ru.ru_utime + ru.ru_stime) * 1000
def measure(args):
    one(args)  # warm the page cache
    r = [one(args) for _ in range(runs)]
    return statistics.median(w for w, _ in r), min(w for w, _ in r), statistics.median(c for _, c in r)
res = {
    "plan --json": measure([ctl, "--sysroot", root, "plan", "--json"]),
    "plan": measure([ctl, "--sysroot", root, "plan"]),
    "topology --json": measure([ctl, "--sysroot", root, "topology", "--json"]),
    "--version": measure([ctl, "--version"]),
}
base = res["--version"][0]
print(f"mltunectl on hgx-2s-8gpu (192 CPUs, 8 GPUs, 8 NICs), {runs} runs each, "
      f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
for k, (med, lo, cpu) in res.items():
    print(f"  {k:16s} wall median {med:7.2f} ms (min {lo:6.2f})  CPU (user+sys) median {cpu:6.2f} ms"
          f"  {med / base:5.1f}x start-up")
med, lo, cpu = res["plan"]
# The goal is for the command itself: wall time on an idle machine.  On a
# loaded one (other builds), wall time measures the run queue, so the gate
# falls back to the command's own CPU time and says so.
idle = os.getloadavg()[0] < os.cpu_count()
ok = med < 50 if idle else cpu < 50
print(f"plan: {'PASS' if ok else 'FAIL'}: wall median {med:.2f} ms, CPU {cpu:.2f} ms (goal < 50 ms"
      f"{'' if idle else '; machine loaded: judged on CPU time'})")
sys.exit(0 if ok else 1)
PY
