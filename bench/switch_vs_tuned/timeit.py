#!/usr/bin/python3 -Es
# timeit.py REPEATS RESET_CMD -- CMD...: median wall time of CMD in ms, running
# RESET_CMD (untimed, through sh) before every run.  Prints "WALL CPU": the
# median wall time and the median user+sys CPU time of CMD and its children
# (CPU time is what stays meaningful on a loaded host).
import resource
import statistics
import subprocess
import sys
import time

repeats = int(sys.argv[1])
reset = sys.argv[2]
cmd = sys.argv[sys.argv.index("--") + 1:]
times = []
cpus = []
for _ in range(repeats):
    if reset:
        subprocess.run(reset, shell=True, check=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    times.append((time.perf_counter() - t0) * 1000.0)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000.0)
    if r.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} exited {r.returncode}")
print(f"{statistics.median(times):.2f} {statistics.median(cpus):.2f}")
