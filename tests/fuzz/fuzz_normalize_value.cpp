// Fuzzes value normalisation and catalog checks (what verify and the
// direct backend apply to every value read from the node).
#include "mltune/catalog.hpp"
#include "mltune/sysroot.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  const std::string n = mltune::normalize_value(text);
  if (mltune::normalize_value(n) != n) {
    __builtin_trap(); // idempotent
  }
  for (const auto &e : mltune::catalog()) {
    (void)mltune::catalog_check(e, n);
  }
  return 0;
}
