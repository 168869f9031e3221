// mltunectl pool status|reserve|release|quota  (Documentation/hugepool.rst)
#include "cli.hpp"

#include "mltune/pool.hpp"

#include <cstdint>
#include <iomanip>
#include <limits>
#include <memory>
#include <ostream>

namespace mltune::cli {

namespace {

struct PoolArgs {
  int node = -1;
  std::string size;
};

nlohmann::json node_json(const PoolNode &n) {
  return {{"node", n.node},
          {"reserved", n.reserved},
          {"free", n.free},
          {"mapped", n.mapped},
          {"reserved_bytes", n.reserved * k_pool_page_size},
          {"free_bytes", n.free * k_pool_page_size},
          {"mapped_bytes", n.mapped * k_pool_page_size}};
}

std::string mib(std::uint64_t pages) {
  return std::to_string(pages * (k_pool_page_size >> 20)) + " MiB";
}

void print_node(Context &ctx, const PoolNode &n) {
  if (ctx.json) {
    return ctx.emit(node_json(n));
  }
  *ctx.out << "node " << n.node << ": reserved " << n.reserved << " (" << mib(n.reserved) << "), free " << n.free
           << ", mapped " << n.mapped << "\n";
}

void run_status(Context &ctx) {
  auto st = pool_status(ctx.root());
  if (!st) {
    return ctx.fail(st.error());
  }
  if (ctx.json) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto &n : st->nodes) {
      nodes.push_back(node_json(n));
    }
    nlohmann::json users = nlohmann::json::array();
    for (const auto &u : st->users) {
      users.push_back({{"uid", u.uid}, {"pages", u.pages}, {"bytes", u.pages * k_pool_page_size}});
    }
    return ctx.emit({{"page_size", k_pool_page_size},
                     {"nodes", nodes},
                     {"pmd_mappings", st->pmd_mappings},
                     {"pte_mappings", st->pte_mappings},
                     {"orphaned", st->orphaned},
                     {"pmd_capable", st->pmd_capable},
                     {"user_quota", st->user_quota},
                     {"user_quota_auto", st->user_quota_auto},
                     {"users", users}});
  }
  auto &o = *ctx.out;
  o << "huge-page pool (2 MiB pages)\n"
    << std::left << std::setw(6) << "node" << std::right << std::setw(10) << "reserved" << std::setw(10) << "free"
    << std::setw(10) << "mapped" << std::setw(12) << "reserved"
    << "\n";
  for (const auto &n : st->nodes) {
    o << std::left << std::setw(6) << n.node << std::right << std::setw(10) << n.reserved << std::setw(10) << n.free
      << std::setw(10) << n.mapped << std::setw(12) << mib(n.reserved) << "\n";
  }
  o << "mappings installed: " << st->pmd_mappings << " x 2 MiB, " << st->pte_mappings << " x 4 KiB ("
    << (st->pmd_capable ? "PMD mappings available" : "this kernel maps 4 KiB pages only") << ")\n";
  if (st->orphaned != 0) {
    o << "orphaned: " << st->orphaned << " pages were still in use after unmap and left the pool\n";
  }
  o << "user quota: " << describe_quota(st->user_quota)
    << (st->user_quota_auto ? " (the module's default: half the reserved pages)" : "") << "\n";
  for (const auto &u : st->users) {
    o << "  uid " << u.uid << ": " << u.pages << " pages mapped (" << mib(u.pages) << ")\n";
  }
}

void run_quota(Context &ctx, const std::string &size) {
  const Sysroot root = ctx.root();
  if (size.empty()) {
    auto st = pool_status(root);
    if (!st) {
      return ctx.fail(st.error());
    }
    if (ctx.json) {
      return ctx.emit({{"user_quota", st->user_quota}, {"user_quota_auto", st->user_quota_auto}});
    }
    *ctx.out << "user quota: " << describe_quota(st->user_quota)
             << (st->user_quota_auto ? " (the module's default: half the reserved pages)" : "") << "\n";
    return;
  }
  auto pages = size == "auto" ? Result<std::uint64_t>(k_pool_quota_auto) : parse_pool_size(size);
  if (!pages) {
    return ctx.fail(pages.error());
  }
  if (ctx.dry_run) {
    *ctx.out << "would set the user quota to " << describe_quota(*pages) << "\n";
    return;
  }
  if (auto st = pool_set_user_quota(root, *pages); !st) {
    return ctx.fail(st.error());
  }
  if (ctx.json) {
    return ctx.emit(*pages == k_pool_quota_auto ? nlohmann::json{{"user_quota", "auto"}}
                                                : nlohmann::json{{"user_quota", *pages}});
  }
  *ctx.out << "user quota: " << describe_quota(*pages) << "\n";
}

void run_change(Context &ctx, const PoolArgs &a, bool reserve) {
  std::uint64_t pages = std::numeric_limits<std::uint64_t>::max();
  if (reserve || !a.size.empty()) {
    auto p = parse_pool_size(a.size);
    if (!p) {
      return ctx.fail(p.error());
    }
    pages = *p;
  }
  const Sysroot root = ctx.root();
  if (ctx.dry_run) {
    auto st = pool_status(root);
    if (!st) {
      return ctx.fail(st.error());
    }
    for (const auto &n : st->nodes) {
      if (n.node != a.node) {
        continue;
      }
      const std::uint64_t target = reserve ? pages : n.reserved - std::min(pages, n.free);
      *ctx.out << "would set node " << a.node << " reserved " << n.reserved << " -> " << target << " pages ("
               << mib(target) << ")\n";
      return;
    }
    return ctx.fail(input_error("NUMA node " + std::to_string(a.node) + " has no huge-page pool"));
  }
  auto r = reserve ? pool_reserve(root, a.node, pages) : pool_release(root, a.node, pages);
  if (!r) {
    return ctx.fail(r.error());
  }
  print_node(ctx, *r);
}

} // namespace

void register_pool(CLI::App &app, Context &ctx) {
  auto *p = app.add_subcommand("pool", "Huge-page pool of the mltune module: pinned 2 MiB pages per NUMA node");
  p->require_subcommand(1);

  auto *status = p->add_subcommand("status", "Reserved, free and mapped pages per node, mapping counters");
  status->callback([&ctx] { run_status(ctx); });

  auto ra = std::make_shared<PoolArgs>();
  auto *reserve = p->add_subcommand("reserve", "Set a node's reservation to SIZE (grow or shrink)");
  reserve->add_option("node", ra->node, "NUMA node")->required();
  reserve->add_option("size", ra->size, "2 MiB pages (256) or bytes with K/M/G (512M, 1G)")->required();
  reserve->callback([&ctx, ra] { run_change(ctx, *ra, true); });

  auto la = std::make_shared<PoolArgs>();
  auto *release = p->add_subcommand("release", "Free SIZE of a node's free pages (default: all free pages)");
  release->add_option("node", la->node, "NUMA node")->required();
  release->add_option("size", la->size, "2 MiB pages (256) or bytes with K/M/G (512M, 1G)");
  release->callback([&ctx, la] { run_change(ctx, *la, false); });

  auto qa = std::make_shared<std::string>();
  auto *quota = p->add_subcommand("quota", "Show or set the per-user limit of mapped pool memory (0: none)");
  quota->add_option("size", *qa,
                    "2 MiB pages (256) or bytes with K/M/G (512M, 1G); 0 lifts the limit; auto: the module's "
                    "default (half the reserved pages)");
  quota->callback([&ctx, qa] { run_quota(ctx, *qa); });
}

} // namespace mltune::cli
