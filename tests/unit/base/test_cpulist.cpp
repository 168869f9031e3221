#include "mltune/cpulist.hpp"

#include <gtest/gtest.h>

using mltune::CpuSet;
using mltune::parse_cpuset;

TEST(Cpulist, ParsesKernelFormats) {
  EXPECT_EQ(parse_cpuset("0-3,8-11\n").value(), (CpuSet{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(parse_cpuset("5").value(), CpuSet{5});
  EXPECT_EQ(parse_cpuset("").value(), CpuSet{});
  EXPECT_EQ(parse_cpuset("\n").value(), CpuSet{});
  EXPECT_EQ(parse_cpuset("  1,1,0-1 ").value(), (CpuSet{0, 1})); // overlaps are fine, as in the kernel
  EXPECT_EQ(parse_cpuset("0-7:2/4").value(), (CpuSet{0, 1, 4, 5}));
  EXPECT_EQ(parse_cpuset("8191").value(), CpuSet{8191});
}

TEST(Cpulist, FormatsRanges) {
  EXPECT_EQ((CpuSet{0, 1, 2, 3, 8, 10, 11}).str(), "0-3,8,10-11");
  EXPECT_EQ(CpuSet{}.str(), "");
  EXPECT_EQ((CpuSet{64, 65, 127, 128}).str(), "64-65,127-128");
}

TEST(Cpulist, RoundTrips) {
  for (const char *s : {"0", "0-191", "0-1,96-97", "2-9,50-57,98-105,146-153", "63-64,4000"}) {
    EXPECT_EQ(parse_cpuset(s).value().str(), s);
  }
}

TEST(Cpulist, RejectsMalformedWithClearErrors) {
  struct Case {
    const char *text;
    const char *needle;
  };
  for (const auto &c : std::initializer_list<Case>{{"3-1", "below its start"},
                                                   {"1,", "trailing ','"},
                                                   {",1", "expected a CPU number"},
                                                   {"1,,2", "expected a CPU number"},
                                                   {"a", "expected a CPU number"},
                                                   {"1-", "expected the end of a range"},
                                                   {"1 2", "unexpected character ' '"},
                                                   {"0x3", "unexpected character 'x'"},
                                                   {"-1", "expected a CPU number"},
                                                   {"8192", "out of range"},
                                                   {"99999999999999999999", "out of range"},
                                                   {"0-4:0/2", "0 < used <= group size"},
                                                   {"0-4:3/2", "0 < used <= group size"},
                                                   {"0-4:1", "expected '/'"},
                                                   {"1\x01", "'\\x01'"}}) {
    auto r = parse_cpuset(c.text, "/sys/x/cpulist");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().kind, mltune::Errc::input);
    EXPECT_NE(r.error().message.find("/sys/x/cpulist: invalid cpulist"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos) << c.text << ": " << r.error().message;
    EXPECT_NE(r.error().message.find("at column"), std::string::npos) << r.error().message;
  }
}

TEST(Cpulist, SetOperations) {
  const CpuSet a{0, 1, 2, 70};
  const CpuSet b{2, 3, 70};
  EXPECT_EQ(a | b, (CpuSet{0, 1, 2, 3, 70}));
  EXPECT_EQ(a & b, (CpuSet{2, 70}));
  EXPECT_EQ(a - b, (CpuSet{0, 1}));
  EXPECT_EQ(b - a, CpuSet{3});
  EXPECT_TRUE(a.intersects(b));
  EXPECT_FALSE((CpuSet{0}).intersects(CpuSet{64}));
  EXPECT_TRUE(a.contains(CpuSet{0, 70}));
  EXPECT_FALSE(a.contains(b));
  EXPECT_EQ(a.count(), 4U);
  EXPECT_EQ(a.first(), 0U);
  EXPECT_EQ(CpuSet{}.first(), mltune::k_max_cpus);
  EXPECT_EQ((CpuSet{70}) - CpuSet{70}, CpuSet{}); // trimmed: equal to the empty set
  EXPECT_TRUE(((CpuSet{70}) - CpuSet{70}).empty());
}
