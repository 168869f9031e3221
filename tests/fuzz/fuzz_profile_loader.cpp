// Fuzzes the profile loader: TOML parsing, schema checks, catalog checks and
// include resolution (built-in names only; no file system access).
#include "mltune/profile.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  const mltune::ProfileLoader loader;
  auto p = loader.load_text(text, "fuzz.toml");
  if (p) {
    for (const auto &k : p->knobs) {
      if (k.key.empty() || k.value.empty() || k.path().find("..") != std::string::npos) {
        __builtin_trap();
      }
    }
  } else if (p.error().kind != mltune::Errc::input || p.error().message.rfind("fuzz.toml", 0) != 0) {
    __builtin_trap(); // every rejection is an input error naming the file
  }
  return 0;
}
