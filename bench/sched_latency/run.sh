#!/bin/sh
# Builds and runs the wake-up latency benchmark on this host (as root).
set -e
cd "$(dirname "$0")"
out=${BUILD:-../../build}/bench/sched_latency
mkdir -p "$out"
g++ -std=c++20 -O2 -Wall -Wextra -Werror -pthread -o "$out/sched_latency" sched_latency.cpp
before=$(cat /proc/sys/kernel/sched_rt_runtime_us)
"$out/sched_latency" "$@"
[ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = "$before" ] || echo "sched_rt_runtime_us changed!" >&2
