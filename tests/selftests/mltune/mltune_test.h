/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the mltune kselftests. */
#ifndef MLTUNE_TEST_H
#define MLTUNE_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../kselftest.h"

#define MLTUNE_SYSFS "/sys/kernel/mltune"

/* Skip the whole program (exit 4) when the module is not loaded. */
static inline void mltune_require_module(void)
{
	if (access(MLTUNE_SYSFS, F_OK))
		ksft_exit_skip("mltune module not loaded (%s missing)\n",
			       MLTUNE_SYSFS);
}

/* Read a whole sysfs/proc file into buf (NUL-terminated); -errno on error. */
static inline ssize_t mltune_read_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	else
		buf[n] = '\0';
	close(fd);
	return n;
}

/* One write(2) of @len bytes; 0, -errno, or -EIO on a short write. */
static inline int mltune_write_len(const char *path, const void *buf,
				   size_t len)
{
	ssize_t n;
	int err = 0;
	int fd = open(path, O_WRONLY);

	if (fd < 0)
		return -errno;
	n = write(fd, buf, len);
	if (n < 0)
		err = -errno;
	else if ((size_t)n != len)
		err = -EIO;
	close(fd);
	return err;
}

/* Write a string with one write(2); returns 0 or -errno. */
static inline int mltune_write_file(const char *path, const char *s)
{
	return mltune_write_len(path, s, strlen(s));
}

/* A file holding one number (sysfs counters); -1 when unreadable. */
static inline long mltune_read_long(const char *path)
{
	char buf[64];

	if (mltune_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	return strtol(buf, NULL, 10);
}

/* Skip the whole program (exit 4) when $MLTUNE_KO is not a readable file. */
static inline void mltune_require_ko(void)
{
	const char *ko = getenv("MLTUNE_KO");

	if (!ko || access(ko, R_OK))
		ksft_exit_skip("MLTUNE_KO (the module file) not set or missing\n");
}

/* Load the module from $MLTUNE_KO with @params; 0 or -errno. */
static inline int mltune_load_module(const char *params)
{
	const char *ko = getenv("MLTUNE_KO");
	int fd, ret = 0;

	if (!ko)
		return -ENOENT;
	fd = open(ko, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (syscall(SYS_finit_module, fd, params, 0))
		ret = -errno;
	close(fd);
	return ret;
}

/* One attempt to unload the module; 0 or -errno (-EBUSY while in use). */
static inline int mltune_unload_module(void)
{
	return syscall(SYS_delete_module, "mltune", O_NONBLOCK) ? -errno : 0;
}

/*
 * Unload, retrying for up to a second while the module is briefly busy
 * (-EAGAIN/-EWOULDBLOCK); 0 or -errno.
 */
static inline int mltune_unload_module_wait(void)
{
	int i;

	for (i = 0; i < 100; i++) {
		int ret = mltune_unload_module();

		if (!ret)
			return 0;
		if (ret != -EAGAIN && ret != -EWOULDBLOCK)
			return ret;
		usleep(10000);
	}
	return -EBUSY;
}

/*
 * A loop size. The default run keeps each program within the kselftest
 * default timeout (45 s) on an idle KVM guest; MLTUNE_SOAK=1 asks for the
 * soak sizes (make check asks for them in one guest); a number in the
 * variable @env (when not NULL) overrides both.
 */
static inline long mltune_size(const char *env, long dflt, long soak)
{
	const char *v = env ? getenv(env) : NULL;
	const char *s = getenv("MLTUNE_SOAK");

	if (v && *v)
		return atol(v);
	return s && *s && strcmp(s, "0") ? soak : dflt;
}

/* Load the module again with the test bed's $MLTUNE_KO_ARGS. */
static inline int mltune_reload_module(void)
{
	const char *args = getenv("MLTUNE_KO_ARGS");

	return mltune_load_module(args ? args : "");
}

#endif /* MLTUNE_TEST_H */
