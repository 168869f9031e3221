// The BPF probe's maps as RawNoise: plain conversions of the structs in
// bpf/mltune_noise.h, built with or without the BPF toolchain so unit tests
// cover them.
#pragma once

#include "mltune/noise.hpp"

#include "mltune_noise.h"

#include <cstdint>
#include <vector>

namespace mltune {

RawKind raw_kind_of(unsigned kind);
// One counts-map entry.
RawNoiseEntry raw_entry(const mltune_noise_key &k, const mltune_noise_val &v);
// Charges the task still running on each watched CPU when the window closed
// (per-CPU state `pcpu`, indexed by CPU) with its time from its switch-in
// (or start_ns) to stop_ns, nested interruptions excluded.
void add_running_tasks(RawNoise &raw, const std::vector<mltune_noise_pcpu> &pcpu, const CpuSet &cpus,
                       std::uint64_t start_ns, std::uint64_t stop_ns);

} // namespace mltune
