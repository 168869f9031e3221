// SPDX-License-Identifier: GPL-2.0
/*
 * mltune switch engine: a knob set applied all or nothing, and the
 * baseline.
 *
 * A switch opens every knob and captures its value, then writes the knobs
 * in order; on the first failure it writes the captured values back in
 * reverse. A bound ('>' or '<', enum mltune_cmp) that the captured value
 * already satisfies is kept: nothing is written, nothing recorded. The
 * value each knob had before mltune first wrote it is kept as the
 * baseline, restored by "echo baseline > profile" and on unload.
 *
 * Every knob access runs on the module's workqueue (mltune_call()) through
 * the private mounts of mltune_common.c, so it uses the init credentials
 * and the initial namespaces whatever the writer's are; the writer itself
 * passed mltune_check_writer(). A knob is opened by the path below its
 * mount's root; where the file really is must still be inside the allowed
 * trees (mltune_resolved_allowed()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dcache.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/kobject.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/stringhash.h>
#include <linux/sysfs.h>

#include "mltune.h"
#include "mltune_common.h"
#include "mltune_switch.h"

/* Set at load or by root with CAP_SYS_ADMIN (mltune_param_ops_bool). */
static bool keep_on_unload;
module_param_cb(keep_on_unload, &mltune_param_ops_bool, &keep_on_unload, 0644);
MODULE_PARM_DESC(keep_on_unload,
		 "Leave the knobs as they are on unload instead of restoring the baseline");

/* The value a knob had before mltune first wrote it. */
struct mltune_base {
	struct hlist_node hnode;	/* in mltune_base_hash */
	struct list_head node;		/* in mltune_base_list, first write first */
	struct mltune_knob knob;	/* value: the captured old value */
	char strings[];
};

/*
 * mltune_lock serializes every change of a profile and every switch. It
 * protects the switch state below (the active profile name, the
 * generation, the last_switch text, the baseline and the worker's
 * buffers) and the profile list and profile fields of mltune_profile.c.
 * Rules:
 *   - Store and show handlers take it with mutex_lock_killable(); a killed
 *     task waiting for it returns -EINTR having changed nothing.
 *   - Once a switch has started, the task holding the lock waits for the
 *     worker uninterruptibly (mltune_call()): a killed writer cannot leave
 *     a half-applied profile, the worker finishes or rolls back first.
 *   - Never remove a sysfs file or kobject while holding it: removal waits
 *     for running handlers (kernfs drain), which may wait for the lock.
 *   - The worker never takes it and never writes /sys/kernel/mltune (the
 *     /sys allowlist does not contain it); it uses the buffers the lock
 *     protects while the switching task holds the lock and waits for it.
 */
DEFINE_MUTEX(mltune_lock);
static char mltune_active[MLTUNE_NAME_MAX] = "none";
static u64 mltune_generation;
static char *mltune_last;		/* last_switch text, PAGE_SIZE */
static DEFINE_HASHTABLE(mltune_base_hash, 8);
static LIST_HEAD(mltune_base_list);
static unsigned int mltune_nr_base;
static char *mltune_readbuf;		/* MLTUNE_VALUE_MAX + 2 */
static char *mltune_pathbuf;		/* PATH_MAX */

/* --- baseline --- */

static struct mltune_base *mltune_base_find(const char *path)
{
	u32 key = full_name_hash(NULL, path, strlen(path));
	struct mltune_base *b;

	hash_for_each_possible(mltune_base_hash, b, hnode, key)
		if (!strcmp(b->knob.path, path))
			return b;
	return NULL;
}

static struct mltune_base *mltune_base_alloc(const struct mltune_knob *k,
					     const char *old, size_t old_len)
{
	size_t pl = strlen(k->path);
	struct mltune_base *b;

	b = mltune_alloc(kmalloc(struct_size(b, strings, pl + old_len + 3), GFP_KERNEL));
	if (!b)
		return NULL;
	b->knob = *k;
	b->knob.optional = false;
	b->knob.cmp = MLTUNE_CMP_EQ;
	memcpy(b->strings, k->path, pl + 1);
	b->knob.path = b->strings;
	memcpy(b->strings + pl + 1, old, old_len + 2);
	b->knob.value = b->strings + pl + 1;
	b->knob.value_len = old_len;
	return b;
}

static void mltune_base_add(struct mltune_base *b)
{
	hash_add(mltune_base_hash, &b->hnode,
		 full_name_hash(NULL, b->knob.path, strlen(b->knob.path)));
	list_add_tail(&b->node, &mltune_base_list);
	mltune_nr_base++;
}

/* --- switching: runs on the worker while the caller holds mltune_lock --- */

enum mltune_slot_state {
	MLTUNE_SLOT_NONE,
	MLTUNE_SLOT_SKIPPED,	/* optional and missing or failing */
	MLTUNE_SLOT_OPEN,	/* open, old value captured */
	MLTUNE_SLOT_KEPT,	/* a bound the captured value satisfies */
	MLTUNE_SLOT_WRITTEN,	/* new value written */
};

struct mltune_slot {
	struct file *file;
	char *old;		/* captured value, '\n', NUL */
	size_t old_len;
	int err;
	u8 state;		/* enum mltune_slot_state */
	struct mltune_base *base;	/* new baseline entry, added on write */
};

struct mltune_switch {
	const struct mltune_knob *knobs;
	unsigned int nr;
	bool restore;		/* switching to the baseline itself */
	struct mltune_slot *slots;
	int err;		/* 0, or -errno of knob @fail */
	int fail;		/* index of the failing knob or -1 */
	int rollback_err;	/* first error while rolling back */
	unsigned int nr_written;
	unsigned int nr_skipped;
	unsigned int nr_kept;
	u64 duration_ns;
};

static struct file *mltune_open_knob(const struct mltune_knob *k)
{
	struct vfsmount *mnt = k->tree == MLTUNE_PROC ? mltune_proc_mnt :
							mltune_sys_mnt;
	struct file *f;
	char *r;

	/* Private mount: links and ".." cannot climb above its root. */
	f = file_open_root_mnt(mnt, k->path + mltune_rel_off(k->tree),
			       O_RDWR | O_NOFOLLOW | O_LARGEFILE, 0);
	if (IS_ERR(f))
		return f;
	if (!S_ISREG(file_inode(f)->i_mode) || f->f_path.mnt != mnt)
		goto escape;
	r = dentry_path_raw(f->f_path.dentry, mltune_pathbuf, PATH_MAX);
	if (IS_ERR(r) || *r != '/' ||
	    !mltune_resolved_allowed(k->tree, k->path, r + 1, strlen(r + 1)))
		goto escape;
	return f;
escape:
	pr_warn_ratelimited("knob %s resolves outside its tree\n", k->path);
	filp_close(f, NULL);
	return ERR_PTR(-EINVAL);
}

/*
 * Normalize a value read back: whitespace runs become one space, ends
 * trimmed; for sysfs, a selector list "a [b] c" becomes its choice "b".
 */
static size_t mltune_normalize(char *s, size_t n, bool selector)
{
	size_t i, o = 0;
	bool space = false;
	char *l, *r;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == ' ' || c == '\t' || c == '\n') {
			space = o > 0;
			continue;
		}
		if (space)
			s[o++] = ' ';
		space = false;
		s[o++] = c;
	}
	s[o] = '\0';
	if (!selector)
		return o;
	l = strchr(s, '[');
	r = l ? strchr(l, ']') : NULL;
	if (!r || strchr(l + 1, '[') || strchr(r, '['))
		return o;
	o = r - l - 1;
	memmove(s, l + 1, o);
	s[o] = '\0';
	return o;
}

static int mltune_capture(struct mltune_slot *sl, const struct mltune_knob *k)
{
	loff_t pos = 0;
	ssize_t n;
	size_t len;

	n = kernel_read(sl->file, mltune_readbuf, MLTUNE_VALUE_MAX + 2, &pos);
	if (n < 0)
		return n;
	len = mltune_normalize(mltune_readbuf, n, k->tree == MLTUNE_SYS);
	if (len > MLTUNE_VALUE_MAX)
		return -EFBIG;
	sl->old = mltune_alloc(kmalloc(len + 2, GFP_KERNEL));
	if (!sl->old)
		return -ENOMEM;
	memcpy(sl->old, mltune_readbuf, len);
	sl->old[len] = '\n';
	sl->old[len + 1] = '\0';
	sl->old_len = len;
	return 0;
}

/* Write value[0..len] (the '\n' included); the store may skip the '\n'. */
static int mltune_write(struct file *f, const char *value, size_t len)
{
	loff_t pos = 0;
	ssize_t n;

	n = kernel_write(f, value, len + 1, &pos);
	if (n < 0)
		return n;
	return n >= len ? 0 : -EIO;
}

/*
 * Whether the captured value satisfies the knob's bound: 1 yes, 0 no (or
 * no bound), -EINVAL when the file does not hold a decimal integer.
 */
static int mltune_bound_holds(const struct mltune_knob *k,
			      const struct mltune_slot *sl)
{
	int c;

	if (k->cmp == MLTUNE_CMP_EQ)
		return 0;
	if (!mltune_int_cmp(sl->old, sl->old_len, k->value, k->value_len, &c))
		return -EINVAL;
	return k->cmp == MLTUNE_CMP_GE ? c >= 0 : c <= 0;
}

/* Open and capture every knob; nothing is written here. */
static int mltune_prepare(struct mltune_switch *sw)
{
	unsigned int i, nr_new = 0;

	for (i = 0; i < sw->nr; i++) {
		const struct mltune_knob *k = &sw->knobs[i];
		struct mltune_slot *sl = &sw->slots[i];
		int err;

		sl->file = mltune_open_knob(k);
		if (IS_ERR(sl->file)) {
			err = PTR_ERR(sl->file);
			sl->file = NULL;
		} else {
			err = mltune_capture(sl, k);
			if (!err && !sw->restore)
				err = mltune_bound_holds(k, sl);
		}
		if (err > 0) {
			sl->state = MLTUNE_SLOT_KEPT;
			sw->nr_kept++;
			continue;
		}
		if (err) {
			sl->err = err;
			if (k->optional && err != -ENOMEM) {
				sl->state = MLTUNE_SLOT_SKIPPED;
				sw->nr_skipped++;
				continue;
			}
			sw->fail = i;
			return err;
		}
		sl->state = MLTUNE_SLOT_OPEN;
		if (sw->restore || mltune_base_find(k->path))
			continue;
		if (mltune_nr_base + ++nr_new > MLTUNE_MAX_BASELINE) {
			sw->fail = i;
			return -ENOSPC;
		}
		sl->base = mltune_base_alloc(k, sl->old, sl->old_len);
		if (!sl->base) {
			sw->fail = i;
			return -ENOMEM;
		}
	}
	return 0;
}

static int mltune_apply(void *arg)
{
	struct mltune_switch *sw = arg;
	u64 start = ktime_get_ns();
	unsigned int i;
	int err;

	err = mltune_prepare(sw);
	for (i = 0; !err && i < sw->nr; i++) {
		const struct mltune_knob *k = &sw->knobs[i];
		struct mltune_slot *sl = &sw->slots[i];

		if (sl->state != MLTUNE_SLOT_OPEN)
			continue;
		err = mltune_write(sl->file, k->value, k->value_len);
		if (err) {
			sl->err = err;
			if (k->optional) {
				sl->state = MLTUNE_SLOT_SKIPPED;
				sw->nr_skipped++;
				err = 0;
				continue;
			}
			sw->fail = i;
			break;
		}
		sl->state = MLTUNE_SLOT_WRITTEN;
		sw->nr_written++;
	}
	sw->err = err;
	/*
	 * The baseline learns the knobs a switch wrote only when it applied:
	 * a rolled-back switch leaves every file of the tree as it was.
	 */
	for (i = 0; !err && i < sw->nr; i++) {
		struct mltune_slot *sl = &sw->slots[i];

		if (sl->base && sl->state == MLTUNE_SLOT_WRITTEN) {
			mltune_base_add(sl->base);
			sl->base = NULL;
		}
	}
	/* Roll back in reverse; keep going past errors, report the first. */
	for (i = sw->nr; err && i-- > 0; ) {
		struct mltune_slot *sl = &sw->slots[i];
		int rerr;

		if (sl->state != MLTUNE_SLOT_WRITTEN)
			continue;
		rerr = mltune_write(sl->file, sl->old, sl->old_len);
		if (rerr) {
			pr_err_ratelimited("rollback of %s failed: %d\n",
					   sw->knobs[i].path, rerr);
			if (!sw->rollback_err)
				sw->rollback_err = rerr;
		}
	}
	for (i = 0; i < sw->nr; i++) {
		struct mltune_slot *sl = &sw->slots[i];

		if (sl->file)
			filp_close(sl->file, NULL);
		kfree(sl->old);
		kfree(sl->base);
	}
	sw->duration_ns = ktime_get_ns() - start;
	return 0;
}

static void mltune_record(const char *name, const struct mltune_switch *sw)
{
	const char *result = "ok";
	size_t n;
	unsigned int i;

	if (sw->err)
		result = sw->rollback_err ? "rollback-failed" : "rolled-back";
	n = scnprintf(mltune_last, PAGE_SIZE,
		      "profile=%s result=%s errno=%d knob=%s index=%d duration_ns=%llu generation=%llu knobs=%u written=%u skipped=%u kept=%u\n",
		      name, result, sw->err,
		      sw->fail >= 0 ? sw->knobs[sw->fail].path : "-", sw->fail,
		      sw->duration_ns, mltune_generation, sw->nr,
		      sw->err ? 0 : sw->nr_written, sw->nr_skipped,
		      sw->err ? 0 : sw->nr_kept);
	for (i = 0; i < sw->nr; i++) {
		if (sw->slots[i].state == MLTUNE_SLOT_SKIPPED)
			n += scnprintf(mltune_last + n, PAGE_SIZE - n,
				       "skipped=%s errno=%d\n",
				       sw->knobs[i].path, sw->slots[i].err);
		else if (sw->slots[i].state == MLTUNE_SLOT_KEPT && !sw->err)
			n += scnprintf(mltune_last + n, PAGE_SIZE - n,
				       "kept=%s\n", sw->knobs[i].path);
	}
}

static void mltune_announce(const char *result, const char *previous)
{
	char profile[16 + MLTUNE_NAME_MAX], prev[24 + MLTUNE_NAME_MAX];
	char gen[40], res[40];
	char *envp[5];
	int ret;

	sysfs_notify(mltune_kobj, NULL, "profile");
	sysfs_notify(mltune_kobj, NULL, "generation");
	snprintf(profile, sizeof(profile), "MLTUNE_PROFILE=%s", mltune_active);
	snprintf(prev, sizeof(prev), "MLTUNE_PREVIOUS=%s", previous);
	snprintf(gen, sizeof(gen), "MLTUNE_GENERATION=%llu", mltune_generation);
	snprintf(res, sizeof(res), "MLTUNE_RESULT=%s", result);
	envp[0] = profile;
	envp[1] = prev;
	envp[2] = gen;
	envp[3] = res;
	envp[4] = NULL;
	ret = kobject_uevent_env(&mltune_miscdev.this_device->kobj, KOBJ_CHANGE,
				 envp);
	if (ret)
		pr_warn_ratelimited("switch uevent failed: %d\n", ret);
}

/* The baseline as a knob list, last written first. */
static struct mltune_knob *mltune_base_knobs(void)
{
	struct mltune_knob *knobs;
	struct mltune_base *b;
	unsigned int i = mltune_nr_base;

	knobs = mltune_alloc(kvmalloc_array(max(i, 1U), sizeof(*knobs), GFP_KERNEL));
	if (!knobs)
		return NULL;
	list_for_each_entry(b, &mltune_base_list, node)
		knobs[--i] = b->knob;
	return knobs;
}

int mltune_switch_to(const char *name, const struct mltune_knobset *set,
		     bool announce)
{
	struct mltune_switch sw = { .fail = -1 };
	struct mltune_knob *base_knobs = NULL;
	char previous[MLTUNE_NAME_MAX];

	lockdep_assert_held(&mltune_lock);
	strscpy(previous, mltune_active, sizeof(previous));
	if (!set) {
		base_knobs = mltune_base_knobs();
		if (!base_knobs)
			return -ENOMEM;
		sw.knobs = base_knobs;
		sw.nr = mltune_nr_base;
		sw.restore = true;
	} else {
		sw.knobs = set->knobs;
		sw.nr = set->nr;
	}
	sw.slots = mltune_alloc(kvcalloc(max(sw.nr, 1U), sizeof(*sw.slots), GFP_KERNEL));
	if (!sw.slots) {
		kvfree(base_knobs);
		return -ENOMEM;
	}
	mltune_call(mltune_apply, &sw);

	mltune_generation++;
	if (!sw.err)
		strscpy(mltune_active, name, sizeof(mltune_active));
	else
		pr_warn_ratelimited("switch to %s rolled back: knob %s failed with %d\n",
				    name, sw.knobs[sw.fail].path, sw.err);
	mltune_record(name, &sw);
	if (announce)
		mltune_announce(sw.err ? "rolled-back" : "ok", previous);
	kvfree(sw.slots);
	kvfree(base_knobs);
	return sw.err;
}

const char *mltune_switch_active(void)
{
	lockdep_assert_held(&mltune_lock);
	return mltune_active;
}

u64 mltune_switch_generation(void)
{
	lockdep_assert_held(&mltune_lock);
	return mltune_generation;
}

const char *mltune_switch_last(void)
{
	lockdep_assert_held(&mltune_lock);
	return mltune_last;
}

struct mltune_knob *mltune_baseline_knobs(unsigned int *nr)
{
	struct mltune_knob *knobs;
	struct mltune_base *b;
	unsigned int i = 0;

	lockdep_assert_held(&mltune_lock);
	knobs = mltune_alloc(kvmalloc_array(max(mltune_nr_base, 1U),
					    sizeof(*knobs), GFP_KERNEL));
	if (!knobs)
		return NULL;
	list_for_each_entry(b, &mltune_base_list, node)
		knobs[i++] = b->knob;
	*nr = i;
	return knobs;
}

/* --- load and unload --- */

int mltune_switch_init(void)
{
	mltune_last = kzalloc(PAGE_SIZE, GFP_KERNEL);
	mltune_readbuf = kmalloc(MLTUNE_VALUE_MAX + 2, GFP_KERNEL);
	mltune_pathbuf = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!mltune_last || !mltune_readbuf || !mltune_pathbuf) {
		mltune_switch_exit();
		return -ENOMEM;
	}
	strscpy(mltune_last, "none\n", PAGE_SIZE);
	return 0;
}

/* Called once no sysfs handler can run any more. */
void mltune_switch_unload(void)
{
	int ret;

	if (keep_on_unload)
		return;
	mutex_lock(&mltune_lock);
	ret = mltune_switch_to("baseline", NULL, false);
	mutex_unlock(&mltune_lock);
	if (ret)
		pr_err("restoring the baseline on unload failed: %d\n", ret);
}

void mltune_switch_exit(void)
{
	struct mltune_base *b, *tb;

	list_for_each_entry_safe(b, tb, &mltune_base_list, node) {
		hash_del(&b->hnode);
		list_del(&b->node);
		kfree(b);
	}
	mltune_nr_base = 0;
	kfree(mltune_pathbuf);
	kfree(mltune_readbuf);
	kfree(mltune_last);
	mltune_pathbuf = NULL;
	mltune_readbuf = NULL;
	mltune_last = NULL;
}
