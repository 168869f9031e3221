// cgroup v2 partitions (see base/cgroup.hpp).
#include "base/cgroup.hpp"

#include "mltune/parse.hpp"

#include <cerrno>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace mltune::cgroup {

std::string path(std::string_view cg, std::string_view file) {
  std::string p(k_mount);
  if (cg != "/") {
    p += cg;
  }
  if (!file.empty()) {
    p += '/';
    p += file;
  }
  return p;
}

Status make(const Sysroot &root, std::string_view cg) {
  const std::string dir = path(cg);
  if (root.is_dir(dir)) {
    return {};
  }
  return root.make_dirs(dir);
}

Status remove(const Sysroot &root, std::string_view cg) {
  const std::string dir = path(cg);
  return root.remove_dir(dir);
}

Result<bool> enable_cpuset(const Sysroot &root) {
  const std::string ctl_file = path("/", "cgroup.subtree_control");
  auto ctl = root.read(ctl_file);
  if (!ctl) {
    return with_context(ctl.error(), "cgroup v2 is not mounted at " + std::string(k_mount));
  }
  if (ctl->find("cpuset") != std::string::npos) {
    return false;
  }
  if (auto st = root.write_value(ctl_file, "+cpuset"); !st) {
    return st.error();
  }
  return true;
}

Result<std::string> set_partition(const Sysroot &root, std::string_view cg, std::string_view type) {
  const std::string file = path(cg, "cpuset.cpus.partition");
  auto prs = root.read(file);
  if (!prs || trim(*prs) != type) {
    if (auto st = root.write_value(file, type); !st) {
      return st.error();
    }
    prs = root.read(file);
  }
  if (!prs) {
    return prs.error();
  }
  return std::string(trim(*prs));
}

bool is_valid(std::string_view state, std::string_view type) {
  return state.starts_with(type) && state.find("invalid") == std::string_view::npos;
}

Status clear_partition(const Sysroot &root, std::string_view cg) {
  return root.write_value(path(cg, "cpuset.cpus.partition"), "member");
}

std::string of_task(const Sysroot &root, std::string_view task_dir) {
  auto text = root.read(std::string(task_dir) + "/cgroup");
  if (!text) {
    return "";
  }
  for (auto line : split_lines(*text)) {
    if (line.starts_with("0::")) {
      return std::string(trim(line.substr(3)));
    }
  }
  return "";
}

bool is_within(std::string_view cg, std::string_view ancestor) {
  if (ancestor == "/" || cg == ancestor) {
    return true;
  }
  return cg.starts_with(ancestor) && cg.size() > ancestor.size() && cg[ancestor.size()] == '/';
}

std::map<std::uint64_t, std::string> by_id(const Sysroot &root) {
  namespace fs = std::filesystem;
  std::map<std::uint64_t, std::string> out;
  const fs::path top = root.path(k_mount);
  struct stat st {};
  if (::stat(top.c_str(), &st) != 0) {
    return out;
  }
  out[st.st_ino] = "/";
  std::error_code ec;
  for (fs::recursive_directory_iterator it(top, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) {
      continue;
    }
    if (::stat(it->path().c_str(), &st) == 0) {
      out[st.st_ino] = "/" + fs::relative(it->path(), top, ec).string();
    }
  }
  return out;
}

} // namespace mltune::cgroup
