// SPDX-License-Identifier: GPL-2.0
/* A kselftest that fails, for tests/vm/failpaths/run. */
#include "kselftest_harness.h"

TEST(passes)
{
	EXPECT_EQ(1, 1);
}

TEST(fails_on_purpose)
{
	EXPECT_EQ(1, 2);
}

TEST_HARNESS_MAIN
