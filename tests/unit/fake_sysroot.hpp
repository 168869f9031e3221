// A throw-away fake node: a temp directory with the /proc and /sys files the
// library reads and writes, filled with stock kernel defaults.
#pragma once

#include "mltune/sysroot.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mltune::test {

class FakeSysroot {
public:
  FakeSysroot();
  ~FakeSysroot();
  FakeSysroot(const FakeSysroot &) = delete;
  FakeSysroot &operator=(const FakeSysroot &) = delete;

  [[nodiscard]] const std::filesystem::path &dir() const { return dir_; }
  [[nodiscard]] Sysroot root() const { return Sysroot(dir_); }
  // Creates or overwrites a file (parents created).
  void set(std::string_view abs, std::string_view content) const;
  [[nodiscard]] std::string get(std::string_view abs) const;
  // Every knob file with its current content, for before/after comparisons.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> snapshot() const;
  // Adds /sys/kernel/mltune with the module's attributes and built-ins.
  void add_module() const;

private:
  std::filesystem::path dir_;
};

} // namespace mltune::test
