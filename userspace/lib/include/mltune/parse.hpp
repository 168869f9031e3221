// The one family of strict text parsers in libmltune: every integer, every
// trimmed line that the library reads from sysfs, procfs, a profile or the
// command line goes through these (systemd's parse-util is the model), and
// every split of such text into lines or words.
//
// parse_int<T>() accepts exactly an optional '-' (signed T only), then one or
// more digits of `base` (10 or 16; "0x" is not accepted, hex is written bare as
// sysfs prints it), and nothing else: no surrounding whitespace, no '+', no
// trailing junk, no overflow.  Callers that read a file trim() first.
#pragma once

#include <algorithm>
#include <charconv>
#include <concepts>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune {

// Space, tab, newline, carriage return, vertical tab, form feed.
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// `s` without leading and trailing whitespace (is_space).
constexpr std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && is_space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

// The words of `s`, separated by runs of whitespace (is_space).
inline std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) {
      ++i;
    }
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) {
      ++j;
    }
    if (j > i) {
      out.push_back(s.substr(i, j - i));
    }
    i = j;
  }
  return out;
}

// The lines of `s` without their '\n' (a last line without one counts too).
inline std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t e = std::min(s.find('\n', pos), s.size());
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

template <std::integral T> std::optional<T> parse_int(std::string_view s, int base = 10) {
  if (s.empty() || s.front() == '+' || (std::unsigned_integral<T> && s.front() == '-')) {
    return std::nullopt;
  }
  if (s.front() == '-' && (s.size() == 1 || s[1] == '-' || s[1] == '+')) {
    return std::nullopt;
  }
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

// A decimal integer of any length: an optional '-', then one or more digits.
constexpr bool is_decimal(std::string_view s) {
  if (!s.empty() && s.front() == '-') {
    s.remove_prefix(1);
  }
  return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

// Compares two decimal integers of any length without overflow (the
// kernel's fs.file-max reads 9223372036854775807): <0, 0 or >0 as `a` is
// less than, equal to or greater than `b`; nullopt when either is not
// is_decimal().  The module's mltune_int_cmp() (kmod/mltune_allow.c) gives
// the same answers (tests/unit/profile/test_allowlist.cpp).
constexpr std::optional<int> compare_decimal(std::string_view a, std::string_view b) {
  if (!is_decimal(a) || !is_decimal(b)) {
    return std::nullopt;
  }
  auto split = [](std::string_view s) {
    const bool neg = s.front() == '-';
    s.remove_prefix(neg ? 1 : 0);
    while (s.size() > 1 && s.front() == '0') {
      s.remove_prefix(1);
    }
    return std::pair{neg && s != "0", s};
  };
  const auto [aneg, amag] = split(a);
  const auto [bneg, bmag] = split(b);
  if (aneg != bneg) {
    return aneg ? -1 : 1;
  }
  int mag = amag.size() != bmag.size() ? (amag.size() < bmag.size() ? -1 : 1) : amag.compare(bmag);
  mag = mag < 0 ? -1 : (mag > 0 ? 1 : 0);
  return aneg ? -mag : mag;
}

} // namespace mltune
