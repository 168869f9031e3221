// SPDX-License-Identifier: GPL-2.0
/* What the BPF loaders share; see mltune_loader.h. */
#include "mltune_loader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/vfs.h>

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

int mltune_bpf_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret < 0 ? ret : -ret;
}

int mltune_bpf_mount_fs(char *err, size_t errlen)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type != BPF_FS_MAGIC &&
	    mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0)
		return mltune_bpf_fail(err, errlen, errno, "mount bpffs on /sys/fs/bpf: %s",
				       strerror(errno));
	return 0;
}

int mltune_bpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_DEBUG && getenv("MLTUNE_BPF_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}
