// Unit tests of each phase of the profile loader's load_into
// (profile/profile_phases.hpp) on TOML text: parsing, the top-level schema,
// include checks, knobs and their merge, and the [nic]/[sched]/description
// sections.
#include "profile/profile_phases.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

using namespace mltune;
using namespace mltune::detail;

namespace {

toml::table doc_of(const std::string &text) {
  auto d = parse_profile_text(text, "t.toml");
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d.ok() ? std::move(*d) : toml::table{}; // a copy would lose the source regions
}

std::string error_of(const Status &st) {
  return st.ok() ? std::string("(ok)") : st.error().message;
}

template <class T> std::string error_of(const Result<T> &r) {
  return r.ok() ? std::string("(ok)") : r.error().message;
}

} // namespace

TEST(ProfilePhases, ParseRefusesNonAsciiAndBadToml) {
  EXPECT_TRUE(parse_profile_text("description = \"x\"\n", "t.toml").ok());
  const auto na = parse_profile_text("a = 1\nb = \"\xc3\xa9\"\n", "t.toml");
  EXPECT_EQ(error_of(na), "t.toml:2:6: non-ASCII byte; mltune profiles are ASCII");
  const auto bad = parse_profile_text("a = \n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, Errc::input);
  EXPECT_EQ(bad.error().message.rfind("t.toml:1:", 0), 0U);
  // A key given twice: named as the file spells it, not as toml++ garbles it.
  EXPECT_EQ(error_of(parse_profile_text("[sysctl]\n\"vm.swappiness\" = { value = 1 }\n"
                                        "\"vm.swappiness\" = { value = 2 }\n",
                                        "t.toml")),
            "t.toml:3: \"vm.swappiness\" is defined twice in its table (a key may appear once)");
}

TEST(ProfilePhases, TopLevelCollectsIncludesInOrder) {
  const auto inc = check_top_level(doc_of("include = [\"base\", \"more\"]\ndescription = \"d\"\n[sysctl]\n"), "t.toml");
  ASSERT_TRUE(inc.ok()) << error_of(inc);
  ASSERT_EQ(inc->size(), 2U);
  EXPECT_EQ((*inc)[0].first, "base");
  EXPECT_EQ((*inc)[1].first, "more");
  const auto one = check_top_level(doc_of("include = \"base\"\n"), "t.toml");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1U);
}

TEST(ProfilePhases, Modules) {
  Profile p;
  auto doc = doc_of("modules = [\"tcp_bbr\", { name = \"nvidia_peermem\", required = true }]\n");
  ASSERT_TRUE(merge_modules(*doc["modules"].as_array(), "t.toml", p).ok());
  ASSERT_EQ(p.modules.size(), 2U);
  EXPECT_EQ(p.modules[0].name, "tcp_bbr");
  EXPECT_FALSE(p.modules[0].required);
  EXPECT_EQ(p.modules[0].origin, "t.toml:1");
  EXPECT_TRUE(p.modules[1].required);
  // A later file's entry replaces the earlier one in place.
  auto later = doc_of("modules = [{ name = \"tcp_bbr\", required = true }]\n");
  ASSERT_TRUE(merge_modules(*later["modules"].as_array(), "u.toml", p).ok());
  ASSERT_EQ(p.modules.size(), 2U);
  EXPECT_TRUE(p.modules[0].required);
  for (const char *bad : {"modules = [\"../x\"]\n", "modules = [\"\"]\n", "modules = [3]\n",
                          "modules = [{ name = \"x\", force = true }]\n"}) {
    auto d = doc_of(bad);
    Profile q;
    EXPECT_FALSE(merge_modules(*d["modules"].as_array(), "t.toml", q).ok()) << bad;
  }
  EXPECT_EQ(error_of(check_top_level(doc_of("modules = \"tcp_bbr\"\n"), "t.toml")),
            "t.toml:1: modules must be an array of module names or { name = ..., required = ... }");
}

TEST(ProfilePhases, TopLevelRejectsUnknownAndMistyped) {
  EXPECT_EQ(error_of(check_top_level(doc_of("bogus = 1\n"), "t.toml")),
            "t.toml:1: unknown key 'bogus' (expected description, include, modules, [sysctl], [sysfs], [cpu], "
            "[block.\"GLOB\"], [nic.\"GLOB\"], [[sched.rule]], [boot], [hugepages], [gate])");
  EXPECT_EQ(error_of(check_top_level(doc_of("description = 3\n"), "t.toml")), "t.toml:1: description must be a string");
  EXPECT_EQ(error_of(check_top_level(doc_of("include = [\"a\", 2]\n"), "t.toml")),
            "t.toml:1: include entries must be strings");
  EXPECT_EQ(error_of(check_top_level(doc_of("include = 2\n"), "t.toml")),
            "t.toml:1: include must be a string or an array of strings");
  EXPECT_EQ(error_of(check_top_level(doc_of("sysctl = 2\n"), "t.toml")), "t.toml:1: [sysctl] must be a table");
  EXPECT_EQ(error_of(check_top_level(doc_of("nic = 2\n"), "t.toml")),
            "t.toml:1: [nic] must be a table of [nic.\"GLOB\"] tables");
}

// The registry of top-level tables is what the schema check and the merge
// walk: every registered key is accepted, a value of the wrong type is
// refused with the section's own message, and every section with a parser
// reaches the Profile (one profile sets them all).
TEST(ProfilePhases, TheRegistryOfSectionsDrivesSchemaAndMerge) {
  std::set<std::string_view> keys;
  for (const auto &sec : profile_sections()) {
    EXPECT_TRUE(keys.insert(sec.key).second) << "registered twice: " << sec.key;
    if (sec.type == toml::node_type::none) {
      continue;
    }
    const std::string wrong = sec.type == toml::node_type::array ? " = { a = 1 }\n" : " = 3\n";
    EXPECT_EQ(error_of(check_top_level(doc_of(std::string(sec.key) + wrong), "t.toml")),
              "t.toml:1: " + std::string(sec.wrong_type));
  }
  const std::set<std::string_view> want{"modules", "sysctl", "sysfs", "cpu",       "block",
                                        "nic",     "sched",  "boot",  "hugepages", "gate"};
  EXPECT_EQ(keys, want);
  const auto doc = doc_of("modules = [\"tcp_bbr\"]\n"
                          "[cpu]\ngovernor = \"performance\"\n"
                          "[block.\"nvme*\"]\nscheduler = \"none\"\n"
                          "[nic.\"eth*\"]\nrings = { rx = 512 }\n"
                          "[[sched.rule]]\nname = \"p\"\nthread = \"nccl*\"\npolicy = \"other\"\nnice = -5\n"
                          "reason = \"r\"\n"
                          "[boot]\nisolate = \"none\"\n"
                          "[hugepages]\n\"2M\" = { 0 = 8 }\n"
                          "[gate]\nstep_p99_us = 2\n");
  ASSERT_TRUE(check_top_level(doc, "t.toml").ok());
  Profile p;
  ASSERT_EQ(error_of(merge_sections(doc, "t.toml", p)), "(ok)");
  EXPECT_EQ(p.modules.size(), 1U);
  EXPECT_EQ(p.cpu.size(), 1U);
  EXPECT_EQ(p.block.size(), 1U);
  EXPECT_EQ(p.nic.size(), 1U);
  EXPECT_EQ(p.sched_rules.size(), 1U);
  ASSERT_TRUE(p.boot.has_value());
  EXPECT_EQ(p.boot->isolate, "none");
  ASSERT_EQ(p.hugepages.size(), 1U);
  EXPECT_EQ(p.hugepages[0].pages, 8U);
  ASSERT_TRUE(p.gate.has_value());
  EXPECT_EQ(p.gate->limits.size(), 1U);
}

TEST(ProfilePhases, IncludeCycleAndDepth) {
  EXPECT_TRUE(check_include({"a", "b"}, "c", "t.toml:1").ok());
  EXPECT_EQ(error_of(check_include({"a", "b"}, "a", "t.toml:1")), "t.toml:1: include cycle: a -> b -> a");
  const std::vector<std::string> deep(16, "x");
  EXPECT_EQ(error_of(check_include(deep, "y", "t.toml:3")), "t.toml:3: includes nested deeper than 16");
}

TEST(ProfilePhases, KnobsInFileOrder) {
  const auto e = parse_knobs(doc_of("[sysfs]\n\"kernel/mm/transparent_hugepage/defrag\" = { value = \"never\" }\n"
                                    "[sysctl]\n\"vm.swappiness\" = { value = 10, reason = \"r\", optional = true }\n"),
                             "t.toml");
  ASSERT_TRUE(e.ok()) << error_of(e);
  ASSERT_EQ(e->size(), 2U);
  EXPECT_EQ((*e)[0].knob.key, "kernel/mm/transparent_hugepage/defrag");
  EXPECT_EQ((*e)[0].knob.kind, KnobKind::sysfs);
  EXPECT_EQ((*e)[0].line, 2U);
  const Knob &k = (*e)[1].knob;
  EXPECT_EQ(k.key, "vm.swappiness");
  EXPECT_EQ(k.value, "10");
  EXPECT_EQ(k.reason, "r");
  EXPECT_TRUE(k.optional);
  EXPECT_EQ(k.origin, "t.toml:4");
}

TEST(ProfilePhases, Bounds) {
  const auto e = parse_knobs(doc_of("[sysctl]\n\"fs.file-max\" = { at_least = 2097152 }\n"
                                    "\"vm.x\" = { at_most = -3 }\n"
                                    "\"vm.y\" = { at_least = \"99999999999999999999999\" }\n"),
                             "t.toml");
  ASSERT_TRUE(e.ok()) << error_of(e);
  ASSERT_EQ(e->size(), 3U);
  const Knob &fm = (*e)[0].knob;
  EXPECT_EQ(fm.cmp, KnobCmp::at_least);
  EXPECT_EQ(fm.value, "2097152");
  EXPECT_EQ(fm.wanted(), ">= 2097152");
  EXPECT_TRUE(fm.satisfied_by("2097152"));
  EXPECT_TRUE(fm.satisfied_by("9999999\n"));
  EXPECT_TRUE(fm.satisfied_by("9223372036854775807"));
  EXPECT_FALSE(fm.satisfied_by("2097151"));
  EXPECT_FALSE(fm.satisfied_by("madvise"));
  EXPECT_FALSE(fm.satisfied_by(""));
  const Knob &x = (*e)[1].knob;
  EXPECT_EQ(x.cmp, KnobCmp::at_most);
  EXPECT_EQ(x.wanted(), "<= -3");
  EXPECT_TRUE(x.satisfied_by("-4"));
  EXPECT_FALSE(x.satisfied_by("0"));
  EXPECT_EQ((*e)[2].knob.value, "99999999999999999999999");
  EXPECT_FALSE((*e)[2].knob.satisfied_by("18446744073709551615"));
}

TEST(ProfilePhases, KnobErrors) {
  const std::pair<const char *, const char *> bad[] = {
      {"[sysctl]\n\"vm\" = { value = 1 }\n", "t.toml:2: invalid sysctl name 'vm'"},
      {"[sysctl]\n\"vm.x\" = 1\n", "t.toml:2: vm.x: expected { value = ..., reason = \"...\" }"},
      {"[sysctl]\n\"vm.x\" = { reason = \"r\" }\n", "t.toml:2: vm.x: missing value"},
      {"[sysctl]\n\"vm.x\" = { value = 1.5 }\n", "t.toml:2: vm.x: value must be an integer or a string"},
      {"[sysctl]\n\"vm.x\" = { value = 1, optional = 1 }\n",
       "t.toml:2: vm.x: optional must be true, false or \"missing\""},
      {"[sysctl]\n\"vm.x\" = { value = 1, optional = \"absent\" }\n",
       "t.toml:2: vm.x: optional must be true, false or \"missing\""},
      {"[sysctl]\n\"vm.x\" = { value = 1, reason = 1 }\n", "t.toml:2: vm.x: reason must be a string"},
      {"[sysctl]\n\"vm.x\" = { value = 1, why = 1 }\n",
       "t.toml:2: vm.x: unknown key 'why' (expected value, at_least, at_most, optional, reason)"},
      {"[sysctl]\n\"vm.x\" = { at_least = \"many\" }\n", "t.toml:2: vm.x: at_least must be an integer"},
      {"[sysctl]\n\"vm.x\" = { at_most = 1.5 }\n", "t.toml:2: vm.x: at_most must be an integer"},
      {"[sysctl]\n\"vm.x\" = { value = 1, at_least = 2 }\n",
       "t.toml:2: vm.x: give one of value, at_least, at_most (not at_least and value)"},
      {"[sysctl]\n\"vm.x\" = { at_most = 1, at_least = 2 }\n",
       "t.toml:2: vm.x: give one of value, at_least, at_most (not at_least and at_most)"},
      {"[sysctl]\n\"vm.x\" = { value = \"a  b\" }\n",
       "t.toml:2: vm.x: value has extra spaces (leading, trailing or doubled): 'a  b'"},
      {"[sysctl]\n\"vm.x\" = { value = \"\" }\n", "t.toml:2: vm.x: value is empty"},
      {"[sysctl]\n\"vm.x\" = { value = \"\"\"a\nb\"\"\" }\n",
       "t.toml:2: vm.x: value must be one line (a newline or NUL byte in it)"},
      {"[sysctl]\n\"vm.x\" = { value = \"xxxx\" }\n", nullptr},
      {"[sysfs]\n\"class/net/x\" = { value = 1 }\n", "t.toml:2: sysfs path 'class/net/x' is outside the allowed"},
  };
  for (const auto &[text_in, want_in] : bad) {
    // nullptr: a value over the limit, named with the limit.
    const std::string text = want_in != nullptr
                                 ? std::string(text_in)
                                 : "[sysctl]\n\"vm.x\" = { value = \"" + std::string(5000, 'x') + "\" }\n";
    const std::string want = want_in != nullptr
                                 ? std::string(want_in)
                                 : "t.toml:2: vm.x: value is 5000 bytes, more than the 4096-byte limit of a knob value";
    SCOPED_TRACE(text.substr(0, 80));
    const auto e = parse_knobs(doc_of(text), "t.toml");
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().message.rfind(want, 0), 0U) << e.error().message;
  }
}

TEST(ProfilePhases, MergeKnobsReplacesByKey) {
  Profile p;
  p.knobs.push_back({KnobKind::sysctl, "vm.a", "1", false, false, "", "base.toml:1"});
  p.knobs.push_back({KnobKind::sysctl, "vm.b", "2", false, false, "", "base.toml:2"});
  std::vector<KnobEntry> e;
  e.push_back({{KnobKind::sysctl, "vm.c", "3", false, false, "", "t.toml:1"}, 1});
  e.push_back({{KnobKind::sysctl, "vm.a", "9", false, false, "", "t.toml:2"}, 2});
  merge_knobs(std::move(e), p);
  ASSERT_EQ(p.knobs.size(), 3U);
  EXPECT_EQ(p.knobs[0].key, "vm.a");
  EXPECT_EQ(p.knobs[0].value, "9");
  EXPECT_EQ(p.knobs[0].origin, "t.toml:2");
  EXPECT_EQ(p.knobs[2].key, "vm.c");
}

TEST(ProfilePhases, SectionsNicSchedDescription) {
  Profile p;
  ASSERT_TRUE(
      merge_sections(doc_of("description = \"hello\"\n[nic.\"eth*\"]\nrings = { rx = 512 }\n"), "t.toml", p).ok());
  EXPECT_EQ(p.description, "hello");
  ASSERT_EQ(p.nic.size(), 1U);
  EXPECT_EQ(p.nic[0].glob, "eth*");
  EXPECT_TRUE(p.sched_rules.empty());
  Profile none;
  ASSERT_TRUE(merge_sections(doc_of("[sysctl]\n"), "t.toml", none).ok());
  EXPECT_TRUE(none.description.empty());
  EXPECT_TRUE(none.nic.empty());
  EXPECT_FALSE(merge_sections(doc_of("[nic.\"*\"]\nring = { rx = 1 }\n"), "t.toml", none).ok());
}
