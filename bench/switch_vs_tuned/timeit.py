#!/usr/bin/python3 -Es
# timeit.py REPEATS RESET_CMD -- CMD...: median wall time of CMD in ms, running
# RESET_CMD (untimed, through sh) before every run.
import statistics
import subprocess
import sys
import time

repeats = int(sys.argv[1])
reset = sys.argv[2]
cmd = sys.argv[sys.argv.index("--") + 1:]
times = []
for _ in range(repeats):
    if reset:
        subprocess.run(reset, shell=True, check=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    times.append((time.perf_counter() - t0) * 1000.0)
    if r.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} exited {r.returncode}")
print(f"{statistics.median(times):.3f}")
