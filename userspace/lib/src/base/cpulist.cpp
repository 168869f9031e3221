// CpuSet and its text and cpu_set_t forms (see mltune/cpulist.hpp).
#include "mltune/cpulist.hpp"

#include "mltune/parse.hpp"

#include <algorithm>
#include <bit>
#include <charconv>

namespace mltune {

CpuSet::CpuSet(std::initializer_list<unsigned> cpus) {
  for (const unsigned c : cpus) {
    set(c);
  }
}

void CpuSet::set(unsigned cpu) {
  if (cpu >= k_max_cpus) {
    return;
  }
  const size_t w = cpu / 64;
  if (words_.size() <= w) {
    words_.resize(w + 1, 0);
  }
  words_[w] |= std::uint64_t{1} << (cpu % 64);
}

void CpuSet::reset(unsigned cpu) {
  const size_t w = cpu / 64;
  if (w < words_.size()) {
    words_[w] &= ~(std::uint64_t{1} << (cpu % 64));
    trim();
  }
}

bool CpuSet::test(unsigned cpu) const {
  const size_t w = cpu / 64;
  return w < words_.size() && ((words_[w] >> (cpu % 64)) & 1U) != 0;
}

bool CpuSet::empty() const {
  return words_.empty();
}

unsigned CpuSet::count() const {
  unsigned n = 0;
  for (const auto w : words_) {
    n += static_cast<unsigned>(std::popcount(w));
  }
  return n;
}

unsigned CpuSet::first() const {
  for (size_t i = 0; i < words_.size(); ++i) {
    if (words_[i] != 0) {
      return static_cast<unsigned>(i * 64 + static_cast<size_t>(std::countr_zero(words_[i])));
    }
  }
  return k_max_cpus;
}

std::vector<unsigned> CpuSet::cpus() const {
  std::vector<unsigned> out;
  for (size_t i = 0; i < words_.size(); ++i) {
    std::uint64_t w = words_[i];
    while (w != 0) {
      out.push_back(static_cast<unsigned>(i * 64 + static_cast<size_t>(std::countr_zero(w))));
      w &= w - 1;
    }
  }
  return out;
}

bool CpuSet::intersects(const CpuSet &o) const {
  const size_t n = std::min(words_.size(), o.words_.size());
  for (size_t i = 0; i < n; ++i) {
    if ((words_[i] & o.words_[i]) != 0) {
      return true;
    }
  }
  return false;
}

bool CpuSet::contains(const CpuSet &o) const {
  return (o - *this).empty();
}

CpuSet &CpuSet::operator|=(const CpuSet &o) {
  if (words_.size() < o.words_.size()) {
    words_.resize(o.words_.size(), 0);
  }
  for (size_t i = 0; i < o.words_.size(); ++i) {
    words_[i] |= o.words_[i];
  }
  return *this;
}

CpuSet &CpuSet::operator&=(const CpuSet &o) {
  words_.resize(std::min(words_.size(), o.words_.size()));
  for (size_t i = 0; i < words_.size(); ++i) {
    words_[i] &= o.words_[i];
  }
  trim();
  return *this;
}

CpuSet &CpuSet::operator-=(const CpuSet &o) {
  const size_t n = std::min(words_.size(), o.words_.size());
  for (size_t i = 0; i < n; ++i) {
    words_[i] &= ~o.words_[i];
  }
  trim();
  return *this;
}

bool operator==(const CpuSet &a, const CpuSet &b) {
  return a.words_ == b.words_;
}

void CpuSet::trim() {
  while (!words_.empty() && words_.back() == 0) {
    words_.pop_back();
  }
}

std::string CpuSet::str() const {
  std::string out;
  const auto v = cpus();
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out.push_back(',');
    }
    out += std::to_string(v[i]);
    if (j > i) {
      out.push_back('-');
      out += std::to_string(v[j]);
    }
    i = j + 1;
  }
  return out;
}

namespace {

class Parser {
public:
  Parser(std::string_view text, size_t base, std::string_view where) : s_(text), base_(base), where_(where) {}

  Error error(const std::string &what) const {
    return input_error(std::string(where_) + ": invalid cpulist '" + printable() + "': " + what + " at column " +
                       std::to_string(base_ + pos_ + 1));
  }

  // A decimal CPU number below k_max_cpus.
  Result<unsigned> number(const char *what) {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      ++pos_;
    }
    if (pos_ == start) {
      return error(std::string("expected ") + what);
    }
    const auto v = parse_int<unsigned>(s_.substr(start, pos_ - start));
    if (!v || *v >= k_max_cpus) {
      const std::string tok(s_.substr(start, std::min<size_t>(pos_ - start, 12)));
      pos_ = start;
      return error(std::string(what) + " " + tok + " out of range (0-" + std::to_string(k_max_cpus - 1) + ")");
    }
    return *v;
  }

  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  [[nodiscard]] bool done() const { return pos_ >= s_.size(); }

  Status parse(CpuSet &out) {
    for (;;) {
      auto a = number("a CPU number");
      if (!a) {
        return a.error();
      }
      unsigned b = *a;
      unsigned used = 1;
      unsigned group = 1;
      if (eat('-')) {
        const size_t at = pos_;
        auto bb = number("the end of a range");
        if (!bb) {
          return bb.error();
        }
        b = *bb;
        if (b < *a) {
          pos_ = at;
          return error("range end " + std::to_string(b) + " below its start " + std::to_string(*a));
        }
        if (eat(':')) {
          auto u = number("a used count");
          if (!u) {
            return u.error();
          }
          if (!eat('/')) {
            return error("expected '/' in a strided range");
          }
          auto g = number("a group size");
          if (!g) {
            return g.error();
          }
          if (*u == 0 || *g == 0 || *u > *g) {
            return error("strided range needs 0 < used <= group size");
          }
          used = *u;
          group = *g;
        }
      }
      for (unsigned c = *a; c <= b; ++c) {
        if ((c - *a) % group < used) {
          out.set(c);
        }
      }
      if (done()) {
        return {};
      }
      if (!eat(',')) {
        return error(std::string("unexpected character '") + printable_char(s_[pos_]) + "'");
      }
      if (done()) {
        return error("trailing ','");
      }
    }
  }

private:
  static std::string printable_char(char c) {
    if (c >= 0x20 && c < 0x7f) {
      return {c}; // one character (not std::string(1, c) braced: that is {\x01, c})
    }
    static const char hex[] = "0123456789abcdef";
    const auto u = static_cast<unsigned char>(c);
    return std::string("\\x") + hex[u >> 4] + hex[u & 15];
  }
  [[nodiscard]] std::string printable() const {
    std::string out;
    for (const char c : s_.substr(0, 64)) {
      out += printable_char(c);
    }
    if (s_.size() > 64) {
      out += "...";
    }
    return out;
  }

  std::string_view s_;
  size_t base_;
  std::string_view where_;
  size_t pos_ = 0;
};

} // namespace

Result<CpuSet> parse_cpuset(std::string_view text, std::string_view where) {
  const std::string_view t = trim(text);
  CpuSet out;
  if (t.empty()) {
    return out;
  }
  Parser p(t, static_cast<size_t>(t.data() - text.data()), where);
  if (auto st = p.parse(out); !st) {
    return st.error();
  }
  return out;
}

std::string CpuSet::mask_str() const {
  if (empty()) {
    return "0";
  }
  std::string out;
  const auto top = static_cast<unsigned>(words_.size() * 2); // 32-bit groups
  for (unsigned g = top; g-- > 0;) {
    const auto w = static_cast<std::uint32_t>(words_[g / 2] >> (32 * (g % 2)));
    if (out.empty() && w == 0) {
      continue;
    }
    char buf[12];
    auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), w, 16);
    const std::string_view hex(buf, static_cast<size_t>(p - buf));
    if (!out.empty()) {
      out += ',';
      out.append(8 - hex.size(), '0');
    }
    out += hex;
  }
  return out;
}

CpuSet::Native::Native() : set_(CPU_ALLOC(k_max_cpus)) {
  if (!set_) {
    throw std::bad_alloc();
  }
  CPU_ZERO_S(size(), set_.get());
}

size_t CpuSet::Native::size() {
  return CPU_ALLOC_SIZE(k_max_cpus);
}

CpuSet::Native CpuSet::native() const {
  Native n;
  for (const unsigned c : cpus()) {
    CPU_SET_S(c, Native::size(), n.get());
  }
  return n;
}

CpuSet CpuSet::from_native(const Native &n) {
  CpuSet out;
  for (unsigned c = 0; c < k_max_cpus; ++c) {
    if (CPU_ISSET_S(c, Native::size(), n.get())) {
      out.set(c);
    }
  }
  return out;
}

Result<CpuSet> parse_cpumask(std::string_view text, std::string_view where) {
  const std::string_view t = trim(text);
  auto bad = [&](const std::string &why) {
    return input_error(std::string(where) + ": invalid cpumask '" + std::string(t.substr(0, 64)) + "': " + why);
  };
  if (t.empty()) {
    return bad("empty");
  }
  CpuSet out;
  unsigned group = 0; // from the right
  size_t end = t.size();
  while (true) {
    const size_t comma = t.rfind(',', end - 1);
    const size_t begin = comma == std::string_view::npos ? 0 : comma + 1;
    const std::string_view chunk = t.substr(begin, end - begin);
    if (chunk.empty() || chunk.size() > 8) {
      return bad("each ','-separated group is 1 to 8 hex digits");
    }
    auto v = parse_int<std::uint32_t>(chunk, 16);
    if (!v) {
      return bad("not hexadecimal");
    }
    for (unsigned b = 0; b < 32; ++b) {
      if (((*v >> b) & 1U) != 0) {
        const unsigned cpu = group * 32 + b;
        if (cpu >= k_max_cpus) {
          return bad("CPU " + std::to_string(cpu) + " is beyond the limit of " + std::to_string(k_max_cpus));
        }
        out.set(cpu);
      }
    }
    if (comma == std::string_view::npos) {
      break;
    }
    end = comma;
    ++group;
  }
  return out;
}

} // namespace mltune
