#!/usr/bin/python3 -Es
# timeit.py REPEATS RESET_CMD [PID] -- CMD...: median wall time of CMD in ms,
# running RESET_CMD (untimed, through sh) before every run.  Prints "WALL
# CPU": the median wall time and the median user+sys CPU time of CMD and its
# children (CPU time is what stays meaningful on a loaded host), plus the CPU
# time process PID spent meanwhile when one is given (the resident switcher,
# which does a served command's work: /proc/PID/schedstat).
#
# A run that fails is not timed: any exit status other than 0 (or one listed
# in $TIMEIT_OK, e.g. "0 1" for mltunectl audit, whose 1 is "found
# something") stops the bench with the command's output, so a failed switch
# is never reported as a fast one.
import os
import resource
import statistics
import subprocess
import sys
import time

repeats = int(sys.argv[1])
reset = sys.argv[2]
sep = sys.argv.index("--")
pid = sys.argv[3] if sep > 3 else None
cmd = sys.argv[sep + 1:]


def other_cpu_ms():
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


ok = {int(c) for c in os.environ.get("TIMEIT_OK", "0").split()}
times = []
cpus = []
for _ in range(repeats):
    if reset:
        subprocess.run(reset, shell=True, check=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    o0 = other_cpu_ms()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    times.append((time.perf_counter() - t0) * 1000.0)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    o1 = other_cpu_ms()
    cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000.0 + (o1 - o0))
    if r.returncode not in ok:
        err = r.stderr.decode(errors="replace").strip()[-400:]
        sys.exit(f"timeit: {' '.join(cmd)} exited {r.returncode} (not timed): {err}")
print(f"{statistics.median(times):.2f} {statistics.median(cpus):.2f}")
