/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune: the knob path and profile name checks and the bound comparison,
 * pure functions.
 *
 * mltune_allow.c uses nothing but the C string functions, so the same file
 * is built into the module and into a user-space unit test
 * (tests/unit/profile/test_allowlist.cpp) that compares its verdicts with
 * the library's. The trees and limits are in include/mltune_knobs_allow.h.
 */
#ifndef MLTUNE_ALLOW_H
#define MLTUNE_ALLOW_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stddef.h>
#endif

#include "mltune_knobs_allow.h"

#ifdef __cplusplus
extern "C" {
#endif

enum mltune_tree {
	MLTUNE_PROC,	/* path starts with /proc/ */
	MLTUNE_SYS,	/* path starts with /sys/ */
};

/* Verdicts of mltune_path_check(); 0 is allowed. */
enum mltune_path_verdict {
	MLTUNE_PATH_OK,
	MLTUNE_PATH_TOO_LONG,		/* MLTUNE_PATH_MAX bytes or more */
	MLTUNE_PATH_NOT_PROC_SYS,	/* not below /proc/ or /sys/ */
	MLTUNE_PATH_BAD_COMPONENT,	/* empty, "." or ".." component */
	MLTUNE_PATH_NOT_ALLOWED,	/* outside the allowed trees */
};

/*
 * How a knob's value is held (the knob list's '>' and '<' flags): exactly,
 * or as a bound that a current value already beyond it satisfies (limits
 * such as fs.file-max are never lowered).
 */
enum mltune_cmp {
	MLTUNE_CMP_EQ,	/* write VALUE */
	MLTUNE_CMP_GE,	/* '>': keep a current value >= VALUE, else write it */
	MLTUNE_CMP_LE,	/* '<': keep a current value <= VALUE, else write it */
};

/* Offset of the part of a path below the proc or sysfs root. */
static inline size_t mltune_rel_off(unsigned char tree)
{
	return tree == MLTUNE_PROC ? sizeof("/proc/") - 1 : sizeof("/sys/") - 1;
}

int mltune_path_check(const char *p, size_t len, unsigned char *tree);
bool mltune_tree_allowed(unsigned char tree, const char *rel, size_t len);
bool mltune_resolved_allowed(unsigned char tree, const char *path,
			     const char *rel, size_t len);
bool mltune_name_ok(const char *name, size_t len);
bool mltune_is_int(const char *s, size_t len);
bool mltune_int_cmp(const char *a, size_t alen, const char *b, size_t blen,
		    int *res);

#ifdef __cplusplus
}
#endif

#endif /* MLTUNE_ALLOW_H */
