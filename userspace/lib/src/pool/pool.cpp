// Huge-page pool: sysfs state and /dev/mltune buffers (see pool.hpp).
#include "mltune/pool.hpp"

#include "base/unique_fd.hpp"
#include "mltune/parse.hpp"

#include <linux/mltune.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

static_assert(mltune::k_pool_page_size == MLTUNE_HUGEPOOL_PAGE_SIZE);

namespace mltune {

namespace {

constexpr std::string_view k_dir = "/sys/kernel/mltune/hugepool";

std::string node_path(int node, std::string_view file) {
  return std::string(k_dir) + "/node" + std::to_string(node) + "/" + std::string(file);
}

Result<std::uint64_t> read_u64(const Sysroot &root, const std::string &abs) {
  auto v = root.read_value(abs);
  if (!v) {
    return v.error();
  }
  const auto n = parse_int<std::uint64_t>(*v);
  if (!n) {
    return failure(abs + ": unexpected content '" + *v + "'");
  }
  return *n;
}

Result<PoolNode> read_node(const Sysroot &root, int node) {
  PoolNode n;
  n.node = node;
  for (auto [file, field] : {std::pair{"reserved", &n.reserved}, {"free", &n.free}, {"mapped", &n.mapped}}) {
    auto v = read_u64(root, node_path(node, file));
    if (!v) {
      return v.error();
    }
    *field = *v;
  }
  return n;
}

Status check_node(const Sysroot &root, int node) {
  if (!root.is_dir(k_dir)) {
    return failure(std::string(k_dir) + " missing: the mltune module is not loaded", ENOENT);
  }
  if (node < 0 || !root.is_dir(std::string(k_dir) + "/node" + std::to_string(node))) {
    return input_error("NUMA node " + std::to_string(node) + " has no huge-page pool");
  }
  return {};
}

Result<PoolNode> set_target(const Sysroot &root, int node, std::uint64_t pages) {
  if (auto c = check_node(root, node); !c) {
    return c.error();
  }
  auto w = root.write_value(node_path(node, "reserved"), std::to_string(pages));
  auto after = read_node(root, node);
  if (!after) {
    return after.error();
  }
  if (!w) {
    Error e = w.error();
    const std::string got = "node " + std::to_string(node) + ": pool has " + std::to_string(after->reserved) + " of " +
                            std::to_string(pages) + " pages asked for";
    if (e.sys_errno == ENOMEM) {
      e.message = got + " (the kernel could not supply more 2 MiB pages)";
    } else if (e.sys_errno == EBUSY) {
      e.message = got + " (" + std::to_string(after->mapped) + " pages are mapped)";
    }
    return e;
  }
  return *after;
}

} // namespace

Result<PoolStatus> pool_status(const Sysroot &root) {
  if (!root.is_dir(k_dir)) {
    return failure(std::string(k_dir) + " missing: the mltune module is not loaded", ENOENT);
  }
  PoolStatus st;
  std::vector<int> ids;
  for (const auto &name : root.list_dir(k_dir)) {
    if (!name.starts_with("node")) {
      continue;
    }
    if (const auto id = parse_int<int>(std::string_view(name).substr(4)); id && *id >= 0) {
      ids.push_back(*id);
    }
  }
  std::ranges::sort(ids);
  for (const int id : ids) {
    auto n = read_node(root, id);
    if (!n) {
      return n.error();
    }
    st.nodes.push_back(*n);
  }
  for (auto [file, field] :
       {std::pair{"pmd_mappings", &st.pmd_mappings}, {"pte_mappings", &st.pte_mappings}, {"orphaned", &st.orphaned}}) {
    auto v = read_u64(root, std::string(k_dir) + "/" + file);
    if (!v) {
      return v.error();
    }
    *field = *v;
  }
  auto cap = read_u64(root, std::string(k_dir) + "/pmd_capable");
  st.pmd_capable = cap && *cap == 1;
  // Per-user accounting, "UID PAGES" lines (absent from older modules).
  if (auto quota = read_u64(root, std::string(k_dir) + "/user_quota")) {
    st.user_quota = *quota;
  }
  if (auto a = read_u64(root, std::string(k_dir) + "/user_quota_auto")) {
    st.user_quota_auto = *a == 1;
  }
  if (auto users = root.read(std::string(k_dir) + "/users")) {
    std::string_view rest = *users;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      const std::string_view line = trim(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      if (line.empty()) {
        continue;
      }
      const size_t sp = line.find(' ');
      const auto uid = parse_int<std::uint32_t>(line.substr(0, sp));
      const auto pages = sp == std::string_view::npos ? std::nullopt : parse_int<std::uint64_t>(line.substr(sp + 1));
      if (!uid || !pages) {
        return failure(std::string(k_dir) + "/users: unexpected line '" + std::string(line) + "'");
      }
      st.users.push_back({*uid, *pages});
    }
  }
  return st;
}

Status pool_set_user_quota(const Sysroot &root, std::uint64_t pages) {
  const std::string file = std::string(k_dir) + "/user_quota";
  if (!root.is_dir(k_dir)) {
    return failure(std::string(k_dir) + " missing: the mltune module is not loaded", ENOENT);
  }
  if (!root.exists(file)) {
    return failure(file + " missing: the loaded mltune module has no per-user quota (too old)", ENOENT);
  }
  return root.write_value(file, pages == k_pool_quota_auto ? std::string("auto") : std::to_string(pages));
}

std::string describe_quota(std::uint64_t pages) {
  if (pages == k_pool_quota_auto) {
    return "auto (the module's default: half the reserved pages)";
  }
  if (pages == 0) {
    return "none";
  }
  return std::to_string(pages) + " pages (" + std::to_string(pages * (k_pool_page_size >> 20)) + " MiB)";
}

Result<std::uint64_t> parse_pool_size(std::string_view text) {
  const std::string_view orig = text;
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    default: break;
    }
  }
  if (shift != 0) {
    text.remove_suffix(1);
  }
  const auto parsed = parse_int<std::uint64_t>(text);
  if (!parsed) {
    return input_error("bad pool size '" + std::string(orig) + "': want 2 MiB pages (256) or 512M, 1G, ...");
  }
  const std::uint64_t v = *parsed;
  if (shift == 0) {
    return v;
  }
  if (v > (std::numeric_limits<std::uint64_t>::max() >> shift) || ((v << shift) % k_pool_page_size) != 0) {
    return input_error("bad pool size '" + std::string(orig) + "': not a multiple of 2 MiB");
  }
  return (v << shift) / k_pool_page_size;
}

Result<PoolNode> pool_reserve(const Sysroot &root, int node, std::uint64_t pages) {
  return set_target(root, node, pages);
}

Result<PoolNode> pool_release(const Sysroot &root, int node, std::uint64_t pages) {
  if (auto c = check_node(root, node); !c) {
    return c.error();
  }
  auto now = read_node(root, node);
  if (!now) {
    return now.error();
  }
  const std::uint64_t drop = std::min(pages, now->free);
  return set_target(root, node, now->reserved - drop);
}

PoolBuffer::~PoolBuffer() {
  reset();
}

PoolBuffer::PoolBuffer(PoolBuffer &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      node_(std::exchange(other.node_, -1)) {}

PoolBuffer &PoolBuffer::operator=(PoolBuffer &&other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    node_ = std::exchange(other.node_, -1);
  }
  return *this;
}

void PoolBuffer::reset() {
  if (data_ != nullptr) {
    ::munmap(data_, size_);
  }
  data_ = nullptr;
  size_ = 0;
  node_ = -1;
}

void *PoolBuffer::release() {
  void *p = std::exchange(data_, nullptr);
  size_ = 0;
  node_ = -1;
  return p;
}

Result<PoolBuffer> allocate(int node, std::size_t bytes, bool populate) {
  if (bytes == 0) {
    return input_error("allocate: zero bytes");
  }
  if (node < 0) {
    return input_error("allocate: bad NUMA node " + std::to_string(node));
  }
  if (bytes > std::numeric_limits<std::size_t>::max() - k_pool_page_size) {
    return input_error("allocate: size too large");
  }
  const std::size_t len = (bytes + k_pool_page_size - 1) / k_pool_page_size * k_pool_page_size;
  UniqueFd fd(::open("/dev/mltune", O_RDWR | O_CLOEXEC));
  if (!fd) {
    return sys_error("/dev/mltune: open", errno);
  }
  void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd.get(),
                   static_cast<off_t>(MLTUNE_HUGEPOOL_MMAP_OFFSET(static_cast<unsigned>(node))));
  const int err = errno;
  fd.reset(); // the mapping keeps the buffer and the module
  if (p == MAP_FAILED) {
    const std::string what = "allocate " + std::to_string(len >> 20) + " MiB on node " + std::to_string(node);
    if (err == ENOMEM) {
      return failure(what + ": not enough free pool pages", ENOMEM);
    }
    if (err == EDQUOT) {
      return failure(what + ": over this user's pool quota (hugepool/user_quota)", EDQUOT);
    }
    if (err == EINVAL) {
      Error e = input_error(what + ": node has no huge-page pool");
      e.sys_errno = EINVAL;
      return e;
    }
    return sys_error(what, err);
  }
  return PoolBuffer(p, len, node);
}

} // namespace mltune
