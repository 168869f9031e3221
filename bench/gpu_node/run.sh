#!/bin/sh
# Two mltunectl binaries side by side on a live node (a real GPU node):
# median wall time with its distribution-free 95% interval (order
# statistics), minimum wall time and median CPU time of each command over N
# runs, the two binaries alternating run by run, a run that exits non-zero
# rejected; and whether both print the same `--json topology`. Timing and
# the interval: bench/common/stats.py (copy bench/common along).
#
#   bench/gpu_node/run.sh OLD NEW [RUNS]     default 15 runs
#
# Goal (issue 36): topology, plan and audit in milliseconds on a real GPU
# node. Results: bench/gpu_node/README.md.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 OLD NEW [RUNS]" >&2; exit 2; }
BENCH=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$1" "$2" "${3:-15}" "$BENCH/common" <<'PY'
import statistics, subprocess, sys
old, new, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from stats import ci95, run_once as one  # bench/common/stats.py
cmds = [["--version"], ["topology"], ["plan"], ["audit", "--no-nvidia-smi", "--nvml", "none"], ["audit"]]
same = subprocess.run([old, "--json", "topology"], capture_output=True).stdout == \
    subprocess.run([new, "--json", "topology"], capture_output=True).stdout
print(f"--json topology identical: {same}")
print(f"{'command':38} {'old median [95%]':>20} {'new median [95%]':>20} {'old min':>8} {'new min':>8} {'old cpu':>8} {'new cpu':>8} {'ratio':>6}  rejected")
for c in cmds:
    res = {old: [], new: []}
    rejected = {old: 0, new: 0}
    one([old] + c); one([new] + c)  # page cache
    for _ in range(runs):
        for b in (old, new):
            w, cpu, st = one([b] + c)
            if st != 0 and c[0] != "audit":  # audit exits 1 when it finds something
                rejected[b] += 1
                continue
            res[b].append((w, cpu))
    mo = statistics.median(w for w, _ in res[old]); mn = statistics.median(w for w, _ in res[new])
    lo, hi = ci95([w for w, _ in res[old]]); nlo, nhi = ci95([w for w, _ in res[new]])
    print(f"{' '.join(c):38} {mo:6.1f} [{lo:5.1f},{hi:5.1f}] {mn:6.1f} [{nlo:5.1f},{nhi:5.1f}] {min(w for w, _ in res[old]):8.1f} {min(w for w, _ in res[new]):8.1f}"
          f" {statistics.median(x for _, x in res[old]):8.1f} {statistics.median(x for _, x in res[new]):8.1f} {mo / mn:6.2f}  {rejected[old]}/{rejected[new]}")
PY
