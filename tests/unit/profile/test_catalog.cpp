#include "mltune/catalog.hpp"
#include "mltune/profile.hpp"

#include <gtest/gtest.h>

using namespace mltune;

TEST(Catalog, EveryBuiltinKnobIsCataloguedAndValid) {
  const ProfileLoader loader;
  for (const auto &b : builtin_profiles()) {
    auto p = loader.load(b.name);
    ASSERT_TRUE(p) << p.error().message;
    for (const auto &k : p->knobs) {
      const auto *e = catalog_find(k.key);
      ASSERT_NE(e, nullptr) << k.key;
      EXPECT_FALSE(catalog_check(*e, k.value).has_value()) << k.key;
      EXPECT_FALSE(e->impact.empty());
    }
  }
}

TEST(Catalog, Checks) {
  const auto *s = catalog_find("vm.swappiness");
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(catalog_check(*s, "200"));
  EXPECT_TRUE(catalog_check(*s, "-1"));
  EXPECT_TRUE(catalog_check(*s, "1x"));
  EXPECT_TRUE(catalog_check(*s, "99999999999999999999999"));
  const auto *thp = catalog_find("kernel/mm/transparent_hugepage/defrag");
  ASSERT_NE(thp, nullptr);
  EXPECT_FALSE(catalog_check(*thp, "defer+madvise"));
  EXPECT_TRUE(catalog_check(*thp, "defer+"));
  const auto *cc = catalog_find("net.ipv4.tcp_congestion_control");
  ASSERT_NE(cc, nullptr);
  EXPECT_TRUE(catalog_check(*cc, "a b"));
  EXPECT_EQ(catalog_find("nope"), nullptr);
}
