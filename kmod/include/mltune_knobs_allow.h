/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * mltune: which files a profile may write, and the limits of a profile.
 *
 * One source for the kernel module (kmod/mltune_allow.c) and the user-space
 * library (userspace/lib/src/profile/allow.cpp); tests/unit/profile/
 * test_allowlist.cpp checks that both give the same verdict. Plain C
 * constants only, so C and C++ can both include it.
 *
 * Allowed trees, relative to the proc or sysfs root: components separated
 * by '/', "*" matches one component, a final "**" one or more. Nothing
 * that takes hardware offline (devices/system/cpu/cpuN/online, memory
 * blocks, device unbind) belongs here. The pattern arrays are defined only
 * where MLTUNE_ALLOW_TREES is defined before the include: the matcher's
 * file, one per program. Each array ends with NULL.
 */
#ifndef MLTUNE_KNOBS_ALLOW_H
#define MLTUNE_KNOBS_ALLOW_H

/* Limits; writes beyond them fail without changing anything. */
#define MLTUNE_NAME_MAX		32		/* profile name, with NUL */
#define MLTUNE_PATH_MAX		256		/* knob path, with NUL */
#define MLTUNE_VALUE_MAX	4096		/* knob value bytes */
#define MLTUNE_MAX_PROFILES	64
#define MLTUNE_MAX_KNOBS	256		/* per profile */
#define MLTUNE_TEXT_MAX		(64 * 1024)	/* knob list text */
#define MLTUNE_MAX_BASELINE	4096		/* distinct knobs ever written */

#ifdef MLTUNE_ALLOW_TREES
#ifdef __KERNEL__
#include <linux/stddef.h>
#else
#include <stddef.h>
#endif

/*
 * Below /proc: sysctls only. Not /proc/irq: its files have no
 * ->write_iter, so kernel_write() refuses them; IRQ affinities are steered
 * by feeder/cpus (kmod/mltune_feeder.c).
 */
static const char *const mltune_proc_allow[] = {
	"sys/**",
	NULL,
};

/* Below /sys. */
static const char *const mltune_sys_allow[] = {
	"kernel/mm/transparent_hugepage/**",
	"devices/system/cpu/cpufreq/**",
	"devices/system/cpu/cpuidle/**",
	"devices/system/cpu/*/cpufreq/**",
	"devices/system/cpu/*/cpuidle/**",
	"devices/system/cpu/*/power/energy_perf_bias",
	"devices/virtual/workqueue/**",
	"block/*/queue/**",
	NULL,
};

#endif /* MLTUNE_ALLOW_TREES */

#endif /* MLTUNE_KNOBS_ALLOW_H */
