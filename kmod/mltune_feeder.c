// SPDX-License-Identifier: GPL-2.0
/*
 * mltune feeder CPUs: keep interrupts off the cores that feed the GPUs.
 *
 *   echo 2-3,6-7 > /sys/kernel/mltune/feeder/cpus   steer IRQs off 2-3,6-7
 *   echo > /sys/kernel/mltune/feeder/cpus           put them back
 *
 * A write is validated whole before anything changes: a cpulist of online
 * CPUs that leaves at least one housekeeping CPU (online, not a feeder CPU,
 * not isolated at boot by isolcpus= or nohz_full=).
 *
 * Setting a feeder set is one step with rollback. For every movable IRQ
 * (what /proc/irq/N/smp_affinity may change: not per-CPU, not
 * IRQF_NOBALANCING, not kernel-managed, with a chip that can set affinity)
 * the new affinity is its affinity before mltune first changed it minus
 * the feeder CPUs, or the housekeeping CPUs when that leaves no online CPU;
 * the default IRQ affinity (/proc/irq/default_smp_affinity) likewise. The
 * default goes first, then the IRQs in number order; when one of them
 * fails, the ones already changed get their affinity from before this
 * write back (in reverse) and the write fails with that error. IRQs that
 * went away meanwhile are skipped. Writing another set recomputes every
 * affinity from the saved ones, so a failure leaves the previous set fully
 * in force; clearing sets every saved affinity back, the same way. The
 * effective affinity (the CPU the chip programs) is chosen by the kernel
 * within the mask each time.
 *
 * Interfaces: irq_set_affinity() and irq_get_irq_data() are exported;
 * nr_irqs (irq_get_nr_irqs() from 6.13), irq_to_desc(), for_each_irq_desc()
 * and irq_default_affinity are not (or no longer). The IRQs are walked by
 * number with irq_get_irq_data(). An IRQ's affinity is copied under its
 * descriptor's lock and RCU (descriptors are freed after a grace period),
 * reading the pending mask while a move is pending, as /proc/irq shows it.
 *
 * The default affinity is reachable only through
 * /proc/irq/default_smp_affinity. That file has no read_iter/write_iter,
 * so kernel_read() and kernel_write() refuse it; it is read and written as
 * a process does, with the writer's credentials, through the file's own
 * read and write operations and a page mapped for the moment in the
 * writer's address space (the task writing feeder/cpus, or the task
 * unloading the module). The file is opened on the module's private
 * kernel mount of proc (mltune_proc_mnt, mltune_common.c), so the
 * writer's mount namespace does not matter.
 *
 * CPU hotplug: when the last online CPU of an IRQ's affinity goes
 * offline, the kernel breaks that affinity to every online CPU, feeder CPUs
 * included, and leaves it so when the CPU comes back. While a feeder set
 * is in force, a hotplug callback (CPU up or down) queues feeder_hp_work,
 * which, once the hotplug operation is over, applies the set again to the
 * IRQs as they are then, with the housekeeping CPUs online at that time.
 * The default IRQ affinity keeps what the last write gave it: it is
 * written only with a writer's address space, which a worker lacks, and
 * hotplug does not change it.
 *
 * ABI: Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/interrupt.h>
#include <linux/irq.h>
#include <linux/irqdesc.h>
#include <linux/irqnr.h>
#include <linux/kobject.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/isolation.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "mltune.h"
#include "mltune_common.h"
#include "mltune_compat.h"
#include "mltune_feeder.h"

#ifdef MLTUNE_HAVE_IRQ_GET_NR_IRQS
#define feeder_nr_irqs()	irq_get_nr_irqs()
#else
#define feeder_nr_irqs()	((unsigned int)nr_irqs)
#endif

/*
 * CPUs isolated at boot by isolcpus= (domain). Where HK_TYPE_DOMAIN_BOOT
 * exists, HK_TYPE_DOMAIN also excludes cpuset isolated partitions, which
 * may be the feeder partition itself; only boot isolation counts here.
 */
#if defined(MLTUNE_HAVE_HK_TYPE_DOMAIN_BOOT)
#define FEEDER_HK_DOMAIN	HK_TYPE_DOMAIN_BOOT
#elif defined(MLTUNE_HAVE_HK_TYPE)
#define FEEDER_HK_DOMAIN	HK_TYPE_DOMAIN
#else
#define FEEDER_HK_DOMAIN	HK_FLAG_DOMAIN
#endif
/* CPUs that keep the scheduler tick (not nohz_full=). */
#ifdef MLTUNE_HAVE_HK_TYPE
#define FEEDER_HK_TICK		HK_TYPE_TICK
#else
#define FEEDER_HK_TICK		HK_FLAG_TICK
#endif

#define FEEDER_DEFAULT_FILE	"irq/default_smp_affinity"
/* Tries to size the IRQ list while IRQs come and go. */
#define FEEDER_COLLECT_TRIES	4

/*
 * Written by the parameter's setter (CAP_SYS_ADMIN, mltune_param_ops_int)
 * and cleared by the feeder/cpus write that uses it; no lock (READ_ONCE and
 * WRITE_ONCE here, an int store in param_set_int()).
 */
static int feeder_inject;
module_param_cb(feeder_inject_fault, &mltune_param_ops_int, &feeder_inject,
		0600);
MODULE_PARM_DESC(feeder_inject_fault,
		 "Test hook: the Nth affinity change of the next feeder/cpus write fails with -EIO (1: the default affinity, 2: the first IRQ, ...); 0: off");

/* One IRQ in a plan; the masks point into the plan's mask array. */
struct feeder_irq {
	unsigned int irq;
	bool gone;		/* vanished or no longer movable */
	struct cpumask *base;	/* affinity before mltune first changed it */
	struct cpumask *cur;	/* affinity when this write started */
	struct cpumask *target;	/* affinity after this write */
};

/*
 * What one write changes, IRQs sorted by number. Once committed it is the
 * saved state: the entries whose target differs from their base, base
 * being the affinity to restore; likewise the default when @def_saved.
 */
struct feeder_plan {
	unsigned int nr;
	unsigned int cap;
	struct feeder_irq *irqs;
	unsigned long *masks;		/* 3 * @cap masks of cpumask_size() */
	bool def_saved;			/* default changed: restore def_base */
	cpumask_var_t def_base;
	cpumask_var_t def_cur;
	cpumask_var_t def_target;
	/*
	 * Allocated with the plan, so that applying, rolling back and
	 * restoring it never allocate: the text of the default affinity
	 * (PAGE_SIZE) and a scratch mask for feeder_restore_all().
	 */
	char *io;
	cpumask_var_t scratch;
};

/*
 * feeder_lock protects feeder_cpus and feeder_state (and all it points
 * to). Rules:
 *   - cpus_show() and cpus_store() take it with mutex_lock_killable(); a
 *     task killed while waiting returns -EINTR having changed nothing. A
 *     write holds it from validation to commit or rollback.
 *   - Its holder sleeps (allocations, the proc file, a page of the
 *     writer's address space) and takes an IRQ descriptor's raw spinlock
 *     for a moment to copy an affinity; irq_set_affinity() takes the same
 *     lock. Descriptor locks nest inside feeder_lock, never around it, and
 *     nothing in atomic context takes feeder_lock.
 *   - feeder_hp_fn() (the hotplug work) takes it with mutex_lock() inside
 *     cpus_read_lock(); nothing takes the CPU hotplug lock inside it. The
 *     hotplug callbacks only queue that work and never take it.
 *   - mltune_feeder_exit() takes it after the sysfs directory is gone and
 *     the hotplug callbacks and work are removed (nothing else runs).
 */
static DEFINE_MUTEX(feeder_lock);
static cpumask_var_t feeder_cpus;		/* empty: no feeder set */
static struct feeder_plan *feeder_state;	/* NULL: nothing changed */
/*
 * A feeder set is in force: written under feeder_lock, read without it by
 * the hotplug callbacks (a stale read queues one needless re-steer, or
 * none after the set was cleared).
 */
static bool feeder_armed;
/* The dynamic hotplug state of the callbacks; 0: not registered. */
static int feeder_hp_state;

/* Set at init, cleared at exit; no lock needed in between. */
static struct kobject *feeder_kobj;

/* --- plans --- */

static void feeder_plan_free(struct feeder_plan *p)
{
	if (!p)
		return;
	free_cpumask_var(p->scratch);
	kfree(p->io);
	free_cpumask_var(p->def_target);
	free_cpumask_var(p->def_cur);
	free_cpumask_var(p->def_base);
	kvfree(p->masks);
	kvfree(p->irqs);
	kfree(p);
}

static struct feeder_plan *feeder_plan_alloc(unsigned int cap)
{
	size_t words = cpumask_size() / sizeof(unsigned long);
	struct feeder_plan *p;
	unsigned int i;

	p = mltune_alloc(kzalloc(sizeof(*p), GFP_KERNEL));
	if (!p)
		return NULL;
	p->cap = cap;
	/* Each allocation is tried only when those before it succeeded. */
	p->irqs = mltune_alloc(kvcalloc(max(cap, 1U), sizeof(*p->irqs), GFP_KERNEL));
	if (p->irqs)
		p->masks = mltune_alloc(kvcalloc(3 * (size_t)max(cap, 1U),
						 cpumask_size(), GFP_KERNEL));
	if (p->masks)
		p->io = mltune_alloc(kmalloc(PAGE_SIZE, GFP_KERNEL));
	if (!p->io ||
	    !mltune_alloc_ok(zalloc_cpumask_var(&p->def_base, GFP_KERNEL)) ||
	    !mltune_alloc_ok(zalloc_cpumask_var(&p->def_cur, GFP_KERNEL)) ||
	    !mltune_alloc_ok(zalloc_cpumask_var(&p->def_target, GFP_KERNEL)) ||
	    !mltune_alloc_ok(zalloc_cpumask_var(&p->scratch, GFP_KERNEL))) {
		feeder_plan_free(p);
		return NULL;
	}
	for (i = 0; i < cap; i++) {
		p->irqs[i].base = to_cpumask(p->masks + (3 * i) * words);
		p->irqs[i].cur = to_cpumask(p->masks + (3 * i + 1) * words);
		p->irqs[i].target = to_cpumask(p->masks + (3 * i + 2) * words);
	}
	return p;
}

/* --- IRQs --- */

/*
 * Copy @irq's affinity, as /proc/irq/N/smp_affinity shows it, into @aff.
 * False (and @aff untouched) when @irq has no descriptor or is not
 * movable: per-CPU, IRQF_NOBALANCING, managed, or its chip cannot set an
 * affinity (irq_can_set_affinity_usr(), which is not exported).
 */
static bool feeder_irq_get(unsigned int irq, struct cpumask *aff)
{
	struct irq_desc *desc;
	struct irq_chip *chip;
	struct irq_data *d;
	unsigned long flags;
	bool movable;

	rcu_read_lock();
	d = irq_get_irq_data(irq);
	if (!d) {
		rcu_read_unlock();
		return false;
	}
	desc = irq_data_to_desc(d);
	raw_spin_lock_irqsave(&desc->lock, flags);
	chip = irq_data_get_irq_chip(d);
	movable = irqd_can_balance(d) && !irqd_affinity_is_managed(d) &&
		  chip && chip->irq_set_affinity;
	if (movable) {
		const struct cpumask *m = irq_data_get_affinity_mask(d);

#ifdef CONFIG_GENERIC_PENDING_IRQ
		if (irqd_is_setaffinity_pending(d))
			m = desc->pending_mask;
#endif
		cpumask_copy(aff, m);
	}
	raw_spin_unlock_irqrestore(&desc->lock, flags);
	rcu_read_unlock();
	return movable;
}

/* @base minus @feeder; @hk when that leaves no online CPU. */
static void feeder_target(struct cpumask *dst, const struct cpumask *base,
			  const struct cpumask *feeder,
			  const struct cpumask *hk)
{
	if (cpumask_empty(feeder)) {
		cpumask_copy(dst, base);
		return;
	}
	cpumask_andnot(dst, base, feeder);
	if (!cpumask_intersects(dst, cpu_online_mask))
		cpumask_copy(dst, hk);
}

/*
 * Fill @p with the IRQs this write must change or keep saved: every
 * movable IRQ saved in @old, and every other movable IRQ whose affinity
 * includes a feeder CPU. -ENOSPC when more IRQs exist than @p can hold.
 */
static int feeder_collect(struct feeder_plan *p,
			  const struct feeder_plan *old,
			  const struct cpumask *feeder,
			  const struct cpumask *hk, struct cpumask *tmp)
{
	unsigned int irq, nr = feeder_nr_irqs(), o = 0;

	p->nr = 0;
	for (irq = 0; irq < nr; irq++) {
		const struct cpumask *base = tmp;
		struct feeder_irq *e;

		cond_resched();
		if (!feeder_irq_get(irq, tmp))
			continue;
		while (old && o < old->nr && old->irqs[o].irq < irq)
			o++;
		if (old && o < old->nr && old->irqs[o].irq == irq)
			base = old->irqs[o].base;
		else if (!cpumask_intersects(tmp, feeder))
			continue;
		if (p->nr == p->cap)
			return -ENOSPC;
		e = &p->irqs[p->nr++];
		e->irq = irq;
		e->gone = false;
		cpumask_copy(e->cur, tmp);
		cpumask_copy(e->base, base);
		feeder_target(e->target, e->base, feeder, hk);
	}
	return 0;
}

/* Number of IRQ descriptors now; a first guess for the plan's size. */
static unsigned int feeder_count_irqs(void)
{
	unsigned int irq, nr = feeder_nr_irqs(), n = 0;

	for (irq = 0; irq < nr; irq++) {
		rcu_read_lock();
		if (irq_get_irq_data(irq))
			n++;
		rcu_read_unlock();
	}
	return n;
}

/* --- the default affinity, through /proc/irq/default_smp_affinity --- */

/*
 * Read (up to @len bytes) or write @len bytes of @kbuf at offset 0 of the
 * proc file @rel, as the current task. Files without read_iter/write_iter
 * go through a page mapped in the current task's address space; @len is
 * at most PAGE_SIZE.
 */
static ssize_t feeder_proc_io(const char *rel, char *kbuf, size_t len,
			      bool write)
{
	const struct file_operations *fops;
	bool direct;
	unsigned long ua;
	struct file *f;
	loff_t pos = 0;
	ssize_t n;

	f = file_open_root_mnt(mltune_proc_mnt, rel,
			       (write ? O_WRONLY : O_RDONLY) | O_NOFOLLOW |
			       O_LARGEFILE, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	fops = f->f_op;
	direct = write ? !fops->write : !fops->read;
	if (direct) {
		if (write)
			n = kernel_write(f, kbuf, len, &pos);
		else
			n = kernel_read(f, kbuf, len, &pos);
		goto out;
	}
	n = -EOPNOTSUPP;
	if (!current->mm || (current->flags & PF_KTHREAD))
		goto out;
	ua = vm_mmap(NULL, 0, PAGE_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, 0);
	if (IS_ERR_VALUE(ua)) {
		n = (long)ua;
		goto out;
	}
	if (write) {
		n = -EFAULT;
		if (!copy_to_user((void __user *)ua, kbuf, len))
			n = fops->write(f, (const char __user *)ua, len, &pos);
	} else {
		n = fops->read(f, (char __user *)ua, len, &pos);
		if (n > 0 && copy_from_user(kbuf, (const void __user *)ua, n))
			n = -EFAULT;
	}
	vm_munmap(ua, PAGE_SIZE);
out:
	filp_close(f, NULL);
	return n;
}

/* @buf: PAGE_SIZE bytes (the plan's io buffer). */
static int feeder_default_get(struct cpumask *mask, char *buf)
{
	ssize_t n = feeder_proc_io(FEEDER_DEFAULT_FILE, buf, PAGE_SIZE - 1, false);

	if (n < 0)
		return n;
	if (n == 0 || n >= PAGE_SIZE - 1)
		return -EIO;
	buf[n] = '\0';
	return cpumask_parse(buf, mask);
}

/* @buf: PAGE_SIZE bytes (the plan's io buffer). */
static int feeder_default_set(const struct cpumask *mask, char *buf)
{
	int len = scnprintf(buf, PAGE_SIZE, "%*pb\n", cpumask_pr_args(mask));
	ssize_t n = feeder_proc_io(FEEDER_DEFAULT_FILE, buf, len, true);

	if (n < 0)
		return n;
	return n == len ? 0 : -EIO;
}

/* --- applying a plan --- */

/* The test hook: true when this change is the one to fail. */
static bool feeder_fault(int *nth)
{
	int n = READ_ONCE(feeder_inject);

	if (n <= 0 || ++*nth != n)
		return false;
	WRITE_ONCE(feeder_inject, 0);
	pr_info("feeder: injected fault at change %d\n", n);
	return true;
}

static int feeder_irq_set(struct feeder_irq *e, const struct cpumask *mask,
			  struct cpumask *tmp)
{
	int ret = irq_set_affinity(e->irq, mask);

	/* Freed or changed meanwhile: nothing to steer or to restore. */
	if (ret && !feeder_irq_get(e->irq, tmp)) {
		e->gone = true;
		return 0;
	}
	return ret;
}

/*
 * Change the default and every IRQ of @p from cur to target. On the first
 * failure, put back what this call changed and return the error.
 */
static int feeder_apply(struct feeder_plan *p, struct cpumask *tmp)
{
	bool def_done = false;
	unsigned int i, j;
	int ret = 0, nth = 0;

	if (!cpumask_equal(p->def_cur, p->def_target)) {
		ret = feeder_fault(&nth) ? -EIO :
					   feeder_default_set(p->def_target, p->io);
		if (ret) {
			pr_warn_ratelimited("feeder: setting the default IRQ affinity to %*pbl failed: %d\n",
					    cpumask_pr_args(p->def_target), ret);
			return ret;
		}
		def_done = true;
	}
	for (i = 0; i < p->nr; i++) {
		struct feeder_irq *e = &p->irqs[i];

		cond_resched();
		if (cpumask_equal(e->cur, e->target))
			continue;
		ret = feeder_fault(&nth) ? -EIO :
					   feeder_irq_set(e, e->target, tmp);
		if (ret) {
			pr_warn_ratelimited("feeder: IRQ %u affinity %*pbl failed: %d; rolling back\n",
					    e->irq, cpumask_pr_args(e->target),
					    ret);
			break;
		}
	}
	if (!ret)
		return 0;

	for (j = i; j-- > 0; ) {
		struct feeder_irq *e = &p->irqs[j];
		int err;

		if (e->gone || cpumask_equal(e->cur, e->target))
			continue;
		err = feeder_irq_set(e, e->cur, tmp);
		if (err)
			pr_err("feeder: rollback of IRQ %u to %*pbl failed: %d\n",
			       e->irq, cpumask_pr_args(e->cur), err);
	}
	if (def_done) {
		int err = feeder_default_set(p->def_cur, p->io);

		if (err)
			pr_err("feeder: rollback of the default IRQ affinity to %*pbl failed: %d\n",
			       cpumask_pr_args(p->def_cur), err);
	}
	return ret;
}

/* Keep only what differs from its base: the state to restore later. */
static void feeder_compact(struct feeder_plan *p)
{
	unsigned int i, o = 0;

	for (i = 0; i < p->nr; i++) {
		struct feeder_irq *e = &p->irqs[i];

		if (e->gone || cpumask_equal(e->target, e->base))
			continue;
		swap(p->irqs[o], p->irqs[i]);
		o++;
	}
	p->nr = o;
	p->def_saved = !cpumask_equal(p->def_target, p->def_base);
}

/*
 * Make @feeder the feeder set (empty: clear), all or nothing. @hk: the
 * housekeeping CPUs for @feeder. Called with feeder_lock held.
 */
static int feeder_set(const struct cpumask *feeder, const struct cpumask *hk,
		      struct cpumask *tmp, bool irqs_only)
{
	struct feeder_plan *old = feeder_state, *p = NULL;
	unsigned int cap = feeder_count_irqs() + 16, try;
	int ret = -ENOSPC;

	for (try = 0; try < FEEDER_COLLECT_TRIES && ret == -ENOSPC; try++) {
		feeder_plan_free(p);
		p = feeder_plan_alloc(cap);
		if (!p)
			return -ENOMEM;
		ret = feeder_collect(p, old, feeder, hk, tmp);
		cap *= 2;
	}
	if (ret) {
		ret = -EAGAIN;	/* IRQs appear faster than we count them */
		goto out;
	}

	if (irqs_only) {
		/* The default as the last write left it: neither read nor set. */
		cpumask_copy(p->def_base, old && old->def_saved ? old->def_base :
								  cpu_possible_mask);
		cpumask_copy(p->def_cur, old && old->def_saved ? old->def_target :
								 p->def_base);
		cpumask_copy(p->def_target, p->def_cur);
	} else {
		ret = feeder_default_get(p->def_cur, p->io);
		if (ret) {
			pr_warn_ratelimited("feeder: reading the default IRQ affinity failed: %d\n",
					    ret);
			goto out;
		}
		cpumask_copy(p->def_base, old && old->def_saved ? old->def_base :
								  p->def_cur);
		feeder_target(p->def_target, p->def_base, feeder, hk);
	}

	ret = feeder_apply(p, tmp);
	if (ret)
		goto out;
	feeder_compact(p);
	cpumask_copy(feeder_cpus, feeder);
	WRITE_ONCE(feeder_armed, !cpumask_empty(feeder_cpus));
	swap(feeder_state, p);
	if (!feeder_state->nr && !feeder_state->def_saved) {
		feeder_plan_free(feeder_state);
		feeder_state = NULL;
	}
	/* p is now the old state */
out:
	feeder_plan_free(p);
	return ret;
}

/*
 * Unload: put every saved affinity back, best effort (an error is logged
 * and the others are still restored). Called with feeder_lock held.
 */
static void feeder_restore_all(void)
{
	struct feeder_plan *s = feeder_state;
	unsigned int i, failed = 0;
	struct cpumask *tmp;
	int ret;

	if (!s)
		return;
	tmp = s->scratch;
	for (i = 0; i < s->nr; i++) {
		struct feeder_irq *e = &s->irqs[i];

		cond_resched();
		if (!feeder_irq_get(e->irq, tmp) || cpumask_equal(tmp, e->base))
			continue;
		ret = feeder_irq_set(e, e->base, tmp);
		if (ret) {
			pr_err("feeder: restoring IRQ %u to %*pbl failed: %d\n",
			       e->irq, cpumask_pr_args(e->base), ret);
			failed++;
		}
	}
	if (s->def_saved) {
		ret = feeder_default_set(s->def_base, s->io);
		if (ret) {
			pr_err("feeder: restoring the default IRQ affinity to %*pbl failed: %d\n",
			       cpumask_pr_args(s->def_base), ret);
			failed++;
		}
	}
	if (failed)
		pr_err("feeder: %u affinities not restored on unload\n", failed);
	feeder_plan_free(s);
	feeder_state = NULL;
	cpumask_clear(feeder_cpus);
	WRITE_ONCE(feeder_armed, false);
}

/* --- sysfs --- */

/* One cpulist, at most one trailing newline; "" or "\n": empty. */
static int feeder_parse(const char *buf, size_t count, struct cpumask *mask)
{
	size_t len = count;

	if (len && buf[len - 1] == '\n')
		len--;
	if (mltune_check_nul("feeder/cpus", buf, count))
		return -EINVAL;
	if (memchr(buf, '\n', len))
		return mltune_refuse(-EINVAL, "feeder: not one line of text\n");
	if (cpulist_parse(buf, mask))
		return mltune_refuse(-EINVAL, "feeder: not a cpulist of CPUs below %u: %.*s\n",
				     nr_cpu_ids, (int)min_t(size_t, len, 64),
				     buf);
	return 0;
}

/*
 * The housekeeping CPUs for @feeder into @hk: online, not feeder CPUs, not
 * isolated at boot. -EBUSY when there is none.
 */
static int feeder_housekeeping(const struct cpumask *feeder, struct cpumask *hk)
{
	cpumask_and(hk, cpu_online_mask, housekeeping_cpumask(FEEDER_HK_DOMAIN));
	cpumask_and(hk, hk, housekeeping_cpumask(FEEDER_HK_TICK));
	cpumask_andnot(hk, hk, feeder);
	return cpumask_empty(hk) ? -EBUSY : 0;
}

/*
 * Every feeder CPU online (hence possible); at least one housekeeping CPU
 * left: online, not a feeder CPU, not isolated at boot (isolcpus=,
 * nohz_full=). Fills @hk with the housekeeping CPUs.
 */
static int feeder_check(const struct cpumask *feeder, struct cpumask *hk)
{
	if (cpumask_empty(feeder))
		return 0;
	if (!cpumask_subset(feeder, cpu_online_mask)) {
		cpumask_andnot(hk, feeder, cpu_online_mask);
		return mltune_refuse(-EINVAL, "feeder: CPUs %*pbl not online\n",
				     cpumask_pr_args(hk));
	}
	if (feeder_housekeeping(feeder, hk))
		return mltune_refuse(-EBUSY, "feeder: CPUs %*pbl leave no housekeeping CPU\n",
				     cpumask_pr_args(feeder));
	return 0;
}

static ssize_t cpus_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	ssize_t ret;

	ret = mutex_lock_killable(&feeder_lock);
	if (ret)
		return ret;
	ret = sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(feeder_cpus));
	mutex_unlock(&feeder_lock);
	return ret;
}

static ssize_t cpus_store(struct kobject *kobj, struct kobj_attribute *attr,
			  const char *buf, size_t count)
{
	cpumask_var_t feeder, hk, tmp;
	ssize_t ret = -ENOMEM;

	ret = mltune_check_writer("feeder/cpus");
	if (ret)
		return ret;
	ret = -ENOMEM;
	if (!mltune_alloc_ok(zalloc_cpumask_var(&feeder, GFP_KERNEL)))
		return -ENOMEM;
	if (!mltune_alloc_ok(zalloc_cpumask_var(&hk, GFP_KERNEL)))
		goto free_feeder;
	if (!mltune_alloc_ok(zalloc_cpumask_var(&tmp, GFP_KERNEL)))
		goto free_hk;

	ret = feeder_parse(buf, count, feeder);
	if (ret)
		goto free_tmp;
	ret = mutex_lock_killable(&feeder_lock);
	if (ret)
		goto free_tmp;
	ret = feeder_check(feeder, hk);
	if (!ret)
		ret = feeder_set(feeder, hk, tmp, false);
	if (!ret && cpumask_empty(feeder_cpus))
		pr_info("feeder: cleared, IRQ affinities restored\n");
	else if (!ret)
		pr_info("feeder: CPUs %*pbl; %u IRQs steered off them\n",
			cpumask_pr_args(feeder_cpus),
			feeder_state ? feeder_state->nr : 0);
	mutex_unlock(&feeder_lock);

free_tmp:
	free_cpumask_var(tmp);
free_hk:
	free_cpumask_var(hk);
free_feeder:
	free_cpumask_var(feeder);
	return ret ? ret : (ssize_t)count;
}

static struct kobj_attribute feeder_cpus_attr = __ATTR_RW(cpus);

static struct attribute *feeder_attrs[] = {
	&feeder_cpus_attr.attr,
	NULL,
};

static const struct attribute_group feeder_group = {
	.attrs = feeder_attrs,
};

/* --- CPU hotplug --- */

/* Apply the feeder set again to the IRQs as they are after a hotplug. */
static void feeder_hp_fn(struct work_struct *work)
{
	cpumask_var_t feeder, hk, tmp;
	int ret = -ENOMEM;

	if (!zalloc_cpumask_var(&feeder, GFP_KERNEL))
		goto out;
	if (!zalloc_cpumask_var(&hk, GFP_KERNEL))
		goto free_feeder;
	if (!zalloc_cpumask_var(&tmp, GFP_KERNEL))
		goto free_hk;
	/*
	 * Queued from inside the hotplug operation: the read side waits for
	 * its end (CPU dead and its IRQs moved, or every online callback
	 * run, drivers' included), and holds the online mask still.
	 */
	cpus_read_lock();
	mutex_lock(&feeder_lock);
	ret = 0;
	if (!cpumask_empty(feeder_cpus)) {
		cpumask_copy(feeder, feeder_cpus);
		ret = feeder_housekeeping(feeder, hk);
		if (!ret)
			ret = feeder_set(feeder, hk, tmp, true);
	}
	mutex_unlock(&feeder_lock);
	cpus_read_unlock();
	free_cpumask_var(tmp);
free_hk:
	free_cpumask_var(hk);
free_feeder:
	free_cpumask_var(feeder);
out:
	if (ret)
		pr_warn_ratelimited("feeder: steering IRQs off the feeder CPUs again after CPU hotplug failed: %d\n",
				    ret);
}

static DECLARE_WORK(feeder_hp_work, feeder_hp_fn);

/* CPU up (after it is online) and down (before it goes): queue the work. */
static int feeder_cpu_event(unsigned int cpu)
{
	if (READ_ONCE(feeder_armed))
		queue_work(system_unbound_wq, &feeder_hp_work);
	return 0;
}

/* --- init and exit --- */

int mltune_feeder_init(void)
{
	int ret;

	if (!zalloc_cpumask_var(&feeder_cpus, GFP_KERNEL))
		return -ENOMEM;
	feeder_kobj = kobject_create_and_add("feeder", mltune_kobj);
	if (!feeder_kobj) {
		ret = -ENOMEM;
		goto err_mask;
	}
	ret = cpuhp_setup_state_nocalls(CPUHP_AP_ONLINE_DYN, "mltune/feeder:online",
					feeder_cpu_event, feeder_cpu_event);
	if (ret < 0)
		goto err_kobj;
	feeder_hp_state = ret;
	ret = sysfs_create_group(feeder_kobj, &feeder_group);
	if (ret)
		goto err_hp;
	return 0;

err_hp:
	cpuhp_remove_state_nocalls(feeder_hp_state);
	feeder_hp_state = 0;
err_kobj:
	kobject_put(feeder_kobj);
	feeder_kobj = NULL;
err_mask:
	free_cpumask_var(feeder_cpus);
	return ret;
}

void mltune_feeder_exit(void)
{
	/* No handler runs after this returns. */
	sysfs_remove_group(feeder_kobj, &feeder_group);
	kobject_put(feeder_kobj);
	feeder_kobj = NULL;
	/* No callback queues the work after this; none runs after cancel. */
	cpuhp_remove_state_nocalls(feeder_hp_state);
	feeder_hp_state = 0;
	cancel_work_sync(&feeder_hp_work);

	mutex_lock(&feeder_lock);
	feeder_restore_all();	/* allocates nothing: cannot fail for memory */
	mutex_unlock(&feeder_lock);

	free_cpumask_var(feeder_cpus);
}
