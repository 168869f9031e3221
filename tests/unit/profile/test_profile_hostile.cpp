// Hostile profile text: each case once crashed, hung or let a bad value
// through (deep nesting overflowed the stack, a broken header tripped a
// toml++ assertion, /dev/zero and FIFOs as includes, control characters
// through escapes).  Every one must be an input error that names the place.
#include "mltune/profile.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace mltune;

namespace {

Result<Profile> load_text(const std::string &text) {
  return ProfileLoader().load_text(text, "t.toml");
}

void expect_input_error(const Result<Profile> &p, std::string_view needle) {
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().kind, Errc::input);
  EXPECT_NE(p.error().message.find(needle), std::string::npos) << p.error().message;
}

std::string repeat(std::string_view s, int n, std::string_view sep) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += (i ? std::string(sep) : "") + std::string(s);
  }
  return out;
}

} // namespace

TEST(HostileProfile, DeepTableHeaderIsRefusedNotACrash) {
  expect_input_error(load_text("[" + repeat("t", 200000, ".") + "]\n"), "t.toml:1:");
  expect_input_error(load_text(repeat("t", 40, ".") + " = 1\n"), "dotted key components");
}

TEST(HostileProfile, DeepBracketsAreRefused) {
  expect_input_error(load_text("a = " + std::string(100000, '[') + std::string(100000, ']') + "\n"),
                     "nested more than");
  expect_input_error(load_text("a = " + repeat("{b=", 1000, "") + "1" + std::string(1000, '}') + "\n"),
                     "nested more than");
}

TEST(HostileProfile, BrokenTableHeaderIsAnErrorNotAnAssertion) {
  expect_input_error(load_text("[\nx]\n"), "t.toml:1:2: table header not closed");
  expect_input_error(load_text("[[sched.rule\n]]\n"), "table header not closed");
}

TEST(HostileProfile, ControlCharactersNeverReachValues) {
  expect_input_error(load_text("[sysctl]\n\"vm.swappiness\" = { value = \"a\\u0001b\" }\n"), "t.toml:2:");
  expect_input_error(load_text("[sysctl]\n\"vm.swappiness\" = { value = \"a\\nb\" }\n"), "escape");
  expect_input_error(load_text("[sysctl]\n\"vm.swappiness\" = { value = \"a\x01"
                               "b\" }\n"),
                     "control character");
  expect_input_error(load_text("description = \"\x7f\"\n"), "control character");
}

TEST(HostileProfile, OrdinaryTextStillLoads) {
  auto p = load_text("# comment with [brackets] and a.b.c dots\n"
                     "description = \"tcp [x] \\\"quoted\\\" back\\\\slash\"\n"
                     "[sysctl]\n"
                     "\"vm.swappiness\" = { value = 1 }  # trailing [comment]\n"
                     "'vm.dirty_ratio' = { value = \"10\" }\n");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->description, "tcp [x] \"quoted\" back\\slash");
}

TEST(HostileProfile, IncludesMustBeSmallRegularFiles) {
  expect_input_error(load_text("include = \"/dev/zero\"\n"), "not a regular file");
  const auto dir = std::filesystem::temp_directory_path() / ("mltune-hostile-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto fifo = dir / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_input_error(ProfileLoader().load(fifo.string()), "not a regular file"); // no hang
  const auto big = dir / "big.toml";
  {
    std::ofstream out(big);
    out << "# " << std::string(k_max_profile_bytes, 'x') << "\n";
  }
  expect_input_error(ProfileLoader().load(big.string()), "a profile is at most");
  std::filesystem::remove_all(dir);
}
