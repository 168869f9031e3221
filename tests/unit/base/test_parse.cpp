// The strict parser family (mltune/parse.hpp), CpuSet's cpumask and cpu_set_t
// forms, and with_context().
#include "mltune/cpulist.hpp"
#include "mltune/parse.hpp"
#include "mltune/result.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

using namespace mltune;

TEST(ParseInt, AcceptsExactlyDigits) {
  EXPECT_EQ(parse_int<int>("0"), 0);
  EXPECT_EQ(parse_int<int>("42"), 42);
  EXPECT_EQ(parse_int<int>("-7"), -7);
  EXPECT_EQ(parse_int<std::uint64_t>("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_int<unsigned>("ff", 16), 255U);
}

TEST(ParseInt, RefusesEverythingElse) {
  for (const char *bad : {"", " 1", "1 ", "1\n", "+1", "--1", "-", "1x", "0x10", "1.0", "١"}) {
    EXPECT_FALSE(parse_int<int>(bad).has_value()) << '"' << bad << '"';
  }
  EXPECT_FALSE(parse_int<unsigned>("-1").has_value());
  EXPECT_FALSE(parse_int<std::uint8_t>("256").has_value()); // overflow
  EXPECT_FALSE(parse_int<int>("99999999999").has_value());  // overflow
  EXPECT_FALSE(parse_int<unsigned>("g", 16).has_value());
}

TEST(Trim, AllWhitespaceBothEnds) {
  EXPECT_EQ(trim(" \t a b \r\n\v\f"), "a b");
  EXPECT_EQ(trim("\n"), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
}

TEST(Split, WordsOnAnyWhitespaceRun) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split_words("  a\tbb \n c  "), (V{"a", "bb", "c"}));
  EXPECT_EQ(split_words("4096 87380 6291456"), (V{"4096", "87380", "6291456"}));
  EXPECT_TRUE(split_words(" \t\n").empty());
  EXPECT_TRUE(split_words("").empty());
}

TEST(Split, LinesWithAndWithoutTheLastNewline) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split_lines("a\n\nb\n"), (V{"a", "", "b"}));
  EXPECT_EQ(split_lines("a\nb"), (V{"a", "b"}));
  EXPECT_TRUE(split_lines("").empty());
}

TEST(WithContext, KeepsKindAndErrno) {
  const Error e = with_context(sys_error("/proc/irq/26/smp_affinity_list: open", ENOENT), "NIC step: eth0");
  EXPECT_EQ(e.kind, Errc::failed);
  EXPECT_EQ(e.sys_errno, ENOENT);
  EXPECT_EQ(e.message.rfind("NIC step: eth0: /proc/irq/26/smp_affinity_list: open: ", 0), 0U) << e.message;
  const Error in = with_context(input_error("bad value"), "training.toml:3");
  EXPECT_EQ(in.kind, Errc::input);
  EXPECT_EQ(in.message, "training.toml:3: bad value");
}

TEST(CpuMask, SysfsForm) {
  EXPECT_EQ(CpuSet{}.mask_str(), "0");
  EXPECT_EQ((CpuSet{0, 1, 2, 3}).mask_str(), "f");
  EXPECT_EQ((CpuSet{0, 35}).mask_str(), "8,00000001");
  EXPECT_EQ((CpuSet{64}).mask_str(), "1,00000000,00000000");
  EXPECT_EQ((CpuSet{8191}).mask_str().size(), 8U * 256 + 255); // 256 groups of 8 digits, 255 commas
}

TEST(CpuMask, RoundTripsAndReadsPaddedForms) {
  for (const CpuSet &s : {CpuSet{}, CpuSet{1, 4, 5}, CpuSet{0, 31, 32, 63, 64, 1000, 8191}}) {
    auto back = parse_cpumask(s.mask_str());
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, s) << s.mask_str();
  }
  auto padded = parse_cpumask("00000000,0000000f\n", "/sys/class/net/eth0/queues/rx-0/rps_cpus");
  ASSERT_TRUE(padded);
  EXPECT_EQ(padded->str(), "0-3");
}

TEST(CpuMask, RefusesBadText) {
  for (const char *bad : {"", "x", "1,,2", ",1", "1,", "123456789", "0x1", "-1"}) {
    auto r = parse_cpumask(bad, "where");
    ASSERT_FALSE(r) << '"' << bad << '"';
    EXPECT_EQ(r.error().kind, Errc::input);
    EXPECT_NE(r.error().message.find("where: invalid cpumask"), std::string::npos) << r.error().message;
  }
  // CPU 8192 is beyond k_max_cpus.
  std::string over = "1";
  for (int g = 0; g < 256; ++g) {
    over += ",00000000";
  }
  EXPECT_FALSE(parse_cpumask(over));
}

TEST(CpuSetNative, CoversEveryCpuUpToTheLimit) {
  const CpuSet s{0, 5, 1023, 1024, 4000, 8191};
  const auto n = s.native();
  EXPECT_TRUE(CPU_ISSET_S(8191, CpuSet::Native::size(), n.get()));
  EXPECT_TRUE(CPU_ISSET_S(1024, CpuSet::Native::size(), n.get()));
  EXPECT_FALSE(CPU_ISSET_S(6, CpuSet::Native::size(), n.get()));
  EXPECT_EQ(CpuSet::from_native(n), s);
  EXPECT_GE(CpuSet::Native::size() * 8, k_max_cpus);
}

TEST(CompareDecimal, AnyLengthAndSign) {
  EXPECT_EQ(compare_decimal("2097152", "2097152"), 0);
  EXPECT_EQ(compare_decimal("9223372036854775807", "2097152"), 1);
  EXPECT_EQ(compare_decimal("99999999999999999999999", "18446744073709551615"), 1);
  EXPECT_EQ(compare_decimal("-5", "3"), -1);
  EXPECT_EQ(compare_decimal("-5", "-30"), 1);
  EXPECT_EQ(compare_decimal("007", "7"), 0);
  EXPECT_EQ(compare_decimal("-0", "0"), 0);
  EXPECT_EQ(compare_decimal("10", "9"), 1);
  EXPECT_EQ(compare_decimal("", "1"), std::nullopt);
  EXPECT_EQ(compare_decimal("-", "1"), std::nullopt);
  EXPECT_EQ(compare_decimal("1 2", "1"), std::nullopt);
  EXPECT_EQ(compare_decimal("+1", "1"), std::nullopt);
  EXPECT_EQ(compare_decimal("0x10", "1"), std::nullopt);
}
