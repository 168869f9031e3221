// /proc/PID/stat parsing (see base/proc.hpp).
#include "base/proc.hpp"

#include "base/dirents.hpp"
#include "base/sysroot_fd.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

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

const CounterRow *CounterTable::row(std::string_view label) const {
  const auto it = std::ranges::find_if(rows, [&](const CounterRow &r) { return r.label == label; });
  return it == rows.end() ? nullptr : &*it;
}

std::optional<std::uint64_t> CounterTable::count(std::string_view label, unsigned cpu) const {
  const auto *r = row(label);
  const auto col = std::ranges::find(cpus, cpu);
  if (r == nullptr || col == cpus.end()) {
    return std::nullopt;
  }
  return r->counts[static_cast<size_t>(col - cpus.begin())];
}

Result<CounterTable> parse_counters(std::string_view text, std::string_view what) {
  const auto lines = split_lines(text);
  CounterTable t;
  if (!lines.empty()) {
    for (const auto w : split_words(lines[0])) {
      if (w.starts_with("CPU")) {
        if (auto c = parse_int<unsigned>(w.substr(3))) {
          t.cpus.push_back(*c);
        }
      }
    }
  }
  if (t.cpus.empty()) {
    return failure(std::string(what) + ": no CPU columns in its first line '" +
                   std::string(lines.empty() ? std::string_view() : lines[0]) + "'");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto colon = lines[i].find(':');
    if (colon == std::string_view::npos) {
      continue;
    }
    const auto words = split_words(lines[i].substr(colon + 1));
    if (words.size() < t.cpus.size()) {
      continue;
    }
    CounterRow r;
    r.label = trim(lines[i].substr(0, colon));
    for (size_t c = 0; c < t.cpus.size(); ++c) {
      auto v = parse_int<std::uint64_t>(words[c]);
      if (!v) {
        break;
      }
      r.counts.push_back(*v);
    }
    if (r.counts.size() != t.cpus.size()) {
      continue;
    }
    r.desc.assign(words.begin() + static_cast<std::ptrdiff_t>(t.cpus.size()), words.end());
    t.rows.push_back(std::move(r));
  }
  return t;
}

std::vector<int> pids(const std::vector<std::string> &names) {
  std::vector<int> out;
  for (const auto &n : names) {
    if (auto v = parse_int<int>(n); v && *v > 0) {
      out.push_back(*v);
    }
  }
  std::ranges::sort(out);
  return out;
}

namespace {

// The numeric entries of the directory `fd`.
std::vector<int> numeric_entries(int fd) {
  std::vector<int> out;
  detail::for_each_dirent(fd, [&](std::string_view name) {
    if (auto v = parse_int<int>(name); v && *v > 0) {
      out.push_back(*v);
    }
  });
  std::ranges::sort(out);
  return out;
}

// A small procfs file relative to `dir`: one read (procfs returns a comm or
// stat line whole); nullopt when it cannot be opened or read.
std::optional<std::string> read_at(int dir, const std::string &rel, size_t max) {
  const UniqueFd fd(::openat(dir, rel.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return std::nullopt;
  }
  std::string out(max, '\0');
  ssize_t n = 0;
  do {
    n = ::read(fd.get(), out.data(), out.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return std::nullopt;
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string strip_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') {
    s.pop_back();
  }
  return s;
}

} // namespace

std::vector<TaskName> scan_task_names(const Sysroot &root) {
  std::vector<TaskName> out;
  const UniqueFd proc = detail::open_node(root, "/proc", O_RDONLY | O_DIRECTORY);
  if (!proc) {
    return out;
  }
  for (const int pid : numeric_entries(proc.get())) {
    const UniqueFd task(
        ::openat(proc.get(), (std::to_string(pid) + "/task").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!task) {
      continue; // exited
    }
    for (const int tid : numeric_entries(task.get())) {
      if (auto comm = read_at(task.get(), std::to_string(tid) + "/comm", 64)) {
        out.push_back({pid, tid, strip_newline(std::move(*comm))});
      }
    }
  }
  return out;
}

std::filesystem::path real_path(const std::filesystem::path &p, std::error_code &ec) {
  ec.clear();
  auto host = Sysroot("/").resolve(std::filesystem::absolute(p).string());
  if (!host) {
    ec = std::error_code(errno != 0 ? errno : ENOENT, std::generic_category());
    return {};
  }
  return *host;
}

namespace {
// The slot of Caches that install_task_name_source() sets.
struct TaskNameSlot {
  TaskNameSource *source = nullptr;
};
} // namespace

void install_task_name_source(Caches &caches, TaskNameSource *source) {
  caches.slot<TaskNameSlot>().source = source;
}

std::vector<TaskName> task_names(const Sysroot &root) {
  const Caches *c = Caches::current();
  const TaskNameSlot *slot = c != nullptr ? c->find<TaskNameSlot>() : nullptr;
  auto named = slot != nullptr && slot->source != nullptr ? slot->source->names(root) : std::nullopt;
  if (!named) {
    return scan_task_names(root);
  }
  std::sort(named->begin(), named->end(),
            [](const TaskName &a, const TaskName &b) { return a.pid != b.pid ? a.pid < b.pid : a.tid < b.tid; });
  return std::move(*named);
}

} // namespace mltune::proc
