// CPU sets and the kernel's cpulist text format ("0-3,8-11").
//
// parse_cpuset() accepts exactly what sysfs prints and what the kernel's
// bitmap_parselist() takes on the command line: comma-separated CPU numbers,
// ranges "A-B" (A <= B) and strided ranges "A-B:USED/GROUP", surrounded by
// optional whitespace (sysfs files end in '\n').  The empty string is the
// empty set.  Anything else is an Errc::input error that names the source
// and the column, never a crash.  CPU numbers are capped at k_max_cpus.
#pragma once

#include "mltune/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

// The kernel's NR_CPUS upper bound (CONFIG_NR_CPUS max on x86-64).
inline constexpr unsigned k_max_cpus = 8192;

class CpuSet {
public:
  CpuSet() = default;
  CpuSet(std::initializer_list<unsigned> cpus);

  void set(unsigned cpu);
  void reset(unsigned cpu);
  [[nodiscard]] bool test(unsigned cpu) const;
  [[nodiscard]] bool empty() const;
  [[nodiscard]] unsigned count() const;
  // Lowest CPU; k_max_cpus when empty.
  [[nodiscard]] unsigned first() const;
  // CPUs in increasing order.
  [[nodiscard]] std::vector<unsigned> cpus() const;

  [[nodiscard]] bool intersects(const CpuSet &o) const;
  [[nodiscard]] bool contains(const CpuSet &o) const; // o is a subset of *this
  CpuSet &operator|=(const CpuSet &o);
  CpuSet &operator&=(const CpuSet &o);
  CpuSet &operator-=(const CpuSet &o); // set difference
  friend CpuSet operator|(CpuSet a, const CpuSet &b) { return a |= b; }
  friend CpuSet operator&(CpuSet a, const CpuSet &b) { return a &= b; }
  friend CpuSet operator-(CpuSet a, const CpuSet &b) { return a -= b; }
  friend bool operator==(const CpuSet &a, const CpuSet &b);

  // "0-3,8-11"; "" for the empty set.
  [[nodiscard]] std::string str() const;

private:
  void trim();
  std::vector<std::uint64_t> words_;
};

// `where` names the source in errors ("/sys/devices/system/node/node0/cpulist").
Result<CpuSet> parse_cpuset(std::string_view text, std::string_view where = "cpulist");

} // namespace mltune
