/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the user-space loaders of mltune's BPF programs share
 * (mltune_observe.c, mltune_scx.c): their error convention, bpffs and
 * libbpf's log.
 */
#ifndef MLTUNE_LOADER_H
#define MLTUNE_LOADER_H

#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stddef.h>

/*
 * The loaders' error convention: the message, formatted, into err (errlen
 * bytes, when given) and -ret returned (ret as it is when already negative).
 */
int mltune_bpf_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* bpffs mounted at /sys/fs/bpf where it is not; 0 or mltune_bpf_fail()'s. */
int mltune_bpf_mount_fs(char *err, size_t errlen);

/* libbpf's print callback: silent unless MLTUNE_BPF_DEBUG is set, then all
 * but its debug messages on stderr.
 */
int mltune_bpf_log(enum libbpf_print_level level, const char *fmt, va_list ap);

#endif /* MLTUNE_LOADER_H */
