// SPDX-License-Identifier: GPL-2.0
/*
 * Huge-page pool lifetime against module unload: a mapped buffer (even with
 * /dev/mltune closed) keeps the module loaded; after munmap it unloads, and
 * a reload with hugepool= reserves at load time, with the default quota
 * (half the reservation) unless hugepool_user_quota= sets one; a loader
 * without CAP_SYS_ADMIN cannot set the runtime-writable parameters.  Needs
 * $MLTUNE_KO (set by the VM test bed); leaves the module loaded with
 * $MLTUNE_KO_ARGS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <linux/mltune.h>

#include "mltune_test.h"
#include "../kselftest_harness.h"

#define HP	MLTUNE_HUGEPOOL_PAGE_SIZE
#define NODE0	MLTUNE_SYSFS "/hugepool/node0"
#define QUOTA	MLTUNE_SYSFS "/hugepool/user_quota"
#define QUOTA_AUTO	MLTUNE_SYSFS "/hugepool/user_quota_auto"

static long node0(const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), NODE0 "/%s", file);
	return mltune_read_long(path);
}

/* finit_module(@params) in a child without CAP_SYS_ADMIN; 0 or -errno. */
static int load_without_sys_admin(const char *params)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct __user_cap_header_struct h = {
			.version = _LINUX_CAPABILITY_VERSION_3,
		};
		struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

		if (syscall(SYS_capget, &h, d))
			_exit(100);
		d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
		if (syscall(SYS_capset, &h, d))
			_exit(101);
		_exit(-mltune_load_module(params));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1000;
	return WEXITSTATUS(status) >= 100 ? -1000 : -WEXITSTATUS(status);
}

TEST(unload_refused_while_mapped)
{
	int fd, ret, i;
	char *p;

	ASSERT_EQ(0, mltune_write_file(NODE0 "/reserved", "4"));
	fd = open("/dev/mltune", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	p = mmap(NULL, 2 * HP, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 MLTUNE_HUGEPOOL_MMAP_OFFSET(0));
	ASSERT_NE(MAP_FAILED, p);
	close(fd);
	p[0] = 1;

	ret = mltune_unload_module();
	EXPECT_TRUE(ret == -EWOULDBLOCK || ret == -EBUSY)
		TH_LOG("delete_module while mapped: %d", ret);
	EXPECT_EQ(0, access(NODE0, F_OK));
	EXPECT_EQ(2, node0("mapped"));

	ASSERT_EQ(0, munmap(p, 2 * HP));
	EXPECT_EQ(4, node0("free"));
	/* The file's last reference may be dropped by a deferred fput. */
	for (i = 0; i < 100 && (ret = mltune_unload_module()) != 0; i++)
		usleep(10000);
	ASSERT_EQ(0, ret) TH_LOG("delete_module after munmap: %d", ret);
	EXPECT_NE(0, access(MLTUNE_SYSFS, F_OK));

	/* Load-time reservation, then back to the test bed's arguments. */
	ASSERT_EQ(0, mltune_load_module("hugepool=0:8M"));
	EXPECT_EQ(4, node0("reserved"));
	EXPECT_EQ(4, node0("free"));
	EXPECT_EQ(2, mltune_read_long(QUOTA));
	EXPECT_EQ(1, mltune_read_long(QUOTA_AUTO));
	ASSERT_EQ(0, mltune_unload_module());
	EXPECT_EQ(-EINVAL, mltune_load_module("hugepool=0:3M"));
	EXPECT_EQ(-EINVAL, mltune_load_module("hugepool=99:2M"));
	EXPECT_EQ(-EINVAL, mltune_load_module("hugepool=0"));

	/* A quota set at load stays whatever the reservation. */
	ASSERT_EQ(0, mltune_load_module("hugepool=0:8M hugepool_user_quota=6M"));
	EXPECT_EQ(3, mltune_read_long(QUOTA));
	EXPECT_EQ(0, mltune_read_long(QUOTA_AUTO));
	ASSERT_EQ(0, mltune_unload_module());
	ASSERT_EQ(0, mltune_load_module("hugepool_user_quota=0"));
	EXPECT_EQ(0, mltune_read_long(QUOTA));
	EXPECT_EQ(0, mltune_read_long(QUOTA_AUTO));
	ASSERT_EQ(0, mltune_unload_module());
	ASSERT_EQ(0, mltune_load_module("hugepool_user_quota=auto"));
	EXPECT_EQ(1, mltune_read_long(QUOTA));
	EXPECT_EQ(1, mltune_read_long(QUOTA_AUTO));
	ASSERT_EQ(0, mltune_unload_module());
	EXPECT_EQ(-EINVAL, mltune_load_module("hugepool_user_quota=3M"));
	EXPECT_EQ(-EINVAL, mltune_load_module("hugepool_user_quota=none"));

	/* Setting a runtime-writable parameter needs CAP_SYS_ADMIN at load too. */
	EXPECT_EQ(-EPERM, load_without_sys_admin("keep_on_unload=1"));
	EXPECT_EQ(-EPERM, load_without_sys_admin("fail_alloc_nth=5"));
	EXPECT_EQ(-EPERM, load_without_sys_admin("feeder_inject_fault=1"));
	EXPECT_NE(0, access(MLTUNE_SYSFS, F_OK));
	ASSERT_EQ(0, mltune_reload_module());
}

int main(int argc, char **argv)
{
	mltune_require_module();
	mltune_require_ko();
	return test_harness_run(argc, argv);
}
