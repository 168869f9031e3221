// The knob catalog: what libmltune knows about each knob it may set.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace mltune {

enum class KnobType {
  integer,  // one integer in [min, max]
  int_list, // whitespace-separated integers, each in [min, max]
  choice,   // one word out of `choices`
  word,     // free-form single word (e.g. congestion control name)
};

enum class Severity { ok, info, warning, critical };
std::string_view to_string(Severity s);

// One finding of `mltunectl audit` (audit.hpp), or of a probe that reports
// through it (noise_findings(), noise.hpp): what is off, what it costs and
// the fix.
struct Finding {
  std::string id;       // "sysctl:vm.swappiness", "cpu:governor", "limits:memlock:effective"
  std::string category; // sysctl sysfs cpu memory limits kernel irq gpu pcie sched
  Severity severity = Severity::ok;
  std::string current;
  std::string recommended;
  std::string impact;
  std::string fix; // a command or file edit that fixes it; empty when ok
};

struct CatalogEntry {
  std::string_view key; // sysctl name ("vm.swappiness") or path relative to /sys
  KnobType type;
  long long min;
  long long max;
  std::string_view choices; // space separated, for KnobType::choice
  std::string_view kernels; // which kernels have it ("all", ">= 4.9", "CONFIG_...")
  Severity severity;        // audit severity when the node differs
  std::string_view impact;  // what a wrong value costs
};

std::span<const CatalogEntry> catalog();
const CatalogEntry *catalog_find(std::string_view key);
// Why `value` is not valid for `entry`, or nullopt when it is.
std::optional<std::string> catalog_check(const CatalogEntry &entry, std::string_view value);

} // namespace mltune
