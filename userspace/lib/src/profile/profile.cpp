#include "mltune/profile.hpp"

#include "mltune/caches.hpp"
#include "mltune/catalog.hpp"
#include "mltune_knobs_allow.h"
#include "profile/allow.hpp"
#include "profile/profile_phases.hpp"

#include "base/sysroot_fd.hpp"
#include "base/unique_fd.hpp"
#include "mltune/parse.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <utility>

namespace mltune {

namespace fs = std::filesystem;

namespace {

constexpr size_t k_max_include_depth = 16;
// Limits and allowed trees: kmod/include/mltune_knobs_allow.h, shared with the module.
constexpr size_t k_max_value_len = MLTUNE_VALUE_MAX;

bool valid_name(std::string_view n) {
  return profile_name_allowed(n);
}

bool valid_segment(std::string_view s, bool allow_dot) {
  return !s.empty() && s != "." && s != ".." && std::ranges::all_of(s, [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == ':' || c == '+' || (allow_dot && c == '.');
  });
}

bool split_ok(std::string_view key, char sep, bool allow_dot) {
  size_t pos = 0;
  for (;;) {
    const size_t end = key.find(sep, pos);
    if (!valid_segment(key.substr(pos, end == std::string_view::npos ? end : end - pos), allow_dot)) {
      return false;
    }
    if (end == std::string_view::npos) {
      return true;
    }
    pos = end + 1;
  }
}

std::optional<std::string> check_key(KnobKind kind, std::string_view key) {
  if (kind == KnobKind::sysctl) {
    if (key.find('.') == std::string_view::npos || !split_ok(key, '.', false)) {
      return "invalid sysctl name '" + std::string(key) + "' (expected dotted name like vm.swappiness)";
    }
    if (!knob_path_allowed(Knob{kind, std::string(key), {}, false, false, {}, {}}.path())) {
      return "sysctl name '" + std::string(key) + "' is too long";
    }
    return std::nullopt;
  }
  if (!split_ok(key, '/', true)) {
    return "invalid sysfs path '" + std::string(key) + "' (expected a path relative to /sys without '..')";
  }
  if (!knob_path_allowed("/sys/" + std::string(key))) {
    return "sysfs path '" + std::string(key) + "' is outside the allowed subtrees or too long";
  }
  return std::nullopt;
}

} // namespace

#ifndef MLTUNE_PROFILE_DIR
#define MLTUNE_PROFILE_DIR "/usr/share/mltune/profiles"
#endif

std::string_view packaged_profile_dir() {
  return MLTUNE_PROFILE_DIR;
}

std::string Knob::path() const {
  if (kind == KnobKind::sysfs) {
    return "/sys/" + key;
  }
  std::string p = "/proc/sys/" + key;
  std::replace(p.begin() + 10, p.end(), '.', '/');
  return p;
}

std::string_view to_string(KnobCmp c) {
  switch (c) {
  case KnobCmp::exact: return "value";
  case KnobCmp::at_least: return "at_least";
  case KnobCmp::at_most: return "at_most";
  }
  return "?";
}

std::string Knob::wanted() const {
  switch (cmp) {
  case KnobCmp::exact: break;
  case KnobCmp::at_least: return ">= " + value;
  case KnobCmp::at_most: return "<= " + value;
  }
  return value;
}

bool Knob::satisfied_by(std::string_view current) const {
  if (cmp == KnobCmp::exact) {
    return normalize_value(current) == normalize_value(value);
  }
  const auto c = compare_decimal(trim(current), value);
  return c && (cmp == KnobCmp::at_least ? *c >= 0 : *c <= 0);
}

const Knob *Profile::find(std::string_view key) const {
  const auto it = std::ranges::find_if(knobs, [&](const Knob &k) { return k.key == key; });
  return it == knobs.end() ? nullptr : &*it;
}

struct ProfileLoader::Source {
  std::string id;      // identity for cycle detection
  std::string display; // name used in messages
  std::string name;    // profile name (file stem)
  std::string text;
  fs::path dir; // directory for relative includes; empty for built-ins
  // For a profile found by name below the sysroot: its directory as a node
  // path, where includes by name are looked up first (inside the sysroot).
  std::string node_dir;
};

namespace {

// A profile reference is a file path when it has a '/' or ends in ".toml";
// otherwise it is a name.
bool is_profile_path(std::string_view ref) {
  return ref.find('/') != std::string_view::npos || ref.ends_with(".toml");
}

} // namespace

Result<ProfileLoader::Source> ProfileLoader::resolve(std::string_view ref, const Source *from) const {
  const bool is_path = is_profile_path(ref);
  if (is_path) {
    fs::path p(ref);
    if (p.is_relative() && from != nullptr) {
      if (from->dir.empty()) {
        return input_error("cannot include a file path from built-in profile " + from->display);
      }
      p = from->dir / p;
    }
    auto text = detail::read_profile_file(p);
    if (!text) {
      return text.error().kind == Errc::failed ? input_error(text.error().message) : text.error();
    }
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(p, ec);
    return Source{canon.string(), p.string(), p.stem().string(), std::move(*text), p.parent_path(), {}};
  }
  if (!valid_name(ref)) {
    return input_error("invalid profile name '" + std::string(ref) + "'");
  }
  // Where a profile named `ref` may be: beside the including file, then the
  // node's directories.  A node directory is a node path, read inside the
  // sysroot (`host` empty); a file beside a profile given by path is on
  // this machine.
  struct Candidate {
    fs::path host;
    std::string node_dir;
  };
  std::vector<Candidate> candidates;
  const std::string file = std::string(ref) + ".toml";
  if (from != nullptr && !from->node_dir.empty() && sysroot_ != nullptr) {
    candidates.push_back({{}, from->node_dir});
  } else if (from != nullptr && !from->dir.empty()) {
    candidates.push_back({from->dir / file, {}});
  }
  if (sysroot_ != nullptr) {
    for (const std::string_view dir : {k_user_profile_dir, packaged_profile_dir()}) {
      candidates.push_back({{}, std::string(dir)});
    }
  }
  for (const auto &c : candidates) {
    std::error_code ec;
    if (!c.node_dir.empty()) {
      const std::string abs = c.node_dir + "/" + file;
      if (!sysroot_->exists(abs) || sysroot_->is_dir(abs)) {
        continue;
      }
      auto text = detail::read_profile_file(*sysroot_, abs);
      if (!text) {
        return input_error(text.error().message);
      }
      const fs::path host = sysroot_->path(abs);
      return Source{sysroot_->root().string() + ":" + sysroot_->resolve(abs).value_or(abs),
                    host.string(),
                    std::string(ref),
                    std::move(*text),
                    host.parent_path(),
                    c.node_dir};
    }
    if (fs::is_regular_file(c.host, ec)) {
      auto text = detail::read_profile_file(c.host);
      if (!text) {
        return input_error(text.error().message);
      }
      return Source{fs::weakly_canonical(c.host, ec).string(),
                    c.host.string(),
                    std::string(ref),
                    std::move(*text),
                    c.host.parent_path(),
                    {}};
    }
  }
  for (const auto &b : builtin_profiles()) {
    if (b.name == ref) {
      return Source{
          "builtin:" + std::string(ref), std::string(ref) + ".toml", std::string(ref), std::string(b.text), {}, {}};
    }
  }
  std::string known;
  for (const auto &n : list()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  return input_error("unknown profile '" + std::string(ref) + "' (available: " + known + ")");
}

namespace {

// Profiles are printable ASCII, checked on the text before toml++ sees it.
//  - toml++ 3.3 (in Debian 12) reaches __builtin_unreachable in its Unicode
//    whitespace tables for some non-ASCII code points, also inside and after
//    strings of invalid documents (found by fuzz_profile_loader: U+02CF in a
//    key, U+FCFF after a bad token); an ASCII-only document never reaches them.
//  - Its parser recurses once per nesting level ('[', '{' and each dotted key
//    component): a header of 200,000 components overflowed the stack.  Levels
//    are bounded here (k_max_nesting brackets, k_max_dots per line).
//  - A table header broken by a newline ("[\nx]") trips one of its assertions.
//  - Control characters, raw or through escapes ("a\u0001b"), would reach
//    knob values; only \" and \\ escapes are accepted.
// Errors name file:line:column.
class TextCheck {
public:
  TextCheck(std::string_view t, const std::string &display) : t_(t), display_(display) {}

  Status run() {
    for (i_ = 0; i_ < t_.size(); ++i_) {
      const char c = t_[i_];
      if (auto st = byte_ok(c); !st) {
        return st;
      }
      if (c == '\n') {
        if (header_open_) {
          return error("table header not closed on its line");
        }
        newline();
      } else if (c == '#') {
        if (auto st = skip_to_eol(); !st) {
          return st;
        }
      } else if (c == '"' || c == '\'') {
        if (auto st = string(c); !st) {
          return st;
        }
      } else if (c == '[' || c == '{') {
        header_open_ = header_open_ || (c == '[' && depth_ == 0 && at_line_start());
        if (++depth_ > k_max_nesting) {
          return error("nested more than " + std::to_string(k_max_nesting) + " levels deep");
        }
      } else if (c == ']' || c == '}') {
        depth_ -= depth_ > 0 ? 1 : 0;
        header_open_ = header_open_ && depth_ > 0;
      } else if (c == '.' && ++dots_ > k_max_dots) {
        return error("more than " + std::to_string(k_max_dots) + " dotted key components on one line");
      }
    }
    return {};
  }

private:
  static constexpr unsigned k_max_nesting = 32;
  static constexpr unsigned k_max_dots = 32;

  Error error(const std::string &what) const {
    return input_error(display_ + ":" + std::to_string(line_) + ":" + std::to_string(i_ - col0_ + 1) + ": " + what);
  }
  Status byte_ok(char c) const {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      return error("non-ASCII byte; mltune profiles are ASCII");
    }
    if ((u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f) {
      return error("control character; mltune profiles are printable ASCII");
    }
    return {};
  }
  void newline() {
    ++line_;
    col0_ = i_ + 1;
    dots_ = 0;
  }
  [[nodiscard]] bool at_line_start() const { return trim(t_.substr(col0_, i_ - col0_)).empty(); }
  // A comment: its bytes are checked like any other, its brackets and dots are not.
  Status skip_to_eol() {
    while (i_ + 1 < t_.size() && t_[i_ + 1] != '\n') {
      ++i_;
      if (auto st = byte_ok(t_[i_]); !st) {
        return st;
      }
    }
    return {};
  }
  // A basic ("), literal (') or multi-line string starting at i_; leaves i_
  // on its closing quote (or the end of the text: toml++ reports that).
  Status string(char q) {
    const std::string_view triple = q == '"' ? R"(""")" : "'''";
    const bool multi = t_.substr(i_, 3) == triple;
    i_ += multi ? 3 : 1;
    for (; i_ < t_.size(); ++i_) {
      const char c = t_[i_];
      if (auto st = byte_ok(c); !st) {
        return st;
      }
      if (c == '\n') {
        if (!multi) {
          return {}; // toml++ reports the unterminated string
        }
        newline();
      } else if (c == '\\' && q == '"') {
        const char e = i_ + 1 < t_.size() ? t_[i_ + 1] : '\0';
        if (e != '"' && e != '\\') {
          return error(std::string(R"(escape '\)") + (e >= 0x20 && e < 0x7f ? std::string(1, e) : std::string()) +
                       R"('; only \" and \\ are accepted in mltune profiles)");
        }
        ++i_;
      } else if (c == q && (!multi || t_.substr(i_, 3) == triple)) {
        i_ += multi ? 2 : 0;
        return {};
      }
    }
    return {};
  }

  std::string_view t_;
  const std::string &display_;
  size_t i_ = 0;
  size_t line_ = 1;
  size_t col0_ = 0; // offset of the current line's first byte
  unsigned depth_ = 0;
  unsigned dots_ = 0;
  bool header_open_ = false;
};

Status check_ascii(std::string_view t, const std::string &display) {
  return TextCheck(t, display).run();
}

} // namespace

std::string HugePageSetting::size() const {
  return page_kib % (1024ULL * 1024) == 0 ? std::to_string(page_kib >> 20U) + "G"
         : page_kib % 1024 == 0           ? std::to_string(page_kib >> 10U) + "M"
                                          : std::to_string(page_kib) + "K";
}

std::string HugePageSetting::key() const {
  return "node" + std::to_string(node) + " " + size();
}

namespace detail {

// A profile file: a regular file (not a FIFO that never ends, not /dev/zero)
// of at most k_max_profile_bytes, read whole.
Result<std::string> read_profile_file(const fs::path &p) {
  return read_profile_fd(UniqueFd(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)), p);
}

Result<std::string> read_profile_file(const Sysroot &root, std::string_view abs) {
  return read_profile_fd(detail::open_node(root, abs, O_RDONLY | O_NONBLOCK | O_NOCTTY), root.path(abs));
}

Result<std::string> read_profile_fd(const UniqueFd &fd, const fs::path &p) {
  if (!fd) {
    return sys_error(p.string() + ": cannot open", errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return sys_error(p.string() + ": stat", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return input_error(p.string() + ": not a regular file");
  }
  if (std::cmp_greater(st.st_size, k_max_profile_bytes)) {
    return input_error(p.string() + ": " + std::to_string(st.st_size) + " bytes; a profile is at most " +
                       std::to_string(k_max_profile_bytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return sys_error(p.string() + ": read", errno);
    }
    if (n == 0) {
      break;
    }
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

Result<toml::table> parse_profile_text(const std::string &text, const std::string &display) {
  if (auto st = check_ascii(text, display); !st) {
    return st.error();
  }
  try {
    return toml::parse(text, display);
  } catch (const toml::parse_error &e) {
    const auto line = e.source().begin.line;
    const std::string_view what = e.description();
    // toml++ reports a key given twice as a redefinition, with the key
    // garbled ('"vmvm.swappiness" '): name the key as the file spells it.
    if (what.find("cannot redefine existing") != std::string_view::npos && line > 0) {
      std::string_view rest = text;
      for (size_t n = 1; n < line && !rest.empty(); ++n) {
        const auto nl = rest.find('\n');
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      }
      const std::string_view at = rest.substr(0, rest.find('\n'));
      const std::string_view key = trim(at.substr(0, at.find('=')));
      if (!key.empty()) {
        return input_error(display + ":" + std::to_string(line) + ": " + std::string(key) +
                           " is defined twice in its table (a key may appear once)");
      }
    }
    return input_error(display + ":" + std::to_string(line) + ":" + std::to_string(e.source().begin.column) + ": " +
                       std::string(what));
  }
}

Status check_include(const std::vector<std::string> &stack, const std::string &id, const std::string &at) {
  if (std::ranges::find(stack, id) != stack.end()) {
    std::string chain;
    for (const auto &s : stack) {
      chain += s + " -> ";
    }
    return input_error(at + ": include cycle: " + chain + id);
  }
  if (stack.size() >= k_max_include_depth) {
    return input_error(at + ": includes nested deeper than " + std::to_string(k_max_include_depth));
  }
  return {};
}

namespace {

// The value of a parsed knob: one line, normalized, within the catalog's range.
Status check_knob_value(const Knob &knob, const std::string &at) {
  const std::string &key = knob.key;
  // Each way a value can be wrong, named (the limit with its number).
  if (knob.value.size() > k_max_value_len) {
    return input_error(at + ": " + key + ": value is " + std::to_string(knob.value.size()) + " bytes, more than the " +
                       std::to_string(k_max_value_len) + "-byte limit of a knob value");
  }
  if (knob.value.empty()) {
    return input_error(at + ": " + key + ": value is empty");
  }
  if (std::ranges::any_of(knob.value, [](char c) { return c == '\n' || c == '\0'; })) {
    return input_error(at + ": " + key + ": value must be one line (a newline or NUL byte in it)");
  }
  if (normalize_value(knob.value) != knob.value) {
    return input_error(at + ": " + key + ": value has extra spaces (leading, trailing or doubled): '" + knob.value +
                       "'");
  }
  if (const auto *entry = catalog_find(key)) {
    if (auto err = catalog_check(*entry, knob.value)) {
      return input_error(at + ": " + key + ": " + *err);
    }
  }
  return {};
}

} // namespace

Result<Knob> parse_knob(KnobKind kind, const toml::key &k, const toml::node &v, const std::string &display) {
  const std::string at = where(display, k.source());
  const std::string key(k.str());
  if (auto err = check_key(kind, key)) {
    return input_error(at + ": " + *err);
  }
  const auto *spec = v.as_table();
  if (spec == nullptr) {
    return input_error(at + ": " + key + ": expected { value = ..., reason = \"...\" }");
  }
  Knob knob{kind, key, {}, false, false, {}, at};
  std::string value_key; // which of value, at_least, at_most was given
  for (const auto &[fk, fv] : *spec) {
    const std::string fat = where(display, fk.source());
    if (fk == "value" || fk == "at_least" || fk == "at_most") {
      if (!value_key.empty()) {
        const std::string other(fk.str());
        return input_error(fat + ": " + key + ": give one of value, at_least, at_most (not " +
                           std::min(other, value_key) + " and " + std::max(other, value_key) + ")");
      }
      value_key = fk.str();
      knob.cmp = fk == "value" ? KnobCmp::exact : fk == "at_least" ? KnobCmp::at_least : KnobCmp::at_most;
      if (const auto *i = fv.as_integer()) {
        knob.value = std::to_string(i->get());
      } else if (const auto *s = fv.as_string(); s != nullptr && (knob.cmp == KnobCmp::exact || is_decimal(s->get()))) {
        knob.value = s->get(); // a string bound: digits beyond TOML's 64-bit integers
      } else {
        return input_error(fat + ": " + key + ": " + value_key +
                           (knob.cmp == KnobCmp::exact ? " must be an integer or a string" : " must be an integer"));
      }
    } else if (fk == "optional") {
      if (fv.is_boolean()) {
        knob.optional = *fv.value<bool>();
        knob.if_present = false;
      } else if (fv.is_string() && *fv.value<std::string>() == "missing") {
        knob.optional = false;
        knob.if_present = true;
      } else {
        return input_error(fat + ": " + key + ": optional must be true, false or \"missing\"");
      }
    } else if (fk == "reason") {
      if (!fv.is_string()) {
        return input_error(fat + ": " + key + ": reason must be a string");
      }
      knob.reason = *fv.value<std::string>();
    } else {
      return input_error(fat + ": " + key + ": unknown key '" + std::string(fk.str()) +
                         "' (expected value, at_least, at_most, optional, reason)");
    }
  }
  if (value_key.empty()) {
    return input_error(at + ": " + key + ": missing value (or at_least, at_most)");
  }
  if (auto st = check_knob_value(knob, at); !st) {
    return st.error();
  }
  return knob;
}

Result<std::vector<KnobEntry>> parse_knobs(const toml::table &doc, const std::string &display) {
  std::vector<KnobEntry> entries;
  for (const auto kind : {KnobKind::sysctl, KnobKind::sysfs}) {
    const auto *tbl = doc[kind == KnobKind::sysctl ? "sysctl" : "sysfs"].as_table();
    if (tbl == nullptr) {
      continue;
    }
    for (const auto &[k, v] : *tbl) {
      auto knob = parse_knob(kind, k, v, display);
      if (!knob) {
        return knob.error();
      }
      entries.push_back({std::move(*knob), k.source().begin.line});
    }
  }
  std::ranges::stable_sort(entries, [](const KnobEntry &a, const KnobEntry &b) { return a.line < b.line; });
  return entries;
}

void merge_knobs(std::vector<KnobEntry> entries, Profile &out) {
  for (auto &e : entries) {
    auto it = std::ranges::find_if(out.knobs, [&](const Knob &k) { return k.key == e.knob.key; });
    if (it != out.knobs.end()) {
      *it = std::move(e.knob);
    } else {
      out.knobs.push_back(std::move(e.knob));
    }
  }
}

} // namespace detail

namespace {

// Parsed documents by display name and text: a slot of the current Caches
// (mltune/caches.hpp).  Bounded by the profiles of the node (a few dozen
// small files); a new text of the same name replaces the old.
struct ParsedProfiles {
  std::map<std::string, std::pair<std::string, std::shared_ptr<const toml::table>>, std::less<>> docs;
};

Result<std::shared_ptr<const toml::table>> parsed(const std::string &text, const std::string &display) {
  ParsedProfiles *cache = Caches::current() != nullptr ? &Caches::current()->slot<ParsedProfiles>() : nullptr;
  if (cache != nullptr) {
    if (auto it = cache->docs.find(display); it != cache->docs.end() && it->second.first == text) {
      return it->second.second;
    }
  }
  auto doc = detail::parse_profile_text(text, display);
  if (!doc) {
    return doc.error();
  }
  auto p = std::make_shared<const toml::table>(std::move(*doc));
  if (cache != nullptr) {
    cache->docs[display] = {text, p};
  }
  return p;
}

} // namespace

Status ProfileLoader::load_into(const Source &src, Profile &out, std::vector<std::string> &stack) const {
  using namespace detail;
  auto parsed_doc = parsed(src.text, src.display);
  if (!parsed_doc) {
    return parsed_doc.error();
  }
  const std::shared_ptr<const toml::table> &doc = *parsed_doc;
  stack.push_back(src.id);
  // Pass 1: schema of the top level.
  auto includes = check_top_level(*doc, src.display);
  if (!includes) {
    return includes.error();
  }
  // Pass 2: includes, depth first, so this file's knobs override them.
  for (const auto &[ref, region] : *includes) {
    const std::string at = where(src.display, region);
    auto inc = resolve(ref, &src);
    if (!inc) {
      return input_error(at + ": include '" + ref + "': " + inc.error().message);
    }
    if (auto st = check_include(stack, inc->id, at); !st) {
      return st;
    }
    if (auto st = load_into(*inc, out, stack); !st) {
      return st;
    }
  }
  // Pass 3: knobs, in file order; then the other sections.
  auto entries = parse_knobs(*doc, src.display);
  if (!entries) {
    return entries.error();
  }
  merge_knobs(std::move(*entries), out);
  if (auto st = merge_sections(*doc, src.display, out); !st) {
    return st;
  }
  out.sources.push_back(src.display);
  stack.pop_back();
  return {};
}

Result<Profile> ProfileLoader::load(std::string_view name_or_path) const {
  auto src = resolve(name_or_path, nullptr);
  if (!src) {
    return src.error();
  }
  Profile p;
  p.name = src->name;
  if (is_profile_path(name_or_path)) {
    if (!valid_name(src->name)) {
      return input_error("profile file " + src->display + ": its name '" + src->name +
                         "' (the file name without .toml) is not a profile name: letters, digits, '-' and '_', "
                         "starting with a letter or digit, shorter than " +
                         std::to_string(MLTUNE_NAME_MAX) + " characters");
    }
    std::error_code ec;
    const fs::path abs = fs::absolute(fs::path(name_or_path), ec);
    p.file = (ec ? fs::path(name_or_path) : abs).lexically_normal().string();
  }
  std::vector<std::string> stack;
  if (auto st = load_into(*src, p, stack); !st) {
    return st.error();
  }
  return p;
}

Result<Profile> ProfileLoader::load_text(std::string_view text, std::string_view display) const {
  const Source src{"text:" + std::string(display),
                   std::string(display),
                   fs::path(display).stem().string(),
                   std::string(text),
                   {},
                   {}};
  Profile p;
  p.name = src.name;
  std::vector<std::string> stack;
  if (auto st = load_into(src, p, stack); !st) {
    return st.error();
  }
  return p;
}

std::vector<std::string> ProfileLoader::list() const {
  std::vector<std::string> names;
  for (const auto &b : builtin_profiles()) {
    names.emplace_back(b.name);
  }
  if (sysroot_ != nullptr) {
    for (const std::string_view dir : {k_user_profile_dir, packaged_profile_dir()}) {
      for (const auto &f : sysroot_->list_dir(dir)) {
        if (f.ends_with(".toml") && valid_name(f.substr(0, f.size() - 5))) {
          names.push_back(f.substr(0, f.size() - 5));
        }
      }
    }
  }
  std::ranges::sort(names);
  const auto dups = std::ranges::unique(names);
  names.erase(dups.begin(), dups.end());
  return names;
}

} // namespace mltune
