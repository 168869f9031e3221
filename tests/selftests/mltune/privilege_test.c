// SPDX-License-Identifier: GPL-2.0
/*
 * Privilege: every writable file under /sys/kernel/mltune, and /dev/mltune,
 * refuse
 *  - an unprivileged user (uid and gid 65534, no supplementary groups);
 *  - root inside a new user namespace mapped as a container maps it (ns
 *    uid 0 -> 65534): the file modes refuse it;
 *  - root inside a new user namespace mapped to host root (ns uid 0 -> 0):
 *    the file modes let it through, so the stores' check of CAP_SYS_ADMIN
 *    in the initial namespace is what refuses it (EPERM);
 *  - root without CAP_SYS_ADMIN in its effective set (capset()): likewise.
 * Each writer offers every file a value root would accept (its current
 * contents, or a new profile for profiles/control); each write must fail
 * with EACCES or EPERM, and after each writer every readable file of the
 * tree reads as before. Tries and refusals are printed.
 *
 * The module's writable parameters (/sys/module/mltune/parameters, test
 * hooks and keep_on_unload) refuse the same writers: each is offered a
 * value that differs from its own ("1" for 0 or N, else "0"); the last two
 * writers must get EPERM from the parameter's setter, and every parameter
 * must read as before.
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "snapshot.h"

#define DEV		"/dev/mltune"
#define PARAMS		"/sys/module/mltune/parameters"
#define NOBODY		65534
#define NEW_PROFILE	"privtest"

enum writer { W_NOBODY, W_USERNS_CONTAINER, W_USERNS_HOST_ROOT, W_NO_SYS_ADMIN };

static const char *const writer_name[] = {
	[W_NOBODY] = "uid 65534",
	[W_USERNS_CONTAINER] = "root in a user namespace (0 -> 65534)",
	[W_USERNS_HOST_ROOT] = "root in a user namespace (0 -> 0)",
	[W_NO_SYS_ADMIN] = "root without CAP_SYS_ADMIN",
};

/* What a writer offers: the files of the tree, or the module parameters. */
enum target { T_TREE, T_PARAMS };

/* The writable files of the tree, and the writable parameters. */
static struct snap writable, params;

/* Root by file mode: only a capability check can refuse these writers. */
static bool passes_file_mode(enum writer w)
{
	return w == W_USERNS_HOST_ROOT || w == W_NO_SYS_ADMIN;
}

static bool refused(enum target t, enum writer w, int e)
{
	if (t == T_PARAMS && passes_file_mode(w))
		return e == EPERM;
	return e == EACCES || e == EPERM;
}

/* A value for parameter @p that differs from its own. */
static ssize_t param_value(const char *p, char *val, size_t cap)
{
	ssize_t n = mltune_read_file(p, val, cap);

	if (n > 0 && (!strcmp(val, "0\n") || !strcmp(val, "N\n")))
		return snprintf(val, cap, "1\n");
	return snprintf(val, cap, "0\n");
}

/*
 * In the child, as @w: offer every writable file of @t a value root would
 * accept; returns how many were not refused (0 on success).
 */
static int try_all(enum writer w, enum target t)
{
	const struct snap *files = t == T_PARAMS ? &params : &writable;
	const char *want = t == T_PARAMS && passes_file_mode(w) ?
			   "EPERM" : "EACCES or EPERM";
	char val[MAX_READ];
	int bad = 0, tries = 0;

	for (int i = 0; i < files->nr; i++) {
		const char *p = files->f[i].path;
		ssize_t n;
		int fd;

		if (t == T_PARAMS)
			n = param_value(p, val, sizeof(val));
		else if (strstr(p, "/profiles/control"))
			n = snprintf(val, sizeof(val), "+%s\n", NEW_PROFILE);
		else if ((n = mltune_read_file(p, val, sizeof(val))) <= 0)
			n = snprintf(val, sizeof(val), "1\n");
		tries++;
		errno = 0;
		fd = open(p, O_WRONLY);
		if (fd < 0) {
			if (!refused(t, w, errno)) {
				ksft_print_msg("%s: open %s: %s (want %s)\n",
					       writer_name[w], p, strerror(errno), want);
				bad++;
			}
			continue;
		}
		if (write(fd, val, n) >= 0 || !refused(t, w, errno)) {
			ksft_print_msg("%s: write to %s: %s (want %s)\n", writer_name[w], p,
				       errno ? strerror(errno) : "accepted", want);
			bad++;
		}
		close(fd);
	}
	if (t == T_TREE && !passes_file_mode(w)) {
		int fd = open(DEV, O_RDWR);

		tries++;
		if (fd >= 0 || !refused(t, w, errno)) {
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

/* Clear CAP_SYS_ADMIN from the effective set (raw syscalls, no libcap). */
static int drop_sys_admin(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
	if (syscall(SYS_capset, &h, d) || syscall(SYS_capget, &h, d))
		return -1;
	return d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN) ? -1 : 0;
}

/* Runs try_all() as @w in a child; its result (-1: could not become @w). */
static int run_as(enum writer w, enum target t)
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
		} else if (w == W_NO_SYS_ADMIN) {
			if (drop_sys_admin())
				_exit(255);
		} else {
			if (unshare(CLONE_NEWUSER))
				_exit(255);
			if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1 || c != 1)
				_exit(255);
			if (setresgid(0, 0, 0) || setresuid(0, 0, 0))
				_exit(255);
		}
		status = try_all(w, t);
		_exit(status > 254 ? 254 : status);
	}
	close(go[0]);
	close(ready[1]);
	if (w == W_USERNS_CONTAINER || w == W_USERNS_HOST_ROOT) {
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
	int bad = run_as(w, T_TREE);

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

TEST_F(privilege, root_without_cap_sys_admin)
{
	check(_metadata, &self->s, W_NO_SYS_ADMIN);
}

/* ---- module parameters ---- */

/* The test hooks and switches that must be writable by root at runtime. */
static const char *const runtime_params[] = {
	"fail_alloc_nth", "feeder_inject_fault", "keep_on_unload",
};

FIXTURE(param) {
	char saved[MAX_FILES][32];
};

FIXTURE_SETUP(param)
{
	mltune_require_module();
	params.nr = 0;
	walk(&params, PARAMS, 0222);
	for (size_t i = 0; i < ARRAY_SIZE(runtime_params); i++) {
		char p[128];
		struct stat st;

		snprintf(p, sizeof(p), PARAMS "/%s", runtime_params[i]);
		ASSERT_EQ(0, stat(p, &st)) TH_LOG("%s: %s", p, strerror(errno));
		EXPECT_NE(0U, st.st_mode & 0200) TH_LOG("%s is not writable by root", p);
		/* Neither group nor others: the mode is a first line only. */
		EXPECT_EQ(0U, st.st_mode & 0022) TH_LOG("%s mode %o", p, st.st_mode & 07777);
	}
	ASSERT_LT(0, params.nr);
	for (int i = 0; i < params.nr; i++) {
		params.f[i].fd = open(params.f[i].path, O_RDONLY);
		ASSERT_LE(0, params.f[i].fd) TH_LOG("%s: %s", params.f[i].path, strerror(errno));
	}
	snap_reload(&params);
	for (int i = 0; i < params.nr; i++)
		snprintf(self->saved[i], sizeof(self->saved[i]), "%.*s",
			 (int)(params.f[i].len > 0 ? params.f[i].len : 0), params.f[i].data);
}

/* An accepted write (the failure this test exists for) is undone as root. */
FIXTURE_TEARDOWN(param)
{
	for (int i = 0; i < params.nr; i++)
		mltune_write_file(params.f[i].path, self->saved[i]);
	snap_free(&params);
}

static void check_params(struct __test_metadata *_metadata, enum writer w)
{
	const char *changed;
	int bad = run_as(w, T_PARAMS);

	ASSERT_LE(0, bad) TH_LOG("could not become %s", writer_name[w]);
	EXPECT_EQ(0, bad);
	changed = snap_changed_ex(&params, false, false);
	if (changed)
		snap_print_change(&params, changed);
	EXPECT_EQ(NULL, changed);
}

TEST_F(param, unprivileged_user)
{
	check_params(_metadata, W_NOBODY);
}

TEST_F(param, userns_root_as_container)
{
	check_params(_metadata, W_USERNS_CONTAINER);
}

TEST_F(param, userns_root_mapped_to_host_root)
{
	check_params(_metadata, W_USERNS_HOST_ROOT);
}

TEST_F(param, root_without_cap_sys_admin)
{
	check_params(_metadata, W_NO_SYS_ADMIN);
}

/* Root with CAP_SYS_ADMIN still sets them (the kselftests rely on it). */
TEST_F(param, root_sets_them)
{
	char val[32], want[32];

	for (int i = 0; i < params.nr; i++) {
		const char *p = params.f[i].path;

		param_value(p, want, sizeof(want));
		ASSERT_EQ(0, mltune_write_file(p, want)) TH_LOG("%s", p);
		ASSERT_LT(0, mltune_read_file(p, val, sizeof(val)));
		/* Booleans read back as Y or N. */
		EXPECT_TRUE(!strcmp(val, want) ||
			    !strcmp(val, !strcmp(want, "1\n") ? "Y\n" : "N\n"))
			TH_LOG("%s: wrote %s, reads %s", p, want, val);
		ASSERT_EQ(0, mltune_write_file(p, self->saved[i])) TH_LOG("%s", p);
	}
}

TEST_HARNESS_MAIN
