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

/* Write a string with one write(2); returns 0 or -errno. */
static inline int mltune_write_file(const char *path, const char *s)
{
	ssize_t n;
	int err = 0;
	int fd = open(path, O_WRONLY);

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0)
		err = -errno;
	else if ((size_t)n != strlen(s))
		err = -EIO;
	close(fd);
	return err;
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

#endif /* MLTUNE_TEST_H */
