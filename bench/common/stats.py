"""Timing helpers shared by the benches (bench/plan, bench/gpu_node).

run_once(args): one run of a command, its wall time, CPU time and exit status.
ci95(xs): the distribution-free 95% interval of the median of xs (order
statistics), as the benches print it beside the median.
"""
import math
import os
import subprocess
import time


def run_once(args):
    """(wall ms, user+sys CPU ms, wait status) of one run, output discarded."""
    s = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return (time.perf_counter() - s) * 1000, (ru.ru_utime + ru.ru_stime) * 1000, status


def ci95(xs):
    """(lo, hi): ranks j < k with P(x_(j) <= median <= x_(k)) >= 95%
    (binomial, p = 1/2); the whole range when there are too few runs."""
    xs = sorted(xs)
    n = len(xs)
    cdf = lambda k: sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n  # noqa: E731
    j = max([k for k in range(n // 2) if cdf(k) <= 0.025] or [0])
    return xs[j], xs[n - 1 - j]
