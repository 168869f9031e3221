// Noise as audit findings (mltune/noise.hpp: noise_findings()).
#include "mltune/noise.hpp"

#include <cstdio>

namespace mltune {

namespace {

std::string num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string rate(double v) {
  return num(v) + "/s";
}

// The fix with this report's CPUs in place of the placeholders.
std::string concrete(std::string fix, unsigned cpu, const std::string &cpus) {
  for (const auto &[from, to] : {std::pair<std::string, std::string>{"cpuN", "cpu" + std::to_string(cpu)},
                                 std::pair<std::string, std::string>{"CPU N", "CPU " + std::to_string(cpu)},
                                 std::pair<std::string, std::string>{"CPUS", cpus}}) {
    for (size_t pos = fix.find(from); pos != std::string::npos; pos = fix.find(from, pos + to.size())) {
      fix.replace(pos, from.size(), to);
    }
  }
  return fix;
}

} // namespace

std::vector<Finding> noise_findings(const NoiseReport &r, double budget, size_t per_cpu) {
  std::vector<Finding> out;
  const std::string cpus = r.cpus.str();
  for (const auto &c : r.per_cpu) {
    const bool over = c.per_second > budget;
    const std::string where = "CPU " + std::to_string(c.cpu);
    Finding f{"noise:cpu" + std::to_string(c.cpu),
              "noise",
              over ? Severity::warning : Severity::ok,
              rate(c.per_second) + " foreign interruptions (" + std::to_string(c.interruptions) + " in " +
                  num(r.seconds) + " s, probe " + r.probe + ")",
              "at most " + num(budget) + " interruptions/s on " + where,
              "every interruption delays the feeder work on " + where + " (GPU launches, data loading)",
              {}};
    if (over) {
      auto off = c.offenders(1);
      f.fix = off.empty() ? "" : "start with the worst offender: " + off.front()->name;
    }
    out.push_back(std::move(f));
    if (!over) {
      continue;
    }
    for (const auto *s : c.offenders(per_cpu)) {
      const double per_s = r.seconds > 0 ? static_cast<double>(s->count) / r.seconds : 0;
      std::string current = rate(per_s);
      if (s->ns) {
        char buf[64];
        std::snprintf(buf, sizeof buf, ", %.3f ms", static_cast<double>(*s->ns + s->bh_ns) / 1e6);
        current += buf;
      }
      out.push_back({"noise:cpu" + std::to_string(c.cpu) + ":" + s->id, "noise", Severity::warning,
                     current + ": " + s->name, "none on " + where,
                     s->known.empty() ? "interrupts " + where : s->known + " interrupts " + where,
                     concrete(s->fix, c.cpu, cpus)});
    }
    // Known sources seen inside the interruptions (the deadline server's
    // timer, vmstat work, ...), when they come at least once a second.
    for (const auto &d : c.details) {
      const double per_s = r.seconds > 0 ? static_cast<double>(d.count) / r.seconds : 0;
      if (d.known.empty() || per_s < 1) {
        continue;
      }
      out.push_back({"noise:cpu" + std::to_string(c.cpu) + ":" + d.what + ":" + d.function, "noise", Severity::info,
                     rate(per_s) + ": " + d.what + " " + d.function, "none on " + where,
                     d.known + " runs inside the interruptions of " + where, concrete(d.fix, c.cpu, cpus)});
    }
  }
  return out;
}

} // namespace mltune
