// SPDX-License-Identifier: GPL-2.0
/*
 * Privilege: every writable file under /sys/kernel/mltune, and /dev/mltune,
 * refuse
 *  - an unprivileged user (uid and gid 65534, no supplementary groups);
 *  - root inside a new user namespace mapped as a container maps it (ns
 *    uid 0 -> 65534): the file modes refuse it;
 *  - root inside a new user namespace mapped to host root (ns uid 0 -> 0):
 *    the file modes let it through, so the stores' check of CAP_SYS_ADMIN
 *    in the initial namespace is what refuses it (EPERM).
 * Each writer offers every file a value root would accept (its current
 * contents, or a new profile for profiles/control); each write must fail
 * with EACCES or EPERM, and after each writer every readable file of the
 * tree reads as before. Tries and refusals are printed.
 *
 * /dev/mltune is checked for the first two: root mapped to host root is
 * host root for file access, and the device's access control is its file
 * mode (group mltune where the package installed its udev rule).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "snapshot.h"

#define DEV		"/dev/mltune"
#define NOBODY		65534
#define NEW_PROFILE	"privtest"

enum writer { W_NOBODY, W_USERNS_CONTAINER, W_USERNS_HOST_ROOT };

static const char *const writer_name[] = {
	[W_NOBODY] = "uid 65534",
	[W_USERNS_CONTAINER] = "root in a user namespace (0 -> 65534)",
	[W_USERNS_HOST_ROOT] = "root in a user namespace (0 -> 0)",
};

/* The writable files of the tree (mode has a write bit). */
static struct snap writable;

static bool refused(int e)
{
	return e == EACCES || e == EPERM;
}

/*
 * In the child, as @w: offer every writable file a value root would accept;
 * returns how many were not refused (0 on success).
 */
static int try_all(enum writer w)
{
	char val[MAX_READ];
	int bad = 0, tries = 0;

	for (int i = 0; i < writable.nr; i++) {
		const char *p = writable.f[i].path;
		ssize_t n = mltune_read_file(p, val, sizeof(val));
		int fd;

		if (strstr(p, "/profiles/control"))
			n = snprintf(val, sizeof(val), "+%s\n", NEW_PROFILE);
		else if (n <= 0)
			n = snprintf(val, sizeof(val), "1\n");
		tries++;
		errno = 0;
		fd = open(p, O_WRONLY);
		if (fd < 0) {
			if (!refused(errno)) {
				ksft_print_msg("%s: open %s: %s (want EACCES or EPERM)\n",
					       writer_name[w], p, strerror(errno));
				bad++;
			}
			continue;
		}
		if (write(fd, val, n) >= 0 || !refused(errno)) {
			ksft_print_msg("%s: write to %s: %s\n", writer_name[w], p,
				       errno ? strerror(errno) : "accepted");
			bad++;
		}
		close(fd);
	}
	if (w != W_USERNS_HOST_ROOT) {
		int fd = open(DEV, O_RDWR);

		tries++;
		if (fd >= 0 || !refused(errno)) {
			ksft_print_msg("%s: open %s: %s\n", writer_name[w], DEV,
				       fd >= 0 ? "opened" : strerror(errno));
			bad++;
		}
		if (fd >= 0)
			close(fd);
	}
	ksft_print_msg("%s: %d writes tried, %d refused\n", writer_name[w], tries, tries - bad);
	return bad;
}

/* The parent maps the child's new namespace: uid and gid 0 -> @host. */
static int map_userns(pid_t pid, unsigned int host)
{
	char path[64], map[32];

	snprintf(map, sizeof(map), "0 %u 1\n", host);
	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	if (mltune_write_file(path, "deny"))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	if (mltune_write_file(path, map))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	return mltune_write_file(path, map);
}

/* Runs try_all() as @w in a child; its result (-1: could not become @w). */
static int run_as(enum writer w)
{
	int go[2], ready[2], status;
	char c = 0;
	pid_t pid;

	if (pipe(go) || pipe(ready))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		if (w == W_NOBODY) {
			if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
			    setresuid(NOBODY, NOBODY, NOBODY))
				_exit(255);
		} else {
			if (unshare(CLONE_NEWUSER))
				_exit(255);
			if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1 || c != 1)
				_exit(255);
			if (setresgid(0, 0, 0) || setresuid(0, 0, 0))
				_exit(255);
		}
		status = try_all(w);
		_exit(status > 254 ? 254 : status);
	}
	close(go[0]);
	close(ready[1]);
	if (w != W_NOBODY) {
		if (read(ready[0], &c, 1) == 1 &&
		    !map_userns(pid, w == W_USERNS_HOST_ROOT ? 0 : NOBODY))
			c = 1;
		else
			c = 0;
		if (write(go[1], &c, 1) != 1)
			c = 0;
	}
	close(go[1]);
	close(ready[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

FIXTURE(privilege) {
	struct snap s;
};

FIXTURE_SETUP(privilege)
{
	mltune_require_module();
	if (access(DEV, F_OK))
		SKIP(return, "%s missing", DEV);
	writable.nr = 0;
	walk(&writable, MLTUNE_SYSFS, 0222);
	ASSERT_LT(0, writable.nr);
	self->s.nr = 0;
	snap_take(&self->s);
}

FIXTURE_TEARDOWN(privilege)
{
	mltune_write_file(CONTROL_FILE, "-" NEW_PROFILE);
	snap_free(&self->s);
}

static void check(struct __test_metadata *_metadata, struct snap *s, enum writer w)
{
	int bad = run_as(w);

	ASSERT_LE(0, bad) TH_LOG("could not become %s", writer_name[w]);
	EXPECT_EQ(0, bad);
	expect_unchanged(_metadata, s);
}

TEST_F(privilege, unprivileged_user)
{
	check(_metadata, &self->s, W_NOBODY);
}

TEST_F(privilege, userns_root_as_container)
{
	check(_metadata, &self->s, W_USERNS_CONTAINER);
}

TEST_F(privilege, userns_root_mapped_to_host_root)
{
	check(_metadata, &self->s, W_USERNS_HOST_ROOT);
}

TEST_HARNESS_MAIN
