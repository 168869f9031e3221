// Proof on the node (Documentation/prove.rst): what a profile does to the
// feeder cores, measured under the node's current state and under the
// profile, each figure with its uncertainty, and the gate that rolls a
// switch back when a figure got worse by more than the profile allows.
//
// The probes, run together over each round's window:
//   the CPU feeding loop   one process per feeder core, pinned there (in the
//                          feeder cgroup while the feeder cores are on): it
//                          wakes every period_us at an absolute time and
//                          does a fixed quantum of work; a step is the time
//                          from the intended wake-up to the end of the
//                          quantum.  Its figures: step-time percentiles, and
//                          its involuntary context switches per second;
//   the noise probe        foreign interruptions per second and feeder core
//                          (mltune/noise.hpp: BPF, or the /proc counters),
//                          the loop's own processes counted as own work;
//   the GPU feeding loop   with --gpu, after the CPU loop: mltune-gpu-loop's
//                          copy-launch-synchronize step times and host
//                          registration time (CUDA driver API).
// Counts are the figures that hold under emulation; step times are the
// figures of real hardware.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/feeder.hpp"
#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/switch.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

// ---- the CPU feeding loop ---------------------------------------------------

struct LoopOptions {
  CpuSet cpus;
  double seconds = 2;
  unsigned period_us = 1000;
  std::uint64_t work_iterations = 0; // the quantum (calibrate_work()); 0: none
  std::string cgroup;                // below /sys/fs/cgroup, joined before the loop starts; "" stays
};

struct LoopRun {
  std::vector<std::uint64_t> step_ns; // every step of every CPU
  std::uint64_t missed = 0;           // periods skipped because a step overran its period
  std::uint64_t involuntary = 0;      // context switches of the loop processes, involuntary
  std::uint64_t voluntary = 0;        // and voluntary (its sleeps)
};

// The processes of one loop run: forked and waiting (their pids known, so
// the noise probe can count them as own work), then started and collected.
class FeederLoop {
public:
  [[nodiscard]] static Result<FeederLoop> prepare(const Sysroot &root, const LoopOptions &opt);
  FeederLoop(FeederLoop &&) noexcept;
  FeederLoop &operator=(FeederLoop &&) noexcept;
  FeederLoop(const FeederLoop &) = delete;
  FeederLoop &operator=(const FeederLoop &) = delete;
  ~FeederLoop(); // kills and reaps what still runs

  [[nodiscard]] const std::vector<int> &pids() const;
  // Starts every process and waits for all of them.
  [[nodiscard]] Result<LoopRun> run();

private:
  struct Impl;
  explicit FeederLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Iterations of the work quantum that take about `work_us` on this CPU now
// (the least of a few timings); the same count is used before and after.
std::uint64_t calibrate_work(unsigned work_us);

// ---- the neighbour ------------------------------------------------------------

// `n` busy processes ("mltune-nbr") outside the feeder cgroup, placed by the
// scheduler, from start() to destruction: the load that shows what the feeder
// cores keep away on a quiet node (measure_node runs one over its rounds).
class Neighbour {
public:
  [[nodiscard]] static Result<Neighbour> start(unsigned n);
  // n is at most 4096; else an input error naming --neighbour.
  [[nodiscard]] static Status check(unsigned n);
  Neighbour() = default;
  Neighbour(Neighbour &&o) noexcept : pids_(std::exchange(o.pids_, {})) {}
  Neighbour &operator=(Neighbour &&o) noexcept;
  Neighbour(const Neighbour &) = delete;
  Neighbour &operator=(const Neighbour &) = delete;
  ~Neighbour();
  [[nodiscard]] const std::vector<int> &pids() const { return pids_; }

private:
  void stop();
  std::vector<int> pids_;
};

// ---- figures ------------------------------------------------------------------

// One measured figure with its 95% interval: counts (interruptions,
// involuntary switches) as rates with the Poisson interval of the count;
// step times as the median over rounds with the range of the rounds.
struct Figure {
  std::string name;     // one of k_gate_figures
  std::string unit;     // "/s per core", "/s", "us"
  double value = 0;     // the rate, or the median over rounds
  double low = 0;       // the interval
  double high = 0;      //
  std::string interval; // "poisson-95" or "range-of-rounds"
  std::uint64_t count = 0;
  [[nodiscard]] bool is_count() const { return interval == "poisson-95"; }
};

// The two-sided 95% interval of a Poisson mean for `k` events (Garwood,
// through Byar's approximation; exact at k = 0).
std::pair<double, double> poisson_interval(std::uint64_t k);

struct ProbeOptions {
  CpuSet cpus; // the feeder cores measured
  unsigned rounds = 3;
  double seconds = 2; // per round
  std::string probe = "auto";
  unsigned period_us = 1000;
  std::uint64_t work_iterations = 0; // calibrate_work(200) when 0
  // The GPU feeding loop (mltune-gpu-loop) on this GPU after each round's
  // CPU loop, on the first CPU measured (through `feeder run` while the
  // feeder cores hold it); -1: none.
  int gpu = -1;
  unsigned gpu_steps = 3000;
  unsigned gpu_register_mib = 256;
  // Busy processes (Neighbour) over the rounds, inside the noise window:
  // the load of the measurement, not of loading the probe or of the switch.
  unsigned neighbour = 0;
  // Called at the start of each round: ("before", 2, 3).
  std::function<void(std::string_view label, unsigned round, unsigned rounds)> progress;
};

struct Measurement {
  std::string label; // "before", "after"
  CpuSet cpus;
  unsigned rounds = 0;
  double window_s = 0;      // seconds of all windows together
  std::string probe;        // "bpf" or "proc"
  std::string probe_note;   // why not BPF
  std::string loop_cgroup;  // where the loop ran ("" : mltunectl's own)
  std::uint64_t steps = 0;  // feeding-loop steps
  std::uint64_t missed = 0; // periods the loop missed
  std::string gpu_name;     // with --gpu: the GPU's name
  std::vector<Figure> figures;
  std::vector<std::pair<std::string, std::uint64_t>> sources; // foreign sources, worst first (name, count)
  [[nodiscard]] const Figure *find(std::string_view name) const;
};

// The node as it is now: `rounds` windows of the feeding loop with the noise
// probe over them.  The loop joins the feeder cgroup where the feeder cores
// are on and `cpus` are among them.
[[nodiscard]] Result<Measurement> measure_node(const Sysroot &root, const ProbeOptions &opt, std::string_view label);

// ---- before against after, and the gate ---------------------------------------

struct FigureChange {
  std::string figure;
  Figure before, after;
  // "better" (after's interval wholly below before's), "worse" (wholly
  // above), "same" (they overlap).
  std::string verdict;
  double limit = 0;                           // the gate's ratio, 0: not gated
  bool failed = false;                        // gated, after.low > before.high * limit (and min_rise)
  [[nodiscard]] std::string describe() const; // "interruptions 41.2 [38.0, 44.6] -> 3.1 [2.2, 4.3] /s per core"
};

// The gate's limits: the defaults (interruptions and involuntary switches
// 1.5, the step time's p99 3, the other step times not gated) with the
// profile's [gate] over them.
struct GateLimits {
  std::vector<std::pair<std::string, double>> limits;
  unsigned rounds = 3;
  double seconds = 2;
  // A count fails only when it also rose by this much (per second and
  // core) beyond before's upper bound: a quiet core's few interruptions come
  // in bursts (kworkers, ksoftirqd) that a Poisson interval understates.
  double min_rise = 10;
  [[nodiscard]] double limit(std::string_view figure) const;
};
GateLimits gate_limits(const Profile &p);

std::vector<FigureChange> compare_measurements(const Measurement &before, const Measurement &after,
                                               const GateLimits &limits);
// "better" when some figure is better and none worse, "worse" when one is
// worse and none better, "mixed" when both, "same" otherwise.
std::string overall_verdict(const std::vector<FigureChange> &changes);

// ---- prove ----------------------------------------------------------------------

struct ProveOptions {
  ProbeOptions probe;
  Backend backend = Backend::automatic;
  // Feeder cores put in force with the profile (a cpulist or plan role);
  // unset: as the node has them.
  std::optional<std::string> feeder;
  FeederRequest feeder_request;
  bool keep = false; // leave the profile in force (else rolled back)
  bool gate = false; // roll back when a gated figure failed (exit 1), keep otherwise
};

struct ProveReport {
  std::string profile;
  Measurement before, after;
  std::vector<FigureChange> changes;
  std::string verdict;
  GateLimits limits;
  std::vector<std::string> applied; // the transaction's steps
  bool kept = false;                // the profile stayed in force
  std::string rollback_failed;      // what did not roll back ("" : all did)
  double measuring_s = 0;           // wall time of the measurements (the gate's cost)
  [[nodiscard]] const FigureChange *gate_failure() const;
};

// The CPUs a proof measures: `spec` when given (a cpulist or plan role), else
// the feeder cores in force, else those `feeder` would put in force, else
// the plan's feeder role.
[[nodiscard]] Result<CpuSet> prove_cpus(const Sysroot &root, const std::optional<std::string> &spec,
                                        const std::optional<std::string> &feeder);

// Measures, switches to `profile` in one transaction (its running domains and
// the feeder cores asked for), measures again under the node lock, then rolls
// the transaction back unless `keep` (or `gate` and no gated figure failed).
[[nodiscard]] Result<ProveReport> prove_profile(const Sysroot &root, const Profile &profile, const ProveOptions &opt);

} // namespace mltune
