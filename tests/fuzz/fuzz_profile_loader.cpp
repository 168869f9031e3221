// Fuzzes the profile loader: TOML parsing, schema checks, catalog checks and
// include resolution (built-in names only; no file system access).
#include "mltune/profile.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {
// True when a path component is empty, "." or ".." (a dot inside a file
// name, "scan_o..asleep", is fine: the module checks components too).
bool bad_component(const std::string &path) {
  size_t pos = 1; // paths are absolute
  while (pos <= path.size()) {
    const size_t end = path.find('/', pos);
    const std::string_view c(path.data() + pos, (end == std::string::npos ? path.size() : end) - pos);
    if (c.empty() || c == "." || c == "..") {
      return true;
    }
    if (end == std::string::npos) {
      break;
    }
    pos = end + 1;
  }
  return path.empty() || path[0] != '/';
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  const mltune::ProfileLoader loader;
  auto p = loader.load_text(text, "fuzz.toml");
  if (p) {
    for (const auto &k : p->knobs) {
      if (k.key.empty() || k.value.empty() || bad_component(k.path())) {
        __builtin_trap();
      }
    }
  } else if (p.error().kind != mltune::Errc::input || p.error().message.rfind("fuzz.toml", 0) != 0) {
    __builtin_trap(); // every rejection is an input error naming the file
  }
  return 0;
}
