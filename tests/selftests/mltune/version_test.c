// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/kernel/mltune/version: present, read-only, one line
 * "<major>.<minor>.<patch> abi <n>\n" (Documentation/ABI/testing/sysfs-kernel-mltune).
 */
#include <regex.h>
#include <sys/stat.h>

#include "mltune_test.h"
#include "../kselftest_harness.h"

#define VERSION_FILE MLTUNE_SYSFS "/version"

TEST(version_format)
{
	char buf[128];
	regex_t re;
	ssize_t n;

	n = mltune_read_file(VERSION_FILE, buf, sizeof(buf));
	ASSERT_GT(n, 0) TH_LOG("read %s: %s", VERSION_FILE, strerror((int)-n));
	ASSERT_EQ(0, regcomp(&re, "^[0-9]+\\.[0-9]+\\.[0-9]+ abi [1-9][0-9]*\n$",
			     REG_EXTENDED | REG_NOSUB));
	EXPECT_EQ(0, regexec(&re, buf, 0, NULL, 0)) TH_LOG("bad format: '%s'", buf);
	regfree(&re);
	ksft_print_msg("version: %s", buf);
}

TEST(version_read_only)
{
	struct stat st;

	ASSERT_EQ(0, stat(VERSION_FILE, &st));
	EXPECT_EQ(0444U, (unsigned int)(st.st_mode & 0777));
	EXPECT_EQ(-EACCES, mltune_write_file(VERSION_FILE, "9.9.9 abi 9\n"));
}

int main(int argc, char **argv)
{
	mltune_require_module();
	return test_harness_run(argc, argv);
}
