// CPU sets: the one CPU-set type of libmltune, with the kernel's two text
// forms (cpulist "0-3,8-11" and the hex cpumask "ff,ffffffff" of
// /proc/irq/*/smp_affinity and rps_cpus) and cpu_set_t for the affinity
// system calls, sized with CPU_ALLOC for k_max_cpus.
//
// parse_cpuset() accepts exactly what sysfs prints and what the kernel's
// bitmap_parselist() takes on the command line: comma-separated CPU numbers,
// ranges "A-B" (A <= B) and strided ranges "A-B:USED/GROUP", surrounded by
// optional whitespace (sysfs files end in '\n').  The empty string is the
// empty set.  Anything else is an Errc::input error that names the source
// and the column, never a crash.  CPU numbers are capped at k_max_cpus.
#pragma once

#include "mltune/result.hpp"

#include <sched.h>

#include <cstdint>
#include <memory>
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
  // The sysfs cpumask form: 32-bit groups in hex, most significant first,
  // separated by ',', the first unpadded ("f,0000ffff"); "0" for the empty set.
  [[nodiscard]] std::string mask_str() const;

  // cpu_set_t for sched_setaffinity(2) and friends, CPU_ALLOC'd for
  // k_max_cpus CPUs; size() is the byte size to pass to the call.
  class Native {
  public:
    Native();
    [[nodiscard]] cpu_set_t *get() { return set_.get(); }
    [[nodiscard]] const cpu_set_t *get() const { return set_.get(); }
    [[nodiscard]] static size_t size();

  private:
    struct Free {
      void operator()(cpu_set_t *s) const { CPU_FREE(s); }
    };
    std::unique_ptr<cpu_set_t, Free> set_;
  };
  [[nodiscard]] Native native() const;
  static CpuSet from_native(const Native &n);

private:
  void trim();
  std::vector<std::uint64_t> words_;
};

// `where` names the source in errors ("/sys/devices/system/node/node0/cpulist").
Result<CpuSet> parse_cpuset(std::string_view text, std::string_view where = "cpulist");
// The hex cpumask form (mask_str(); groups may be zero-padded, surrounding
// whitespace is ignored).  Bits at or above k_max_cpus are an input error.
Result<CpuSet> parse_cpumask(std::string_view text, std::string_view where = "cpumask");

} // namespace mltune
