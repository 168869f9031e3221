/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune: what the profile, hugepool and feeder parts share (the DAMON
 * sysfs model: one file per concern, one common file).
 *
 * Every sysfs store of the module:
 *   - first calls mltune_check_writer(): CAP_SYS_ADMIN in the initial user
 *     namespace, else -EPERM;
 *   - refuses text with an embedded NUL (mltune_check_nul(), or a stricter
 *     byte check) with -EINVAL;
 *   - logs every refusal with mltune_refuse() (rate limited);
 *   - waits for its part's mutex with mutex_lock_killable(): a task killed
 *     while waiting returns -EINTR having changed nothing. Once a change
 *     has started it runs to its end or its rollback, uninterruptibly.
 */
#ifndef MLTUNE_COMMON_H
#define MLTUNE_COMMON_H

#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/moduleparam.h>
#include <linux/mount.h>
#include <linux/printk.h>
#include <linux/sysfs.h>
#include <linux/types.h>

#include "mltune_compat.h"

#ifdef MLTUNE_HAVE_BIN_ATTR_CONST
#define MLTUNE_BIN_ATTR const struct bin_attribute
#else
#define MLTUNE_BIN_ATTR struct bin_attribute
#endif

#ifndef MLTUNE_HAVE_KOBJ_TYPE_CONST
/* Before 6.1 it took a non-const ktype, which it never writes through. */
#define kobject_init_and_add(kobj, ktype, parent, fmt, ...)		\
	kobject_init_and_add(kobj, (void *)(ktype), parent, fmt, ##__VA_ARGS__)
#endif

#ifndef MLTUNE_HAVE_WQ_PERCPU
/* Before 6.17 a workqueue without WQ_UNBOUND was per CPU by default. */
#define WQ_PERCPU 0
#endif

#ifndef MLTUNE_HAVE_FILE_OPEN_ROOT_MNT
static inline struct file *file_open_root_mnt(struct vfsmount *mnt,
					      const char *name, int flags,
					      umode_t mode)
{
	return file_open_root(mnt->mnt_root, mnt, name, flags, mode);
}
#endif

/* Log a refused write (rate limited) and evaluate to its errno. */
#define mltune_refuse(err, fmt, ...) ({					\
	int __err = (err);						\
									\
	pr_warn_ratelimited("refused (%d): " fmt, __err, ##__VA_ARGS__);	\
	__err;								\
})

/*
 * Allocation-failure injection (tests; Debian kernels have no failslab):
 * the module parameter fail_alloc_nth = N makes the Nth allocation of the
 * switch, profile, pool and feeder-store paths from then on fail, once; 0
 * (default) off. Every allocation of those paths goes through
 * mltune_alloc() (pointers) or mltune_alloc_ok() (zalloc_cpumask_var()).
 */
bool mltune_fail_alloc(void);
#define mltune_alloc(expr)	(mltune_fail_alloc() ? NULL : (expr))
#define mltune_alloc_ok(expr)	(!mltune_fail_alloc() && (expr))

/* The writer of sysfs file @file (for the log) may change things. */
int mltune_check_writer(const char *file);
/*
 * Module parameters: every one writable at runtime (a mode with a write
 * bit) is set through these ops, or through a setter that starts with
 * mltune_check_param(): CAP_SYS_ADMIN in the initial user namespace, else
 * -EPERM (logged) with the value unchanged, at load as at runtime.
 */
int mltune_check_param(const struct kernel_param *kp);
extern const struct kernel_param_ops mltune_param_ops_int;
extern const struct kernel_param_ops mltune_param_ops_bool;
/* buf[0..count) has no NUL byte; else -EINVAL, logged. */
int mltune_check_nul(const char *file, const char *buf, size_t count);

/*
 * Run fn(arg) on the module's ordered workqueue and wait for it,
 * uninterruptibly: it runs with the init credentials and the initial
 * namespaces, whatever the caller's.
 */
int mltune_call(int (*fn)(void *arg), void *arg);

/*
 * The module's private kernel mounts of proc and sysfs, made on the
 * workqueue (so proc belongs to the initial pid namespace) by
 * mltune_common_init() before any part registers a file, and unmounted by
 * mltune_common_exit() after every part is gone. Read without a lock in
 * between; a file opened on them keeps its mount until it is closed.
 * Opening files relative to them (file_open_root_mnt()) ignores the mount
 * namespace of the task that opens them.
 */
extern struct vfsmount *mltune_proc_mnt;
extern struct vfsmount *mltune_sys_mnt;

/* First thing of mltune_init(), last thing of mltune_exit(). */
int mltune_common_init(void);
void mltune_common_exit(void);

#endif /* MLTUNE_COMMON_H */
