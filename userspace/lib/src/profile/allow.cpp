#include "profile/allow.hpp"

#include <cstddef>

// Defines the pattern arrays; include it from this file only.
#define MLTUNE_ALLOW_TREES
#include "mltune_knobs_allow.h"

namespace mltune {

namespace {

// "*" matches one component, a final "**" one or more.
bool match(std::string_view pat, std::string_view s) {
  while (!pat.empty()) {
    if (s.empty()) {
      return false;
    }
    const size_t pe = pat.find('/');
    const std::string_view pc = pat.substr(0, pe);
    const size_t se = s.find('/');
    const std::string_view sc = s.substr(0, se);
    if (pc == "**") {
      return true;
    }
    if (pc != "*" && pc != sc) {
      return false;
    }
    pat = pe == std::string_view::npos ? std::string_view() : pat.substr(pe + 1);
    s = se == std::string_view::npos ? std::string_view() : s.substr(se + 1);
  }
  return s.empty();
}

bool in_trees(const char *const *pats, std::string_view rel) {
  for (; *pats != nullptr; ++pats) {
    if (match(*pats, rel)) {
      return true;
    }
  }
  return false;
}

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

} // namespace

bool knob_path_allowed(std::string_view path) {
  if (path.size() >= MLTUNE_PATH_MAX) {
    return false;
  }
  const char *const *trees = nullptr;
  std::string_view rel;
  if (path.size() > 6 && path.starts_with("/proc/")) {
    trees = mltune_proc_allow;
    rel = path.substr(6);
  } else if (path.size() > 5 && path.starts_with("/sys/")) {
    trees = mltune_sys_allow;
    rel = path.substr(5);
  } else {
    return false;
  }
  for (size_t pos = 0;;) {
    const size_t end = rel.find('/', pos);
    const std::string_view c = rel.substr(pos, end == std::string_view::npos ? end : end - pos);
    if (c.empty() || c == "." || c == "..") {
      return false;
    }
    if (end == std::string_view::npos) {
      break;
    }
    pos = end + 1;
  }
  return in_trees(trees, rel);
}

bool profile_name_allowed(std::string_view name) {
  if (name.empty() || name.size() >= MLTUNE_NAME_MAX || !alnum(name.front())) {
    return false;
  }
  for (const char c : name) {
    if (!alnum(c) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

} // namespace mltune
