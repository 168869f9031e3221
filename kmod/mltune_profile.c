// SPDX-License-Identifier: GPL-2.0
/*
 * mltune profiles: the sysfs side. Named lists of knobs, switched
 * all-or-nothing.
 *
 * A knob is a file under /proc/sys or an allowlist of /sys subtrees, a
 * value and a required/optional flag. Profiles are defined through sysfs
 * with plain shell, staged then committed (the DAMON pattern), and switched
 * with one write:
 *
 *   echo +batch > /sys/kernel/mltune/profiles/control
 *   cat batch.knobs > /sys/kernel/mltune/profiles/batch/knobs
 *   echo commit > /sys/kernel/mltune/profiles/batch/state
 *   echo batch > /sys/kernel/mltune/profile
 *
 * The parts: knob lists are parsed in mltune_knobs.c (paths checked by
 * mltune_allow.c against include/mltune_knobs_allow.h), switched by
 * mltune_switch.c, which also keeps the baseline; this file holds the
 * profiles and the sysfs handlers. The writer of any file needs
 * CAP_SYS_ADMIN in the initial user namespace (mltune_check_writer()).
 *
 * ABI: Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "mltune.h"
#include "mltune_common.h"
#include "mltune_knobs.h"
#include "mltune_profile.h"
#include "mltune_switch.h"
#include "mltune_builtin.h"

/*
 * A profile: /sys/kernel/mltune/profiles/NAME.
 *
 * @node, @dead, @has_staged, @staged_bad, @staged, @staged_len and
 * @committed are protected by mltune_lock (rules in mltune_switch.c), as
 * are mltune_profiles and mltune_nr_profiles. The memory lives until the
 * kobject's last reference goes; sysfs handlers of the directory are
 * drained by kernfs before that, so a handler may always look at @dead
 * under mltune_lock. Removing a profile unlinks it and marks it dead
 * under the lock, then drops the kobject after unlocking.
 */
struct mltune_profile {
	struct kobject kobj;
	struct list_head node;		/* in mltune_profiles */
	char name[MLTUNE_NAME_MAX];
	bool dead;			/* unlinked from mltune_profiles */
	bool has_staged;		/* knobs written since the last commit */
	bool staged_bad;		/* an append failed: commit refused */
	char *staged;			/* raw text written to knobs */
	size_t staged_len;
	struct mltune_knobset *committed;	/* NULL until the first commit */
};

static LIST_HEAD(mltune_profiles);
static unsigned int mltune_nr_profiles;

/* Set at init, cleared at exit; no lock needed in between. */
static struct kobject *mltune_profiles_kobj;

static struct mltune_profile *mltune_find(const char *name)
{
	struct mltune_profile *p;

	list_for_each_entry(p, &mltune_profiles, node)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

/* Switch to profile @name or "baseline"; caller holds mltune_lock. */
static int mltune_profile_switch(const char *name)
{
	struct mltune_profile *p;

	lockdep_assert_held(&mltune_lock);
	if (!strcmp(name, "baseline"))
		return mltune_switch_to(name, NULL, true);
	p = mltune_find(name);
	if (!p || !p->committed)
		return mltune_refuse(-ENOENT, "switch to unknown profile %s\n",
				     name);
	return mltune_switch_to(name, p->committed, true);
}

/* --- sysfs: helpers --- */

/* A profile name (mltune_name_ok()), at most one trailing newline. */
static int mltune_parse_name(const char *buf, size_t count, char *name)
{
	if (count && buf[count - 1] == '\n')
		count--;
	if (!count || count >= MLTUNE_NAME_MAX)
		return mltune_refuse(-EINVAL, "profile name of %zu bytes\n",
				     count);
	if (!mltune_name_ok(buf, count))
		return mltune_refuse(-EINVAL, "bad byte in profile name %.*s\n",
				     (int)count, buf);
	memcpy(name, buf, count);
	name[count] = '\0';
	return 0;
}

static bool mltune_reserved(const char *name)
{
	return !strcmp(name, "none") || !strcmp(name, "baseline") ||
	       !strcmp(name, "control");
}

/* Copy the window [pos, pos + count) of text[0..len) to buf. */
static ssize_t mltune_read_window(const char *text, size_t len, char *buf,
				  loff_t pos, size_t count)
{
	if (pos < 0)
		return -EINVAL;
	if (pos >= len)
		return 0;
	count = min_t(size_t, count, len - pos);
	memcpy(buf, text + pos, count);
	return count;
}

/* Print knobs[0..nr) and copy a window of it; caller holds mltune_lock. */
static ssize_t mltune_read_knobs(const struct mltune_knob *knobs,
				 unsigned int nr, bool flags, char *buf,
				 loff_t pos, size_t count)
{
	size_t len = mltune_print_knobs(NULL, knobs, nr, flags);
	ssize_t ret;
	char *text;

	if (pos >= len)
		return 0;
	text = mltune_alloc(kvmalloc(len, GFP_KERNEL));
	if (!text)
		return -ENOMEM;
	mltune_print_knobs(text, knobs, nr, flags);
	ret = mltune_read_window(text, len, buf, pos, count);
	kvfree(text);
	return ret;
}

/* --- /sys/kernel/mltune/profiles/NAME --- */

static struct mltune_profile *to_profile(struct kobject *kobj)
{
	return container_of(kobj, struct mltune_profile, kobj);
}

static ssize_t knobs_read(struct file *file, struct kobject *kobj,
			  MLTUNE_BIN_ATTR *attr, char *buf, loff_t pos,
			  size_t count)
{
	struct mltune_profile *p = to_profile(kobj);
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	if (p->dead)
		ret = -ENOENT;
	else if (p->committed)
		ret = mltune_read_knobs(p->committed->knobs, p->committed->nr,
					true, buf, pos, count);
	else
		ret = 0;
	mutex_unlock(&mltune_lock);
	return ret;
}

/*
 * Writing at offset 0 replaces the staged text, at the end of the staged
 * text appends to it (cat of a file longer than a page). Every complete
 * line is validated before anything is stored; commit validates the rest.
 * A failed append leaves the part already staged uncommittable until the
 * list is written again from offset 0.
 */
static ssize_t knobs_write(struct file *file, struct kobject *kobj,
			   MLTUNE_BIN_ATTR *attr, char *buf, loff_t pos,
			   size_t count)
{
	struct mltune_profile *p = to_profile(kobj);
	struct mltune_span *spans;
	char *text;
	int ret;

	ret = mltune_check_writer("knobs");
	if (ret)
		return ret;
	ret = mltune_check_bytes(buf, count);
	if (ret)
		return ret;
	if (pos < 0 || pos + count > MLTUNE_TEXT_MAX)
		return mltune_refuse(-EFBIG, "knob list of %s over %d bytes\n",
				     p->name, MLTUNE_TEXT_MAX);
	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	if (p->dead) {
		ret = -ENOENT;
		goto out;
	}
	if (pos && (!p->has_staged || pos != p->staged_len)) {
		ret = mltune_refuse(-EINVAL, "knobs of %s written at offset %lld\n",
				    p->name, pos);
		goto out;
	}
	text = mltune_alloc(kvmalloc(max_t(size_t, pos + count, 1), GFP_KERNEL));
	if (!text) {
		ret = -ENOMEM;
		goto out;
	}
	spans = mltune_alloc(kmalloc_array(MLTUNE_MAX_KNOBS, sizeof(*spans), GFP_KERNEL));
	if (!spans) {
		kvfree(text);
		ret = -ENOMEM;
		goto out;
	}
	if (pos)
		memcpy(text, p->staged, pos);
	memcpy(text + pos, buf, count);
	ret = mltune_parse(text, pos + count, true, spans);
	kfree(spans);
	if (ret < 0) {
		kvfree(text);
		/* The earlier part of this list is staged: refuse to commit it. */
		if (pos)
			p->staged_bad = true;
		goto out;
	}
	kvfree(p->staged);
	p->staged = text;
	p->staged_len = pos + count;
	p->has_staged = true;
	if (!pos)
		p->staged_bad = false;
	ret = 0;
out:
	mutex_unlock(&mltune_lock);
	return ret ? ret : count;
}

static const struct bin_attribute mltune_knobs_attr = {
	.attr = { .name = "knobs", .mode = 0644 },
	.read = knobs_read,
	.write = knobs_write,
};

static ssize_t state_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct mltune_profile *p = to_profile(kobj);
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	if (p->dead)
		ret = -ENOENT;
	else
		ret = sysfs_emit(buf, "%s\n",
				 p->committed && !p->has_staged ? "committed" :
								  "staged");
	mutex_unlock(&mltune_lock);
	return ret;
}

static ssize_t state_store(struct kobject *kobj, struct kobj_attribute *attr,
			   const char *buf, size_t count)
{
	struct mltune_profile *p = to_profile(kobj);
	struct mltune_knobset *set;
	int ret;

	ret = mltune_check_writer("state");
	if (ret)
		return ret;
	ret = mltune_check_nul("state", buf, count);
	if (ret)
		return ret;
	if (!sysfs_streq(buf, "commit"))
		return mltune_refuse(-EINVAL, "state of %s: only \"commit\" is accepted\n",
				     p->name);
	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	if (p->dead) {
		ret = -ENOENT;
		goto out;
	}
	if (!p->has_staged && p->committed)
		goto out;
	if (p->staged_bad) {
		ret = mltune_refuse(-EINVAL, "knobs of %s: a write failed, write the list again\n",
				    p->name);
		goto out;
	}
	ret = mltune_build(p->staged ? p->staged : "", p->staged_len, &set);
	if (ret)
		goto out;
	kvfree(p->committed);
	p->committed = set;
	kvfree(p->staged);
	p->staged = NULL;
	p->staged_len = 0;
	p->has_staged = false;
out:
	mutex_unlock(&mltune_lock);
	return ret ? ret : count;
}

static struct kobj_attribute mltune_state_attr = __ATTR_RW(state);

static struct attribute *mltune_profile_attrs[] = {
	&mltune_state_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(mltune_profile);

static void mltune_profile_release(struct kobject *kobj)
{
	struct mltune_profile *p = to_profile(kobj);

	kvfree(p->staged);
	kvfree(p->committed);
	kfree(p);
}

static const struct kobj_type mltune_profile_ktype = {
	.release = mltune_profile_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = mltune_profile_groups,
};

/* Create profiles/NAME; caller holds mltune_lock. */
static struct mltune_profile *mltune_profile_create(const char *name)
{
	struct mltune_profile *p;
	int ret;

	lockdep_assert_held(&mltune_lock);
	if (mltune_find(name))
		return ERR_PTR(mltune_refuse(-EEXIST, "profile %s exists\n", name));
	if (mltune_nr_profiles >= MLTUNE_MAX_PROFILES)
		return ERR_PTR(mltune_refuse(-ENOSPC, "more than %d profiles\n",
					     MLTUNE_MAX_PROFILES));
	p = mltune_alloc(kzalloc(sizeof(*p), GFP_KERNEL));
	if (!p)
		return ERR_PTR(-ENOMEM);
	strscpy(p->name, name, sizeof(p->name));
	ret = kobject_init_and_add(&p->kobj, &mltune_profile_ktype,
				   mltune_profiles_kobj, "%s", name);
	if (!ret)
		ret = sysfs_create_bin_file(&p->kobj, &mltune_knobs_attr);
	if (ret) {
		kobject_put(&p->kobj);
		return ERR_PTR(ret);
	}
	list_add_tail(&p->node, &mltune_profiles);
	mltune_nr_profiles++;
	return p;
}

/* Unlink profile @p; caller holds mltune_lock, puts the kobject later. */
static void mltune_profile_unlink(struct mltune_profile *p)
{
	lockdep_assert_held(&mltune_lock);
	list_del(&p->node);
	p->dead = true;
	mltune_nr_profiles--;
}

/* --- /sys/kernel/mltune/profiles/control --- */

static ssize_t control_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct mltune_profile *p;
	ssize_t ret;
	int n = 0;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	list_for_each_entry(p, &mltune_profiles, node)
		n += sysfs_emit_at(buf, n, "%s\n", p->name);
	mutex_unlock(&mltune_lock);
	return n;
}

static ssize_t control_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	char name[MLTUNE_NAME_MAX];
	struct mltune_profile *p;
	int ret;

	ret = mltune_check_writer("profiles/control");
	if (ret)
		return ret;
	if (count < 2 || (buf[0] != '+' && buf[0] != '-'))
		return mltune_refuse(-EINVAL, "profiles/control: want +NAME or -NAME\n");
	ret = mltune_parse_name(buf + 1, count - 1, name);
	if (ret)
		return ret;
	if (buf[0] == '+' && mltune_reserved(name))
		return mltune_refuse(-EINVAL, "profile name %s is reserved\n",
				     name);
	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	p = mltune_find(name);
	if (buf[0] == '+') {
		p = mltune_profile_create(name);
		ret = PTR_ERR_OR_ZERO(p);
		p = NULL;
	} else if (!p) {
		ret = mltune_refuse(-ENOENT, "remove unknown profile %s\n", name);
	} else if (!strcmp(mltune_switch_active(), name)) {
		ret = mltune_refuse(-EBUSY, "remove active profile %s\n", name);
		p = NULL;
	} else {
		mltune_profile_unlink(p);
	}
	mutex_unlock(&mltune_lock);
	/* Outside the lock: removal drains the profile's handlers. */
	if (p)
		kobject_put(&p->kobj);
	return ret ? ret : count;
}

static struct kobj_attribute mltune_control_attr = __ATTR_RW(control);

/* --- /sys/kernel/mltune: profile, generation, last_switch, baseline --- */

static ssize_t profile_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	ret = sysfs_emit(buf, "%s\n", mltune_switch_active());
	mutex_unlock(&mltune_lock);
	return ret;
}

static ssize_t profile_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	char name[MLTUNE_NAME_MAX];
	int ret;

	ret = mltune_check_writer("profile");
	if (ret)
		return ret;
	ret = mltune_parse_name(buf, count, name);
	if (ret)
		return ret;
	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	ret = mltune_profile_switch(name);
	mutex_unlock(&mltune_lock);
	return ret ? ret : count;
}

static ssize_t generation_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	ret = sysfs_emit(buf, "%llu\n", mltune_switch_generation());
	mutex_unlock(&mltune_lock);
	return ret;
}

static ssize_t last_switch_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	ret = sysfs_emit(buf, "%s", mltune_switch_last());
	mutex_unlock(&mltune_lock);
	return ret;
}

static ssize_t baseline_read(struct file *file, struct kobject *kobj,
			     MLTUNE_BIN_ATTR *attr, char *buf, loff_t pos,
			     size_t count)
{
	struct mltune_knob *knobs;
	unsigned int nr;
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	knobs = mltune_baseline_knobs(&nr);
	if (knobs) {
		ret = mltune_read_knobs(knobs, nr, false, buf, pos, count);
		kvfree(knobs);
	} else {
		ret = -ENOMEM;
	}
	mutex_unlock(&mltune_lock);
	return ret;
}

static const struct bin_attribute mltune_baseline_attr = {
	.attr = { .name = "baseline", .mode = 0444 },
	.read = baseline_read,
};

static struct kobj_attribute mltune_profile_attr = __ATTR_RW(profile);
static struct kobj_attribute mltune_generation_attr = __ATTR_RO(generation);
static struct kobj_attribute mltune_last_switch_attr = __ATTR_RO(last_switch);

static struct attribute *mltune_switch_attrs[] = {
	&mltune_profile_attr.attr,
	&mltune_generation_attr.attr,
	&mltune_last_switch_attr.attr,
	NULL,
};

static const struct attribute_group mltune_switch_group = {
	.attrs = mltune_switch_attrs,
};

/* --- init and exit --- */

static int mltune_add_builtins(void)
{
	struct mltune_knobset *set;
	struct mltune_profile *p;
	size_t i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(mltune_builtins); i++) {
		const struct mltune_builtin *b = &mltune_builtins[i];

		ret = mltune_build(b->knobs, strlen(b->knobs), &set);
		if (ret) {
			pr_err("built-in profile %s is invalid: %d\n", b->name,
			       ret);
			return ret;
		}
		mutex_lock(&mltune_lock);
		p = mltune_profile_create(b->name);
		if (IS_ERR(p)) {
			mutex_unlock(&mltune_lock);
			kvfree(set);
			return PTR_ERR(p);
		}
		p->committed = set;
		mutex_unlock(&mltune_lock);
	}
	return 0;
}

static void mltune_free_all(void)
{
	struct mltune_profile *p, *tp;
	LIST_HEAD(dead);

	mutex_lock(&mltune_lock);
	list_for_each_entry_safe(p, tp, &mltune_profiles, node) {
		mltune_profile_unlink(p);
		list_add(&p->node, &dead);
	}
	mutex_unlock(&mltune_lock);
	list_for_each_entry_safe(p, tp, &dead, node)
		kobject_put(&p->kobj);
	kobject_put(mltune_profiles_kobj);
	mltune_profiles_kobj = NULL;
	mltune_switch_exit();
}

int mltune_profile_init(void)
{
	int ret;

	ret = mltune_switch_init();
	if (ret)
		return ret;
	ret = -ENOMEM;
	mltune_profiles_kobj = kobject_create_and_add("profiles", mltune_kobj);
	if (!mltune_profiles_kobj)
		goto err;
	ret = sysfs_create_file(mltune_profiles_kobj, &mltune_control_attr.attr);
	if (ret)
		goto err;
	ret = mltune_add_builtins();
	if (ret)
		goto err;
	ret = sysfs_create_group(mltune_kobj, &mltune_switch_group);
	if (ret)
		goto err;
	ret = sysfs_create_bin_file(mltune_kobj, &mltune_baseline_attr);
	if (ret)
		goto err_group;
	return 0;

err_group:
	sysfs_remove_group(mltune_kobj, &mltune_switch_group);
err:
	mltune_free_all();
	return ret;
}

void mltune_profile_exit(void)
{
	/* No handler runs after these return; none holds mltune_lock now. */
	sysfs_remove_bin_file(mltune_kobj, &mltune_baseline_attr);
	sysfs_remove_group(mltune_kobj, &mltune_switch_group);
	sysfs_remove_file(mltune_profiles_kobj, &mltune_control_attr.attr);

	mltune_switch_unload();
	mltune_free_all();
}
