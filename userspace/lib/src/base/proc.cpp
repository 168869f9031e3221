// /proc/PID/stat parsing (see base/proc.hpp).
#include "base/proc.hpp"

#include <algorithm>

namespace mltune::proc {

std::optional<Stat> parse_stat(std::string_view text) {
  const size_t l = text.find('(');
  const size_t r = text.rfind(')');
  if (l == std::string_view::npos || r == std::string_view::npos || r < l) {
    return std::nullopt;
  }
  Stat s;
  s.comm = std::string(text.substr(l + 1, r - l - 1));
  std::string_view rest = text.substr(r + 1);
  while (true) {
    rest = trim(rest);
    if (rest.empty()) {
      break;
    }
    const size_t e = std::min(rest.find_first_of(" \t\n"), rest.size());
    s.fields.emplace_back(rest.substr(0, e));
    rest.remove_prefix(e);
  }
  return s;
}

std::vector<int> pids(const std::vector<std::string> &names) {
  std::vector<int> out;
  for (const auto &n : names) {
    if (auto v = parse_int<int>(n); v && *v > 0) {
      out.push_back(*v);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace mltune::proc
