// BootStep (boot.hpp) on a fixture of a real machine: the [boot]
// parameters written as the GRUB drop-in by a switch, pending until the next
// boot, put back on a failure after it, removed by off.
#include "mltune/boot.hpp"
#include "mltune/node.hpp"

#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

using namespace mltune;

// [boot]: the switch writes the GRUB drop-in (pending until the next boot),
// a failure after it puts the old one back, off removes it.
TEST(BootStep, ParametersAreAStepOfTheSwitch) {
  test::FixtureCopy hgx("hgx-2s-8gpu");
  const Sysroot r = hgx.root();
  auto p = ProfileLoader(&r).load_text("include = [\"training\"]\n[boot]\nisolate = \"feeder\"\n", "site.toml");
  ASSERT_TRUE(p) << p.error().message;
  p->name = "site";
  BootStep boot(*p, r);
  const std::array<Step *, 1> steps{&boot};
  ASSERT_TRUE(run_transaction(steps, {}));
  EXPECT_TRUE(boot.changed());
  const std::string dropin = std::string(k_grub_dropin);
  auto text = r.read(dropin);
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("nohz_full="), std::string::npos) << *text;
  auto st = node_status(r);
  ASSERT_TRUE(st) << st.error().message;
  const auto b = std::find_if(st->domains.begin(), st->domains.end(), [](const auto &d) { return d.domain == "boot"; });
  ASSERT_NE(b, st->domains.end());
  EXPECT_EQ(b->state, "pending-reboot") << b->detail;

  // A failure after it: the drop-in as it was (here: none).
  hgx.set(dropin, "# the site's own\n");
  TransactionOptions fail;
  fail.fail_after = "boot";
  BootStep again(*p, r);
  const std::array<Step *, 1> steps2{&again};
  ASSERT_FALSE(run_transaction(steps2, fail));
  EXPECT_EQ(r.read(dropin).value_or(""), "# the site's own\n");

  auto off = node_off(r);
  ASSERT_TRUE(off);
  EXPECT_FALSE(r.exists(dropin));
}
