// SPDX-License-Identifier: GPL-2.0
/*
 * mltune: helpers every part uses; see mltune_common.h for the rules of a
 * store handler.
 *
 * Knob files are opened like the kernel applies sysctl.*= boot arguments
 * (fs/proc/proc_sysctl.c, process_sysctl_arg()): through private kernel
 * mounts of proc and sysfs and file_open_root_mnt(). The mounts are made
 * on the module's workqueue, which also runs every knob access of a
 * profile switch: such code uses the init credentials (init_cred: all
 * capabilities, kernel SELinux/AppArmor context), the initial network
 * namespace (for /proc/sys/net and sysfs net tags) and the initial pid
 * namespace, whatever namespaces and credentials the writer of the sysfs
 * file has.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/capability.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "mltune_common.h"

/*
 * Set by mltune_common_init(), cleared by mltune_common_exit(); no lock
 * needed in between (see mltune_common.h).
 */
struct vfsmount *mltune_proc_mnt;
struct vfsmount *mltune_sys_mnt;
static struct workqueue_struct *mltune_wq;

int mltune_check_writer(const char *file)
{
	/* capable() checks the initial user namespace. */
	if (capable(CAP_SYS_ADMIN))
		return 0;
	return mltune_refuse(-EPERM, "write to %s by %s[%d] without CAP_SYS_ADMIN\n",
			     file, current->comm, task_pid_nr(current));
}

/*
 * Module parameters writable at runtime: the sysfs file's mode (root
 * only) also lets through root without CAP_SYS_ADMIN and root of a user
 * namespace mapped to host root, so the setter checks the capability, at
 * load (the loader's) as at runtime, before it parses or changes anything.
 */
int mltune_check_param(const struct kernel_param *kp)
{
	char file[64];

	snprintf(file, sizeof(file), "parameter %s", kp->name);
	return mltune_check_writer(file);
}

static int mltune_param_set_int(const char *val, const struct kernel_param *kp)
{
	int ret = mltune_check_param(kp);

	return ret ? ret : param_set_int(val, kp);
}

const struct kernel_param_ops mltune_param_ops_int = {
	.set = mltune_param_set_int,
	.get = param_get_int,
};

static int mltune_param_set_bool(const char *val, const struct kernel_param *kp)
{
	int ret = mltune_check_param(kp);

	return ret ? ret : param_set_bool(val, kp);
}

const struct kernel_param_ops mltune_param_ops_bool = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,
	.set = mltune_param_set_bool,
	.get = param_get_bool,
};

/*
 * Countdown to the injected failure: > 0 counts allocations down, the one
 * that takes it to 0 fails; <= 0 is off. atomic_t: any number of writers
 * and readers, no lock.
 */
static atomic_t fail_nth = ATOMIC_INIT(0);

static int fail_nth_set(const char *val, const struct kernel_param *kp)
{
	int n, ret = mltune_check_param(kp);

	if (ret)
		return ret;
	ret = kstrtoint(val, 0, &n);
	if (ret)
		return ret;
	if (n < 0)
		return -EINVAL;
	atomic_set(&fail_nth, n);
	return 0;
}

static int fail_nth_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", max(atomic_read(&fail_nth), 0));
}

static const struct kernel_param_ops fail_nth_ops = {
	.set = fail_nth_set,
	.get = fail_nth_get,
};
module_param_cb(fail_alloc_nth, &fail_nth_ops, NULL, 0600);
MODULE_PARM_DESC(fail_alloc_nth,
		 "make the Nth allocation of the switch, profile and pool paths fail (tests)");

bool mltune_fail_alloc(void)
{
	if (atomic_read(&fail_nth) <= 0)
		return false;
	return atomic_dec_return(&fail_nth) == 0;
}

int mltune_check_nul(const char *file, const char *buf, size_t count)
{
	if (!memchr(buf, '\0', count))
		return 0;
	return mltune_refuse(-EINVAL, "%s: NUL byte in the written text\n",
			     file);
}

/* --- running code in the worker: init credentials and namespaces --- */

struct mltune_call {
	struct work_struct work;
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static void mltune_call_fn(struct work_struct *work)
{
	struct mltune_call *c = container_of(work, struct mltune_call, work);

	c->ret = c->fn(c->arg);
}

int mltune_call(int (*fn)(void *arg), void *arg)
{
	struct mltune_call c = { .fn = fn, .arg = arg };

	INIT_WORK_ONSTACK(&c.work, mltune_call_fn);
	/*
	 * On this CPU's worker: the caller sleeps in flush_work() until it is
	 * done, so the worker runs at once, with no wake-up of another CPU.
	 */
	queue_work_on(raw_smp_processor_id(), mltune_wq, &c.work);
	flush_work(&c.work);
	destroy_work_on_stack(&c.work);
	return c.ret;
}

/* --- the private mounts --- */

static int mltune_mount(void *arg)
{
	struct file_system_type *proc_type = get_fs_type("proc");
	struct file_system_type *sys_type = get_fs_type("sysfs");

	/* Both are built in: no module reference to drop. */
	if (!proc_type || !sys_type)
		return -ENODEV;
	mltune_proc_mnt = kern_mount(proc_type);
	if (IS_ERR(mltune_proc_mnt)) {
		int ret = PTR_ERR(mltune_proc_mnt);

		mltune_proc_mnt = NULL;
		return ret;
	}
	mltune_sys_mnt = kern_mount(sys_type);
	if (IS_ERR(mltune_sys_mnt)) {
		int ret = PTR_ERR(mltune_sys_mnt);

		kern_unmount(mltune_proc_mnt);
		mltune_proc_mnt = NULL;
		mltune_sys_mnt = NULL;
		return ret;
	}
	return 0;
}

int mltune_common_init(void)
{
	int ret;

	/*
	 * Per CPU, so that a call runs on the caller's CPU; callers are
	 * serialized by mltune_lock (or are module init), so no ordering is
	 * needed of the workqueue itself.
	 */
	mltune_wq = alloc_workqueue("mltune", WQ_PERCPU, 1);
	if (!mltune_wq)
		return -ENOMEM;
	ret = mltune_call(mltune_mount, NULL);
	if (ret) {
		pr_err("cannot mount proc and sysfs for knob writes: %d\n", ret);
		destroy_workqueue(mltune_wq);
		mltune_wq = NULL;
	}
	return ret;
}

void mltune_common_exit(void)
{
	kern_unmount(mltune_sys_mnt);
	kern_unmount(mltune_proc_mnt);
	mltune_sys_mnt = NULL;
	mltune_proc_mnt = NULL;
	destroy_workqueue(mltune_wq);
	mltune_wq = NULL;
}
