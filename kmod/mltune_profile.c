// SPDX-License-Identifier: GPL-2.0
/*
 * mltune profiles: named lists of knobs, switched all-or-nothing.
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
 * A switch opens every knob and captures its value, then writes the knobs
 * in order; on the first failure it writes the captured values back in
 * reverse. The value each knob had before mltune first wrote it is kept as
 * the baseline, restored by "echo baseline > profile" and on unload.
 *
 * Knob files are opened like the kernel applies sysctl.*= boot arguments
 * (fs/proc/proc_sysctl.c, process_sysctl_arg()): through private kernel
 * mounts of proc and sysfs, file_open_root_mnt() and kernel_read/write().
 * The mounts are made and every knob access runs on the module's ordered
 * workqueue, so it uses the init credentials (init_cred: all capabilities,
 * kernel SELinux/AppArmor context), the initial network namespace (for
 * /proc/sys/net and sysfs net tags) and the initial pid namespace, whatever
 * namespaces and credentials the writer of the sysfs file has. The writer
 * itself needs CAP_SYS_ADMIN in the initial user namespace.
 *
 * ABI: Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/dcache.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/kobject.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/stringhash.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "mltune.h"
#include "mltune_compat.h"
#include "mltune_profile.h"
#include "mltune_builtin.h"

#ifdef MLTUNE_HAVE_BIN_ATTR_CONST
#define MLTUNE_BIN_ATTR const struct bin_attribute
#else
#define MLTUNE_BIN_ATTR struct bin_attribute
#endif

/* Limits; writes beyond them fail without changing anything. */
#define MLTUNE_NAME_MAX		32		/* profile name, with NUL */
#define MLTUNE_PATH_MAX		256		/* knob path, with NUL */
#define MLTUNE_VALUE_MAX	4096		/* knob value bytes */
#define MLTUNE_MAX_PROFILES	64
#define MLTUNE_MAX_KNOBS	256		/* per profile */
#define MLTUNE_TEXT_MAX		(64 * 1024)	/* knob list text */
#define MLTUNE_MAX_BASELINE	4096		/* distinct knobs ever written */

static bool keep_on_unload;
module_param(keep_on_unload, bool, 0644);
MODULE_PARM_DESC(keep_on_unload,
		 "Leave the knobs as they are on unload instead of restoring the baseline");

enum mltune_tree {
	MLTUNE_PROC,	/* path starts with /proc/ */
	MLTUNE_SYS,	/* path starts with /sys/ */
};

/* One knob; strings live in the allocation of the owning set or entry. */
struct mltune_knob {
	const char *path;	/* absolute, validated by mltune_check_path() */
	const char *value;	/* value_len bytes, then '\n', then NUL */
	unsigned int value_len;
	u8 tree;		/* enum mltune_tree */
	bool optional;		/* missing or failing: skip, do not roll back */
};

/* A parsed, validated knob list. Immutable once built. */
struct mltune_knobset {
	unsigned int nr;
	struct mltune_knob knobs[];
	/* followed by the strings */
};

/*
 * A profile: /sys/kernel/mltune/profiles/NAME.
 *
 * @node, @dead, @has_staged, @staged_bad, @staged, @staged_len and
 * @committed are protected by mltune_lock. The memory lives until the kobject's last
 * reference goes; sysfs handlers of the directory are drained by kernfs
 * before that, so a handler may always look at @dead under mltune_lock.
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

/* The value a knob had before mltune first wrote it. */
struct mltune_base {
	struct hlist_node hnode;	/* in mltune_base_hash */
	struct list_head node;		/* in mltune_base_list, first write first */
	struct mltune_knob knob;	/* value: the captured old value */
	char strings[];
};

/*
 * mltune_lock serializes every change and every switch. It protects:
 *   mltune_profiles, mltune_nr_profiles and the fields of each profile
 *   listed above; mltune_active, mltune_generation, mltune_last;
 *   mltune_base_hash, mltune_base_list, mltune_nr_base; mltune_readbuf and
 *   mltune_pathbuf (used by the switch worker while the switching task
 *   holds the lock and waits for it).
 * Rules:
 *   - Store and show handlers take it with mutex_lock_killable(); a killed
 *     task waiting for it returns -EINTR having changed nothing.
 *   - Once a switch has started, the task holding the lock waits for the
 *     worker uninterruptibly: a killed writer cannot leave a half-applied
 *     profile, the worker finishes or rolls back first.
 *   - Never remove a sysfs file or kobject while holding it: removal waits
 *     for running handlers (kernfs drain), which may wait for the lock.
 *     Removing a profile unlinks it and marks it dead under the lock, then
 *     drops the kobject after unlocking; its handlers see @dead.
 *   - The worker never takes it and never writes /sys/kernel/mltune (the
 *     /sys allowlist does not contain it).
 */
static DEFINE_MUTEX(mltune_lock);
static LIST_HEAD(mltune_profiles);
static unsigned int mltune_nr_profiles;
static char mltune_active[MLTUNE_NAME_MAX] = "none";
static u64 mltune_generation;
static char *mltune_last;		/* last_switch text, PAGE_SIZE */
static DEFINE_HASHTABLE(mltune_base_hash, 8);
static LIST_HEAD(mltune_base_list);
static unsigned int mltune_nr_base;
static char *mltune_readbuf;		/* MLTUNE_VALUE_MAX + 2 */
static char *mltune_pathbuf;		/* PATH_MAX */

/* Set at init, cleared at exit; no lock needed in between. */
static struct kobject *mltune_profiles_kobj;
static struct vfsmount *mltune_proc_mnt;
static struct vfsmount *mltune_sys_mnt;
static struct workqueue_struct *mltune_wq;

/* Log a refused write (rate limited) and evaluate to its errno. */
#define mltune_refuse(err, fmt, ...) ({					\
	int __err = (err);						\
									\
	pr_warn_ratelimited("refused (%d): " fmt, __err, ##__VA_ARGS__);	\
	__err;								\
})

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

/* Run fn(arg) on mltune_wq and wait for it, uninterruptibly. */
static int mltune_call(int (*fn)(void *arg), void *arg)
{
	struct mltune_call c = { .fn = fn, .arg = arg };

	INIT_WORK_ONSTACK(&c.work, mltune_call_fn);
	queue_work(mltune_wq, &c.work);
	flush_work(&c.work);
	destroy_work_on_stack(&c.work);
	return c.ret;
}

/* --- paths: lexical checks at definition, resolved checks at open --- */

/*
 * Allowed knob trees, relative to the proc or sysfs root. "*" matches one
 * path component, a final "**" one or more. Both the requested path and,
 * after opening, the path the file really has on the private mount must
 * match (symbolic links inside sysfs are followed but may not leave these
 * trees; /sys/block/NAME is a link into /sys/devices, checked separately).
 */
/*
 * Not /proc/irq: its files have no ->write_iter, so kernel_write() refuses
 * them; IRQ affinities are steered by feeder/cpus (mltune_feeder.c).
 */
static const char *const mltune_proc_allow[] = {
	"sys/**",
};

static const char *const mltune_sys_allow[] = {
	"kernel/mm/transparent_hugepage/**",
	"devices/system/cpu/cpufreq/**",
	"devices/system/cpu/cpuidle/**",
	"devices/system/cpu/*/cpufreq/**",
	"devices/system/cpu/*/cpuidle/**",
	"devices/virtual/workqueue/**",
	"block/*/queue/**",
};

/* Match s[0..len) (components separated by '/') against pattern pat. */
static bool mltune_match(const char *pat, const char *s, size_t len)
{
	const char *end = s + len;

	while (*pat) {
		const char *pe = strchrnul(pat, '/');
		size_t pl = pe - pat;
		const char *se;

		if (s >= end)
			return false;
		se = memchr(s, '/', end - s);
		if (!se)
			se = end;
		if (pl == 2 && !memcmp(pat, "**", 2))
			return true;
		if (!(pl == 1 && *pat == '*') &&
		    (pl != se - s || memcmp(pat, s, pl)))
			return false;
		pat = *pe ? pe + 1 : pe;
		s = se < end ? se + 1 : end;
	}
	return s >= end;
}

static bool mltune_allowed(const char *const *pats, size_t n, const char *s,
			   size_t len)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (mltune_match(pats[i], s, len))
			return true;
	return false;
}

/* True if s[0..len) has a component equal to c. */
static bool mltune_has_component(const char *s, size_t len, const char *c)
{
	size_t cl = strlen(c);
	const char *end = s + len;

	while (s < end) {
		const char *se = memchr(s, '/', end - s);

		if (!se)
			se = end;
		if (se - s == cl && !memcmp(s, c, cl))
			return true;
		s = se + 1;
	}
	return false;
}

/* Offset of the part below the proc or sysfs root. */
static size_t mltune_rel_off(u8 tree)
{
	return tree == MLTUNE_PROC ? strlen("/proc/") : strlen("/sys/");
}

/*
 * Validate a knob path p[0..len) (bytes already checked printable, no
 * space): absolute, no empty, "." or ".." component, inside the allowlist.
 */
static int mltune_check_path(const char *p, size_t len, u8 *tree)
{
	const char *s, *end = p + len;
	size_t off;

	if (len >= MLTUNE_PATH_MAX)
		return mltune_refuse(-EINVAL, "knob path longer than %d bytes\n",
				     MLTUNE_PATH_MAX - 1);
	if (len > 6 && !memcmp(p, "/proc/", 6))
		*tree = MLTUNE_PROC;
	else if (len > 5 && !memcmp(p, "/sys/", 5))
		*tree = MLTUNE_SYS;
	else
		return mltune_refuse(-EINVAL, "knob path %.*s not under /proc or /sys\n",
				     (int)len, p);
	off = mltune_rel_off(*tree);
	for (s = p + off; s <= end; ) {
		const char *se = memchr(s, '/', end - s);

		if (!se)
			se = end;
		if (se == s || (se - s == 1 && s[0] == '.') ||
		    (se - s == 2 && s[0] == '.' && s[1] == '.'))
			return mltune_refuse(-EINVAL, "knob path %.*s: empty, . or .. component\n",
					     (int)len, p);
		s = se + 1;
	}
	if (*tree == MLTUNE_PROC ?
	    !mltune_allowed(mltune_proc_allow, ARRAY_SIZE(mltune_proc_allow),
			    p + off, len - off) :
	    !mltune_allowed(mltune_sys_allow, ARRAY_SIZE(mltune_sys_allow),
			    p + off, len - off))
		return mltune_refuse(-EINVAL, "knob path %.*s outside the allowed trees\n",
				     (int)len, p);
	return 0;
}

/* Where the opened file really is must still be inside the trees. */
static bool mltune_resolved_ok(const struct mltune_knob *k, const char *r)
{
	size_t len = strlen(r);

	if (k->tree == MLTUNE_PROC)
		return mltune_allowed(mltune_proc_allow,
				      ARRAY_SIZE(mltune_proc_allow), r, len);
	if (mltune_allowed(mltune_sys_allow, ARRAY_SIZE(mltune_sys_allow), r,
			   len))
		return true;
	/* /sys/block/NAME/queue/X is /sys/devices/.../NAME/queue/X */
	return !strncmp(k->path, "/sys/block/", 11) &&
	       !strncmp(r, "devices/", 8) &&
	       mltune_has_component(r, len, "queue");
}

/* --- knob lists --- */

/* Printable ASCII and newline only: refuses NUL and control bytes. */
static int mltune_check_bytes(const char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = buf[i];

		if (c != '\n' && (c < 0x20 || c > 0x7e))
			return mltune_refuse(-EINVAL, "byte 0x%02x at offset %zu\n",
					     c, i);
	}
	return 0;
}

struct mltune_span {
	const char *path;
	const char *value;
	u16 path_len;
	u16 value_len;
	u8 tree;
	bool optional;
};

/*
 * Parse a knob list: lines "[?]PATH VALUE", VALUE being the rest of the
 * line (trailing spaces dropped); empty lines and lines starting with '#'
 * are ignored. With @partial, a last line without '\n' is not checked yet
 * (more text may follow in the next write). Returns the number of knobs or
 * -errno; fills @spans (MLTUNE_MAX_KNOBS entries).
 */
static int mltune_parse(const char *text, size_t len, bool partial,
			struct mltune_span *spans)
{
	const char *s = text, *end = text + len;
	int nr = 0, i, ret;

	ret = mltune_check_bytes(text, len);
	if (ret)
		return ret;
	while (s < end) {
		const char *le = memchr(s, '\n', end - s);
		const char *p, *v, *ve;
		struct mltune_span sp = {};

		if (!le) {
			if (partial)
				break;
			le = end;
		}
		p = s;
		s = le + 1;
		while (p < le && *p == ' ')
			p++;
		ve = le;
		while (ve > p && ve[-1] == ' ')
			ve--;
		if (p == ve || *p == '#')
			continue;
		if (*p == '?') {
			sp.optional = true;
			p++;
		}
		v = memchr(p, ' ', ve - p);
		if (!v)
			return mltune_refuse(-EINVAL, "knob line without a value: %.*s\n",
					     (int)min_t(size_t, ve - p, 80), p);
		ret = mltune_check_path(p, v - p, &sp.tree);
		if (ret)
			return ret;
		if (nr >= MLTUNE_MAX_KNOBS)
			return mltune_refuse(-E2BIG, "more than %d knobs\n",
					     MLTUNE_MAX_KNOBS);
		sp.path = p;
		sp.path_len = v - p;
		while (*v == ' ')
			v++;
		sp.value = v;
		if (ve - v > MLTUNE_VALUE_MAX)
			return mltune_refuse(-EINVAL, "value of %.*s longer than %d bytes\n",
					     sp.path_len, p, MLTUNE_VALUE_MAX);
		sp.value_len = ve - v;
		for (i = 0; i < nr; i++)
			if (spans[i].path_len == sp.path_len &&
			    !memcmp(spans[i].path, p, sp.path_len))
				return mltune_refuse(-EINVAL, "knob %.*s listed twice\n",
						     sp.path_len, p);
		spans[nr++] = sp;
	}
	if (partial && end - s > MLTUNE_PATH_MAX + MLTUNE_VALUE_MAX + 2)
		return mltune_refuse(-EINVAL, "knob line longer than %d bytes\n",
				     MLTUNE_PATH_MAX + MLTUNE_VALUE_MAX + 2);
	return nr;
}

/* Parse and validate a complete knob list into a new knob set. */
static int mltune_build(const char *text, size_t len,
			struct mltune_knobset **out)
{
	struct mltune_span *spans;
	struct mltune_knobset *set;
	size_t size;
	char *str;
	int nr, i;

	spans = kmalloc_array(MLTUNE_MAX_KNOBS, sizeof(*spans), GFP_KERNEL);
	if (!spans)
		return -ENOMEM;
	nr = mltune_parse(text, len, false, spans);
	if (nr < 0) {
		kfree(spans);
		return nr;
	}
	size = struct_size(set, knobs, nr);
	for (i = 0; i < nr; i++)
		size += spans[i].path_len + spans[i].value_len + 3;
	set = kvmalloc(size, GFP_KERNEL);
	if (!set) {
		kfree(spans);
		return -ENOMEM;
	}
	set->nr = nr;
	str = (char *)&set->knobs[nr];
	for (i = 0; i < nr; i++) {
		struct mltune_knob *k = &set->knobs[i];

		k->tree = spans[i].tree;
		k->optional = spans[i].optional;
		k->path = str;
		memcpy(str, spans[i].path, spans[i].path_len);
		str += spans[i].path_len;
		*str++ = '\0';
		k->value = str;
		k->value_len = spans[i].value_len;
		memcpy(str, spans[i].value, spans[i].value_len);
		str += spans[i].value_len;
		*str++ = '\n';
		*str++ = '\0';
	}
	kfree(spans);
	*out = set;
	return 0;
}

/* Print a knob list as accepted by the knobs file; returns the length. */
static size_t mltune_print_knobs(char *buf, const struct mltune_knob *k,
				 unsigned int nr, bool flags)
{
	size_t n = 0, l;
	unsigned int i;

	for (i = 0; i < nr; i++, k++) {
		if (flags && k->optional) {
			if (buf)
				buf[n] = '?';
			n++;
		}
		l = strlen(k->path);
		if (buf) {
			memcpy(buf + n, k->path, l);
			buf[n + l] = ' ';
			memcpy(buf + n + l + 1, k->value, k->value_len + 1);
		}
		n += l + 1 + k->value_len + 1;
	}
	return n;
}

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

	b = kmalloc(struct_size(b, strings, pl + old_len + 3), GFP_KERNEL);
	if (!b)
		return NULL;
	b->knob = *k;
	b->knob.optional = false;
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

/* --- switching: runs on mltune_wq while the caller holds mltune_lock --- */

enum mltune_slot_state {
	MLTUNE_SLOT_NONE,
	MLTUNE_SLOT_SKIPPED,	/* optional and missing or failing */
	MLTUNE_SLOT_OPEN,	/* open, old value captured */
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
	if (IS_ERR(r) || *r != '/' || !mltune_resolved_ok(k, r + 1))
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
	sl->old = kmalloc(len + 2, GFP_KERNEL);
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
		if (sl->base) {
			mltune_base_add(sl->base);
			sl->base = NULL;
		}
	}
	sw->err = err;
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
		      "profile=%s result=%s errno=%d knob=%s index=%d duration_ns=%llu generation=%llu knobs=%u written=%u skipped=%u\n",
		      name, result, sw->err,
		      sw->fail >= 0 ? sw->knobs[sw->fail].path : "-", sw->fail,
		      sw->duration_ns, mltune_generation, sw->nr,
		      sw->err ? 0 : sw->nr_written, sw->nr_skipped);
	for (i = 0; i < sw->nr; i++)
		if (sw->slots[i].state == MLTUNE_SLOT_SKIPPED)
			n += scnprintf(mltune_last + n, PAGE_SIZE - n,
				       "skipped=%s errno=%d\n",
				       sw->knobs[i].path, sw->slots[i].err);
}

static void mltune_announce(const char *result)
{
	char profile[16 + MLTUNE_NAME_MAX], gen[40], res[40];
	char *envp[4];
	int ret;

	sysfs_notify(mltune_kobj, NULL, "profile");
	sysfs_notify(mltune_kobj, NULL, "generation");
	snprintf(profile, sizeof(profile), "MLTUNE_PROFILE=%s", mltune_active);
	snprintf(gen, sizeof(gen), "MLTUNE_GENERATION=%llu", mltune_generation);
	snprintf(res, sizeof(res), "MLTUNE_RESULT=%s", result);
	envp[0] = profile;
	envp[1] = gen;
	envp[2] = res;
	envp[3] = NULL;
	ret = kobject_uevent_env(&mltune_miscdev.this_device->kobj, KOBJ_CHANGE,
				 envp);
	if (ret)
		pr_warn_ratelimited("switch uevent failed: %d\n", ret);
}

static struct mltune_profile *mltune_find(const char *name)
{
	struct mltune_profile *p;

	list_for_each_entry(p, &mltune_profiles, node)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

/* The baseline as a knob list, last written first. */
static struct mltune_knob *mltune_base_knobs(void)
{
	struct mltune_knob *knobs;
	struct mltune_base *b;
	unsigned int i = mltune_nr_base;

	knobs = kvmalloc_array(max(i, 1U), sizeof(*knobs), GFP_KERNEL);
	if (!knobs)
		return NULL;
	list_for_each_entry(b, &mltune_base_list, node)
		knobs[--i] = b->knob;
	return knobs;
}

/* Switch to profile @name or "baseline". Caller holds mltune_lock. */
static int mltune_switch_to(const char *name, bool announce)
{
	struct mltune_switch sw = { .fail = -1 };
	struct mltune_knob *base_knobs = NULL;
	struct mltune_profile *p;

	lockdep_assert_held(&mltune_lock);
	if (!strcmp(name, "baseline")) {
		base_knobs = mltune_base_knobs();
		if (!base_knobs)
			return -ENOMEM;
		sw.knobs = base_knobs;
		sw.nr = mltune_nr_base;
		sw.restore = true;
	} else {
		p = mltune_find(name);
		if (!p || !p->committed)
			return mltune_refuse(-ENOENT, "switch to unknown profile %s\n",
					     name);
		sw.knobs = p->committed->knobs;
		sw.nr = p->committed->nr;
	}
	sw.slots = kvcalloc(max(sw.nr, 1U), sizeof(*sw.slots), GFP_KERNEL);
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
		mltune_announce(sw.err ? "rolled-back" : "ok");
	kvfree(sw.slots);
	kvfree(base_knobs);
	return sw.err;
}

/* --- sysfs: common helpers --- */

static int mltune_check_writer(const char *file)
{
	if (capable(CAP_SYS_ADMIN))
		return 0;
	return mltune_refuse(-EPERM, "write to %s by %s[%d] without CAP_SYS_ADMIN\n",
			     file, current->comm, task_pid_nr(current));
}

/* A profile name: [A-Za-z0-9_-], starting with a letter or digit. */
static int mltune_parse_name(const char *buf, size_t count, char *name)
{
	size_t i;

	if (count && buf[count - 1] == '\n')
		count--;
	if (!count || count >= MLTUNE_NAME_MAX)
		return mltune_refuse(-EINVAL, "profile name of %zu bytes\n",
				     count);
	for (i = 0; i < count; i++) {
		char c = buf[i];

		/* ASCII only: the kernel's isalnum() accepts Latin-1. */
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (!i || (c != '_' && c != '-')))
			return mltune_refuse(-EINVAL, "bad byte 0x%02x in a profile name\n",
					     (unsigned char)c);
	}
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
	text = kvmalloc(len, GFP_KERNEL);
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
	text = kvmalloc(max_t(size_t, pos + count, 1), GFP_KERNEL);
	if (!text) {
		ret = -ENOMEM;
		goto out;
	}
	spans = kmalloc_array(MLTUNE_MAX_KNOBS, sizeof(*spans), GFP_KERNEL);
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
	if (!sysfs_streq(buf, "commit") || memchr(buf, '\0', count))
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
	p = kzalloc(sizeof(*p), GFP_KERNEL);
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
	} else if (!strcmp(mltune_active, name)) {
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
	ret = sysfs_emit(buf, "%s\n", mltune_active);
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
	ret = mltune_switch_to(name, true);
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
	ret = sysfs_emit(buf, "%llu\n", mltune_generation);
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
	ret = sysfs_emit(buf, "%s", mltune_last);
	mutex_unlock(&mltune_lock);
	return ret;
}

static ssize_t baseline_read(struct file *file, struct kobject *kobj,
			     MLTUNE_BIN_ATTR *attr, char *buf, loff_t pos,
			     size_t count)
{
	struct mltune_knob *knobs;
	struct mltune_base *b;
	unsigned int i = 0;
	ssize_t ret;

	ret = mutex_lock_killable(&mltune_lock);
	if (ret)
		return ret;
	knobs = kvmalloc_array(max(mltune_nr_base, 1U), sizeof(*knobs),
			       GFP_KERNEL);
	if (knobs) {
		list_for_each_entry(b, &mltune_base_list, node)
			knobs[i++] = b->knob;
		ret = mltune_read_knobs(knobs, i, false, buf, pos, count);
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

static int mltune_mount(void *arg)
{
	struct file_system_type *proc_type = get_fs_type("proc");
	struct file_system_type *sys_type = get_fs_type("sysfs");

	/* Both are built in: no module reference to drop. */
	if (!proc_type || !sys_type)
		return -ENODEV;
	mltune_proc_mnt = kern_mount(proc_type);
	if (IS_ERR(mltune_proc_mnt))
		return PTR_ERR(mltune_proc_mnt);
	mltune_sys_mnt = kern_mount(sys_type);
	if (IS_ERR(mltune_sys_mnt)) {
		kern_unmount(mltune_proc_mnt);
		mltune_proc_mnt = NULL;
		return PTR_ERR(mltune_sys_mnt);
	}
	return 0;
}

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
	struct mltune_base *b, *tb;
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

	list_for_each_entry_safe(b, tb, &mltune_base_list, node) {
		hash_del(&b->hnode);
		list_del(&b->node);
		kfree(b);
	}
	mltune_nr_base = 0;
	if (!IS_ERR_OR_NULL(mltune_sys_mnt))
		kern_unmount(mltune_sys_mnt);
	if (!IS_ERR_OR_NULL(mltune_proc_mnt))
		kern_unmount(mltune_proc_mnt);
	mltune_sys_mnt = NULL;
	mltune_proc_mnt = NULL;
	if (mltune_wq)
		destroy_workqueue(mltune_wq);
	mltune_wq = NULL;
	kfree(mltune_pathbuf);
	kfree(mltune_readbuf);
	kfree(mltune_last);
}

int mltune_profile_init(void)
{
	int ret = -ENOMEM;

	mltune_last = kzalloc(PAGE_SIZE, GFP_KERNEL);
	mltune_readbuf = kmalloc(MLTUNE_VALUE_MAX + 2, GFP_KERNEL);
	mltune_pathbuf = kmalloc(PATH_MAX, GFP_KERNEL);
	mltune_wq = alloc_ordered_workqueue("mltune", 0);
	if (!mltune_last || !mltune_readbuf || !mltune_pathbuf || !mltune_wq)
		goto err;
	strscpy(mltune_last, "none\n", PAGE_SIZE);

	ret = mltune_call(mltune_mount, NULL);
	if (ret) {
		pr_err("cannot mount proc and sysfs for knob writes: %d\n", ret);
		goto err;
	}
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
	int ret;

	/* No handler runs after these return; none holds mltune_lock now. */
	sysfs_remove_bin_file(mltune_kobj, &mltune_baseline_attr);
	sysfs_remove_group(mltune_kobj, &mltune_switch_group);
	sysfs_remove_file(mltune_profiles_kobj, &mltune_control_attr.attr);

	if (!keep_on_unload) {
		mutex_lock(&mltune_lock);
		ret = mltune_switch_to("baseline", false);
		mutex_unlock(&mltune_lock);
		if (ret)
			pr_err("restoring the baseline on unload failed: %d\n",
			       ret);
	}
	mltune_free_all();
}
