// SPDX-License-Identifier: GPL-2.0
/*
 * mltune huge-page pool: 2 MiB pages reserved per NUMA node and handed out
 * to user space as pinned, pinnable buffers through mmap() of /dev/mltune.
 *
 * Pages are order-9 compound pages from the node's normal zone (GFP_KERNEL,
 * never movable, so FOLL_LONGTERM pins need no migration).  They are mapped
 * with vm_insert_pages() (4 KiB PTEs, refcounted, in the rmap, hence
 * pin_user_pages() works) or, where the kernel has vmf_insert_folio_pmd()
 * (2 MiB, refcounted and rmapped like a page-cache THP), by PMDs from
 * ->huge_fault with ->fault handing out single pages as the fallback.
 * Never remap_pfn_range()/VM_PFNMAP, which GUP refuses.
 *
 * Life of a page: free list -> buffer (mmap) -> free list (last munmap).
 * A page still referenced by someone else when its buffer dies (an io_uring
 * or RDMA registration that outlived the mapping) is not reused: the pool
 * drops its reference, forgets the page and counts it in "orphaned"; the
 * page allocator gets it back when the last user lets go.
 *
 * Free pages are always zeroed: at reservation (__GFP_ZERO) and when a
 * buffer returns them.
 *
 * Every buffer is charged, for its whole life, to the real UID of the task
 * that mmap()ed it; hugepool/users lists the charges and
 * hugepool/user_quota caps them per UID (EDQUOT beyond).  Unless a quota
 * was set (module parameter or sysfs), the quota is half the pages reserved
 * on all nodes together, rounded down, at least 1, following the
 * reservation: no UID without CAP_IPC_LOCK can pin the whole pool.
 *
 * ABI: include/uapi/linux/mltune.h, Documentation/hugepool.rst and
 * Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": hugepool: " fmt

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <linux/nospec.h>
#include <linux/overflow.h>
#include <linux/refcount.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include <linux/uidgid.h>

#include <uapi/linux/mltune.h>

#include "mltune.h"
#include "mltune_common.h"
#include "mltune_compat.h"
#include "mltune_hugepool.h"

#define HP_SHIFT	MLTUNE_HUGEPOOL_PAGE_SHIFT
#define HP_SIZE		BIT(HP_SHIFT)
#define HP_ORDER	(HP_SHIFT - PAGE_SHIFT)
#define HP_NR		BIT(HP_ORDER)
/* vm_pgoff bits below the node number (see MLTUNE_HUGEPOOL_MMAP_OFFSET). */
#define HP_NODE_PGOFF_SHIFT	(MLTUNE_HUGEPOOL_NODE_SHIFT - PAGE_SHIFT)

#if defined(MLTUNE_HAVE_VMF_INSERT_FOLIO_PMD) && \
	defined(CONFIG_TRANSPARENT_HUGEPAGE)
#define HP_PMD_CAPABLE	1
#else
#define HP_PMD_CAPABLE	0
#endif

#define HP_GFP	(GFP_KERNEL | __GFP_THISNODE | __GFP_COMP | __GFP_ZERO | \
		 __GFP_NOWARN | __GFP_RETRY_MAYFAIL)

/*
 * Locking:
 *  hp_resize_lock (mutex)  serializes changes of nr_reserved by sysfs
 *			    writers and the load-time reservation; the page
 *			    allocator is called with it held, never under
 *			    hp_node::lock.
 *  hp_node::lock (spinlock) protects free_list, nr_free and nr_reserved of
 *			    its node; taken by mmap, buffer release and
 *			    readers.  Nothing nests inside it.
 *  hp_reserved_total (atomic) is the sum of every node's nr_reserved,
 *			    changed together with nr_reserved under the
 *			    node's lock, read without a lock (the default
 *			    quota follows it).
 *  struct hp_buf is immutable after mmap() apart from @ref; it lives as long
 *  as a VMA points at it (vm_ops open/close), and each VMA pins the file,
 *  which pins the module (fops.owner), so it never outlives the pool.
 */
static DEFINE_MUTEX(hp_resize_lock);

struct hp_node {
	int nid;
	spinlock_t lock;		/* the three fields below */
	struct list_head free_list;	/* head pages, linked by page->lru */
	unsigned long nr_free;		/* pages on free_list */
	unsigned long nr_reserved;	/* free plus in buffers */
	struct kobject kobj;		/* hugepool/node<nid> */
};

struct hp_buf {
	refcount_t ref;			/* one per VMA */
	struct hp_node *node;
	kuid_t uid;			/* charged to (hp_user) */
	pgoff_t pgoff;			/* vm_pgoff at mmap(): buffer offset 0 */
	unsigned long nr;		/* pool pages */
	struct page *pages[];		/* head pages */
};

static struct hp_node *hp_nodes[MAX_NUMNODES];
static struct kobject *hp_kobj;		/* /sys/kernel/mltune/hugepool */

/* Mapping counters: page-table entries installed, by size. */
static atomic_long_t hp_pmd_maps = ATOMIC_LONG_INIT(0);
static atomic_long_t hp_pte_maps = ATOMIC_LONG_INIT(0);
/* Pages given up because something still held them at release. */
static atomic_long_t hp_orphaned = ATOMIC_LONG_INIT(0);
/* Sum of nr_reserved over the nodes (see Locking). */
static atomic_long_t hp_reserved_total = ATOMIC_LONG_INIT(0);

static char *hp_param;
module_param_named(hugepool, hp_param, charp, 0444);
MODULE_PARM_DESC(hugepool,
		 "Reserve at load: NODE:SIZE[,NODE:SIZE...], SIZE in 2 MiB pages or with K/M/G suffix");

static char *hp_quota_param;
module_param_named(hugepool_user_quota, hp_quota_param, charp, 0444);
MODULE_PARM_DESC(hugepool_user_quota,
		 "Initial hugepool/user_quota: SIZE in 2 MiB pages or with K/M/G suffix, 0 = no limit; unset or auto = half the reserved pages");

/*
 * Per-user accounting.
 *
 * Locking: hp_users_lock (spinlock) protects hp_users, every hp_user on it,
 * hp_quota_set and hp_user_quota.  It is taken by mmap() (charge), buffer
 * release (uncharge) and the users/user_quota files, never with
 * hp_node::lock or hp_resize_lock held, and nothing nests inside it.  An
 * hp_user exists while its UID has pages charged: it is created by the
 * first charge and freed by the uncharge that brings @pages to 0.
 *
 * The quota: with hp_quota_set (hugepool_user_quota=SIZE at load, or SIZE
 * written to user_quota), hp_user_quota pages, 0 = no limit.  Without
 * (the default, or "auto"), hp_quota_auto(): half of hp_reserved_total,
 * rounded down, at least 1 page, so never "no limit".
 */
static DEFINE_SPINLOCK(hp_users_lock);
static LIST_HEAD(hp_users);		/* struct hp_user, ascending uid */
static bool hp_quota_set;		/* hp_user_quota is in force */
static unsigned long hp_user_quota;	/* pages per UID, 0 = no limit */

struct hp_user {
	struct list_head list;		/* on hp_users */
	kuid_t uid;
	unsigned long pages;		/* charged, > 0 */
};

static void hp_vma_set_flags(struct vm_area_struct *vma, unsigned long flags)
{
#ifdef MLTUNE_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/* ---- per-user accounting ---- */

/* The default quota: half the reserved pages, rounded down, at least 1. */
static unsigned long hp_quota_auto(void)
{
	return max(atomic_long_read(&hp_reserved_total) / 2, 1L);
}

/* The quota in force, in pages (0 = no limit); under hp_users_lock. */
static unsigned long hp_quota(void)
{
	lockdep_assert_held(&hp_users_lock);
	return hp_quota_set ? hp_user_quota : hp_quota_auto();
}

/* The hp_user of @uid, or the entry to insert it before; under the lock. */
static struct hp_user *hp_user_find(kuid_t uid, struct list_head **pos)
{
	struct hp_user *u;

	lockdep_assert_held(&hp_users_lock);
	list_for_each_entry(u, &hp_users, list) {
		if (uid_eq(u->uid, uid))
			return u;
		if (uid_gt(u->uid, uid)) {
			*pos = &u->list;
			return NULL;
		}
	}
	*pos = &hp_users;
	return NULL;
}

/*
 * Charge @nr pages to @uid.  -EDQUOT when that would take @uid past
 * hp_quota() and the caller lacks CAP_IPC_LOCK (which, as for
 * RLIMIT_MEMLOCK, lifts the limit but not the accounting).
 */
static int hp_user_charge(kuid_t uid, unsigned long nr)
{
	bool limited = !ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK);
	struct hp_user *u, *new;
	struct list_head *pos;
	unsigned long total, quota;
	int ret = 0;

	new = mltune_alloc(kzalloc(sizeof(*new), GFP_KERNEL));
	if (!new)
		return -ENOMEM;
	spin_lock(&hp_users_lock);
	u = hp_user_find(uid, &pos);
	quota = hp_quota();
	if (check_add_overflow(u ? u->pages : 0, nr, &total) ||
	    (limited && quota && total > quota)) {
		ret = -EDQUOT;
	} else if (u) {
		u->pages = total;
	} else {
		new->uid = uid;
		new->pages = total;
		list_add_tail(&new->list, pos);
		new = NULL;
	}
	spin_unlock(&hp_users_lock);
	kfree(new);
	return ret;
}

static void hp_user_uncharge(kuid_t uid, unsigned long nr)
{
	struct hp_user *u, *gone = NULL;
	struct list_head *pos;

	spin_lock(&hp_users_lock);
	u = hp_user_find(uid, &pos);
	if (u) {
		u->pages -= min(nr, u->pages);
		if (!u->pages) {
			list_del(&u->list);
			gone = u;
		}
	}
	spin_unlock(&hp_users_lock);
	kfree(gone);
}

/* Nothing is mapped any more: forget every charge (there should be none). */
static void hp_users_clear(void)
{
	struct hp_user *u, *tmp;
	LIST_HEAD(gone);

	spin_lock(&hp_users_lock);
	list_splice_init(&hp_users, &gone);
	spin_unlock(&hp_users_lock);
	list_for_each_entry_safe(u, tmp, &gone, list) {
		pr_err("uid %u: %lu pages still charged at exit\n",
		       from_kuid_munged(&init_user_ns, u->uid), u->pages);
		kfree(u);
	}
}

/* ---- reservation ---- */

/*
 * The 2 MiB pages @nid's allocator manages at all in the zones GFP_KERNEL
 * allocates from: a whole request above it can never succeed, and trying
 * would first reclaim and compact the whole node (migrating every task's
 * pages there) only to give it all back.
 */
static unsigned long hp_node_managed(int nid)
{
	pg_data_t *pgdat = NODE_DATA(nid);
	unsigned long pages = 0;
	int z;

	for (z = 0; z <= ZONE_NORMAL; z++)
		pages += zone_managed_pages(&pgdat->node_zones[z]);
	return pages >> HP_ORDER;
}

/*
 * Allocate @want pages on @n's node and add them to its pool.  With @whole,
 * all of them or none: a short allocation is given back (a sysfs write
 * changes the pool whole or not at all).  Without, what was obtained is
 * added (a load-time reservation).  Returns the pages added.
 */
static unsigned long hp_node_grow(struct hp_node *n, unsigned long want,
				  bool whole)
{
	struct page *page, *tmp;
	unsigned long got = 0;
	LIST_HEAD(pages);

	lockdep_assert_held(&hp_resize_lock);
	if (whole && want > hp_node_managed(n->nid))
		return 0;
	while (got < want && !fatal_signal_pending(current)) {
		page = mltune_alloc(alloc_pages_node(n->nid, HP_GFP, HP_ORDER));
		if (!page)
			break;
		list_add(&page->lru, &pages);
		got++;
		cond_resched();
	}
	if (whole && got < want) {
		list_for_each_entry_safe(page, tmp, &pages, lru) {
			list_del(&page->lru);
			__free_pages(page, HP_ORDER);
			cond_resched();
		}
		return 0;
	}
	spin_lock(&n->lock);
	list_splice(&pages, &n->free_list);
	n->nr_free += got;
	n->nr_reserved += got;
	atomic_long_add(got, &hp_reserved_total);
	spin_unlock(&n->lock);
	return got;
}

static void hp_node_shrink(struct hp_node *n, unsigned long target)
{
	struct page *page, *tmp;
	unsigned long gone = 0;
	LIST_HEAD(pages);

	lockdep_assert_held(&hp_resize_lock);
	spin_lock(&n->lock);
	while (n->nr_reserved > target && n->nr_free) {
		page = list_first_entry(&n->free_list, struct page, lru);
		list_move(&page->lru, &pages);
		n->nr_free--;
		n->nr_reserved--;
		gone++;
	}
	atomic_long_sub(gone, &hp_reserved_total);
	spin_unlock(&n->lock);
	list_for_each_entry_safe(page, tmp, &pages, lru) {
		list_del(&page->lru);
		__free_pages(page, HP_ORDER);
		cond_resched();
	}
}

/*
 * Grow or shrink a node's pool to @target pages.  Returns 0, -ENOMEM when
 * the page allocator ran out first, -EBUSY when mapped pages keep the pool
 * above @target, -EINTR on a fatal signal.  With @whole (a sysfs write) a
 * failure leaves the pool as it was; without (a load-time reservation)
 * what was reached stays.
 */
static int hp_node_resize(struct hp_node *n, unsigned long target, bool whole)
{
	unsigned long have, got, mapped;

	lockdep_assert_held(&hp_resize_lock);
	spin_lock(&n->lock);
	have = n->nr_reserved;
	mapped = n->nr_reserved - n->nr_free;
	spin_unlock(&n->lock);

	if (target > have) {
		got = hp_node_grow(n, target - have, whole);
		if (got == target - have)
			return 0;
		if (whole)
			pr_warn_ratelimited("node %d: %lu 2 MiB pages not available, the pool stays at %lu\n",
					    n->nid, target - have, have);
		else
			pr_warn("node %d: reserved %lu of %lu requested 2 MiB pages\n",
				n->nid, have + got, target);
		return fatal_signal_pending(current) ? -EINTR : -ENOMEM;
	}
	/* Mapped pages cannot go: refuse before freeing anything. */
	if (whole && mapped > target)
		return -EBUSY;
	hp_node_shrink(n, target);
	spin_lock(&n->lock);
	have = n->nr_reserved;
	spin_unlock(&n->lock);
	return have > target ? -EBUSY : 0;
}

/*
 * "N" is N pool pages; "N" followed by K, M or G is a size in bytes that
 * must be a multiple of 2 MiB.
 */
static int hp_parse_pages(const char *s, unsigned long *pages)
{
	char buf[32];
	unsigned long long v;
	unsigned int shift = 0;
	size_t len;
	char *p;
	int ret;

	if (strscpy(buf, s, sizeof(buf)) < 0)
		return -EINVAL;
	p = strim(buf);
	len = strlen(p);
	if (!len)
		return -EINVAL;
	switch (p[len - 1]) {
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	}
	if (shift)
		p[len - 1] = '\0';
	ret = kstrtoull(p, 10, &v);
	if (ret)
		return ret;
	if (shift) {
		if (v > (ULLONG_MAX >> shift))
			return -EINVAL;
		v <<= shift;
		if (v & (HP_SIZE - 1))
			return -EINVAL;
		v >>= HP_SHIFT;
	}
	if (v > ULONG_MAX)
		return -EINVAL;
	*pages = v;
	return 0;
}

/*
 * A quota: "auto" (the default rule, *@set false) or a size as for
 * hp_parse_pages() (*@set true, 0 = no limit).  Nothing is changed on
 * error.
 */
static int hp_parse_quota(const char *s, bool *set, unsigned long *pages)
{
	unsigned long v;
	int ret;

	if (sysfs_streq(s, "auto")) {
		*set = false;
		*pages = 0;
		return 0;
	}
	ret = hp_parse_pages(s, &v);
	if (ret)
		return ret;
	*set = true;
	*pages = v;
	return 0;
}

/* ---- sysfs ---- */

static ssize_t pmd_mappings_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&hp_pmd_maps));
}

static ssize_t pte_mappings_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&hp_pte_maps));
}

static ssize_t orphaned_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&hp_orphaned));
}

static ssize_t page_size_show(struct kobject *kobj, struct kobj_attribute *attr,
			      char *buf)
{
	return sysfs_emit(buf, "%lu\n", HP_SIZE);
}

static ssize_t pmd_capable_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", HP_PMD_CAPABLE && PMD_SHIFT == HP_SHIFT);
}

/* Longest line of the users file: "4294967295 18446744073709551615\n". */
#define HP_USERS_LINE	32

static ssize_t users_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct hp_user *u;
	int len = 0;

	spin_lock(&hp_users_lock);
	list_for_each_entry(u, &hp_users, list) {
		if (len >= PAGE_SIZE - HP_USERS_LINE)
			break;
		len += sysfs_emit_at(buf, len, "%u %lu\n",
				     from_kuid_munged(&init_user_ns, u->uid),
				     u->pages);
	}
	spin_unlock(&hp_users_lock);
	return len;
}

static ssize_t user_quota_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	unsigned long quota;

	spin_lock(&hp_users_lock);
	quota = hp_quota();
	spin_unlock(&hp_users_lock);
	return sysfs_emit(buf, "%lu\n", quota);
}

static ssize_t user_quota_store(struct kobject *kobj,
				struct kobj_attribute *attr, const char *buf,
				size_t count)
{
	unsigned long quota;
	bool set;
	int ret;

	ret = mltune_check_writer("hugepool/user_quota");
	if (ret)
		return ret;
	ret = mltune_check_nul("hugepool/user_quota", buf, count);
	if (ret)
		return ret;
	ret = hp_parse_quota(buf, &set, &quota);
	if (ret)
		return mltune_refuse(ret, "user_quota: not a size or auto: %.*s\n",
				     (int)min_t(size_t, strcspn(buf, "\n"), 32),
				     buf);
	spin_lock(&hp_users_lock);
	hp_quota_set = set;
	hp_user_quota = quota;
	spin_unlock(&hp_users_lock);
	return count;
}

/* 1: user_quota follows the default rule; 0: it was set. */
static ssize_t user_quota_auto_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	bool set;

	spin_lock(&hp_users_lock);
	set = hp_quota_set;
	spin_unlock(&hp_users_lock);
	return sysfs_emit(buf, "%d\n", !set);
}

static struct kobj_attribute pmd_mappings_attr = __ATTR_RO(pmd_mappings);
static struct kobj_attribute pte_mappings_attr = __ATTR_RO(pte_mappings);
static struct kobj_attribute orphaned_attr = __ATTR_RO(orphaned);
static struct kobj_attribute page_size_attr = __ATTR_RO(page_size);
static struct kobj_attribute pmd_capable_attr = __ATTR_RO(pmd_capable);
static struct kobj_attribute users_attr = __ATTR_RO(users);
static struct kobj_attribute user_quota_attr = __ATTR_RW(user_quota);
static struct kobj_attribute user_quota_auto_attr = __ATTR_RO(user_quota_auto);

static struct attribute *hp_attrs[] = {
	&pmd_mappings_attr.attr,
	&pte_mappings_attr.attr,
	&orphaned_attr.attr,
	&page_size_attr.attr,
	&pmd_capable_attr.attr,
	&users_attr.attr,
	&user_quota_attr.attr,
	&user_quota_auto_attr.attr,
	NULL,
};

static const struct attribute_group hp_group = {
	.attrs = hp_attrs,
};

static struct hp_node *to_hp_node(struct kobject *kobj)
{
	return container_of(kobj, struct hp_node, kobj);
}

static void hp_node_counts(struct hp_node *n, unsigned long *reserved,
			   unsigned long *free)
{
	spin_lock(&n->lock);
	*reserved = n->nr_reserved;
	*free = n->nr_free;
	spin_unlock(&n->lock);
}

static ssize_t reserved_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	unsigned long reserved, free;

	hp_node_counts(to_hp_node(kobj), &reserved, &free);
	return sysfs_emit(buf, "%lu\n", reserved);
}

static ssize_t reserved_store(struct kobject *kobj, struct kobj_attribute *attr,
			      const char *buf, size_t count)
{
	unsigned long target;
	int ret;

	ret = mltune_check_writer("hugepool/reserved");
	if (ret)
		return ret;
	ret = mltune_check_nul("hugepool/reserved", buf, count);
	if (ret)
		return ret;
	ret = hp_parse_pages(buf, &target);
	if (ret)
		return mltune_refuse(ret, "reserved: not a size: %.*s\n",
				     (int)min_t(size_t, strcspn(buf, "\n"), 32),
				     buf);
	ret = mutex_lock_killable(&hp_resize_lock);
	if (ret)
		return ret;
	ret = hp_node_resize(to_hp_node(kobj), target, true);
	mutex_unlock(&hp_resize_lock);
	return ret ? ret : count;
}

static ssize_t free_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	unsigned long reserved, free;

	hp_node_counts(to_hp_node(kobj), &reserved, &free);
	return sysfs_emit(buf, "%lu\n", free);
}

static ssize_t mapped_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	unsigned long reserved, free;

	hp_node_counts(to_hp_node(kobj), &reserved, &free);
	return sysfs_emit(buf, "%lu\n", reserved - free);
}

static struct kobj_attribute reserved_attr = __ATTR_RW(reserved);
static struct kobj_attribute free_attr = __ATTR_RO(free);
static struct kobj_attribute mapped_attr = __ATTR_RO(mapped);

static struct attribute *hp_node_attrs[] = {
	&reserved_attr.attr,
	&free_attr.attr,
	&mapped_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(hp_node);

static void hp_node_release(struct kobject *kobj)
{
	kfree(to_hp_node(kobj));
}

static const struct kobj_type hp_node_ktype = {
	.release = hp_node_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = hp_node_groups,
};

/* ---- buffers and mappings ---- */

static void hp_buf_release(struct hp_buf *buf)
{
	struct hp_node *n = buf->node;
	unsigned long i, j, back = 0, lost = 0;
	LIST_HEAD(pages);

	for (i = 0; i < buf->nr; i++) {
		struct page *page = buf->pages[i];

		/*
		 * Every PTE/PMD of the buffer is gone (close runs after the
		 * unmap), so the pool's reference is the only legitimate one.
		 * Anything else is a pin or a transient lookup: hand the
		 * page to the page allocator instead of reusing it.
		 */
		if (page_ref_count(page) != 1) {
			put_page(page);
			lost++;
			continue;
		}
		for (j = 0; j < HP_NR; j++)
			clear_highpage(page + j);
		list_add(&page->lru, &pages);
		back++;
		cond_resched();
	}
	spin_lock(&n->lock);
	list_splice(&pages, &n->free_list);
	n->nr_free += back;
	n->nr_reserved -= lost;
	atomic_long_sub(lost, &hp_reserved_total);
	spin_unlock(&n->lock);
	if (lost) {
		atomic_long_add(lost, &hp_orphaned);
		pr_warn_ratelimited("node %d: %lu pages still in use after unmap, dropped from the pool\n",
				    n->nid, lost);
	}
	hp_user_uncharge(buf->uid, buf->nr);
	kvfree(buf);
}

static void hp_vm_open(struct vm_area_struct *vma)
{
	struct hp_buf *buf = vma->vm_private_data;

	refcount_inc(&buf->ref);
}

static void hp_vm_close(struct vm_area_struct *vma)
{
	struct hp_buf *buf = vma->vm_private_data;

	if (refcount_dec_and_test(&buf->ref))
		hp_buf_release(buf);
}

/* Buffer page index (4 KiB units) of @addr in @vma. */
static unsigned long hp_index(struct vm_area_struct *vma, struct hp_buf *buf,
			      unsigned long addr)
{
	return vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT) -
		buf->pgoff;
}

#if !HP_PMD_CAPABLE
#define HP_BATCH	64

/*
 * 4 KiB path: map the whole part of the faulting 2 MiB page that lies in the
 * VMA in one go, so a sequential toucher takes one fault per 2 MiB.
 */
static vm_fault_t hp_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct hp_buf *buf = vma->vm_private_data;
	unsigned long addr = vmf->address & PAGE_MASK;
	unsigned long idx = hp_index(vma, buf, addr);
	unsigned long off, back, start, end, first, inserted = 0;
	struct page *pages[HP_BATCH];
	struct page *head;
	int err = 0;

	if (idx >= buf->nr * HP_NR)
		return VM_FAULT_SIGBUS;
	head = buf->pages[idx >> HP_ORDER];
	off = idx & (HP_NR - 1);
	back = min(off << PAGE_SHIFT, addr - vma->vm_start);
	start = addr - back;
	end = addr + min((HP_NR - off) << PAGE_SHIFT, vma->vm_end - addr);
	first = off - (back >> PAGE_SHIFT);

	while (start < end) {
		unsigned long n = min_t(unsigned long, HP_BATCH,
					(end - start) >> PAGE_SHIFT);
		unsigned long i, left = n;

		for (i = 0; i < n; i++)
			pages[i] = head + first + i;
		err = vm_insert_pages(vma, start, pages, &left);
		inserted += n - left;
		if (err)
			break;
		start += n << PAGE_SHIFT;
		first += n;
	}
	if (err == -EBUSY) {
		/* Partly mapped already (e.g. after MADV_DONTNEED). */
		err = vm_insert_page(vma, addr, head + off);
		if (!err)
			inserted++;
		else if (err == -EBUSY)
			err = 0;
	}
	atomic_long_add(inserted, &hp_pte_maps);
	if (err)
		return vmf_error(err);
	return VM_FAULT_NOPAGE;
}
#endif /* !HP_PMD_CAPABLE */

#if HP_PMD_CAPABLE
/*
 * PMD mode (no VM_MIXEDMAP): 4 KiB fallback through the core fault path,
 * which maps the page with a refcounted, rmapped PTE, like page cache.
 */
static vm_fault_t hp_vm_fault_page(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct hp_buf *buf = vma->vm_private_data;
	unsigned long idx = hp_index(vma, buf, vmf->address & PAGE_MASK);

	if (idx >= buf->nr * HP_NR)
		return VM_FAULT_SIGBUS;
	vmf->page = buf->pages[idx >> HP_ORDER] + (idx & (HP_NR - 1));
	get_page(vmf->page);
	atomic_long_inc(&hp_pte_maps);
	return 0;
}

static vm_fault_t hp_vm_huge_fault(struct vm_fault *vmf, unsigned int order)
{
	struct vm_area_struct *vma = vmf->vma;
	struct hp_buf *buf = vma->vm_private_data;
	unsigned long haddr = vmf->address & PMD_MASK;
	unsigned long idx;
	vm_fault_t ret;

	if (order != PMD_ORDER || PMD_SHIFT != HP_SHIFT)
		return VM_FAULT_FALLBACK;
	if (haddr < vma->vm_start || haddr + PMD_SIZE > vma->vm_end)
		return VM_FAULT_FALLBACK;
	idx = hp_index(vma, buf, haddr);
	if (idx & (HP_NR - 1))
		return VM_FAULT_FALLBACK;
	if (idx >= buf->nr * HP_NR)
		return VM_FAULT_SIGBUS;
	ret = vmf_insert_folio_pmd(vmf, page_folio(buf->pages[idx >> HP_ORDER]),
				   vmf->flags & FAULT_FLAG_WRITE);
	if (ret == VM_FAULT_NOPAGE)
		atomic_long_inc(&hp_pmd_maps);
	return ret;
}
#endif

static const struct vm_operations_struct hp_vm_ops = {
	.open = hp_vm_open,
	.close = hp_vm_close,
#if HP_PMD_CAPABLE
	.fault = hp_vm_fault_page,
	.huge_fault = hp_vm_huge_fault,
#else
	.fault = hp_vm_fault,
#endif
};

/*
 * mmap(fd, len, ..., MAP_SHARED, MLTUNE_HUGEPOOL_MMAP_OFFSET(node)): take
 * len / 2 MiB pages from @node's pool, all or nothing, charged to the
 * caller's real UID (-EDQUOT past hugepool/user_quota).  Nothing is mapped
 * here; faults map 2 MiB at a time (MAP_POPULATE prefaults), so a failed
 * mmap() never leaves a partial mapping behind.
 *
 * 4 KiB mode, VM_MIXEDMAP: vm_insert_pages() needs it; the pages stay
 * normal, refcounted pages (no pte_special), which GUP can pin.
 * PMD mode, no VM_MIXEDMAP: zap_huge_pmd() must treat the folio PMDs as
 * refcounted and rmapped, which it does not in a VM_MIXEDMAP mapping.
 * VM_DONTCOPY: a child of fork() does not inherit the mapping (pins and
 * page-table copies of large buffers stay with the owner; MADV_DOFORK
 * opts back in, vm_ops->open then shares the buffer).
 * VM_DONTEXPAND: mremap() cannot grow it past the buffer.
 * VM_DONTDUMP: no multi-GiB core dumps of staging buffers.
 */
int mltune_hugepool_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long nid = vma->vm_pgoff >> HP_NODE_PGOFF_SHIFT;
	unsigned long nr, i;
	struct hp_node *n;
	struct hp_buf *buf;
	kuid_t uid = current_uid();
	int ret;

	if (vma->vm_pgoff & ((1UL << HP_NODE_PGOFF_SHIFT) - 1))
		return -EINVAL;
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (!len || (len & (HP_SIZE - 1)))
		return -EINVAL;
	if (nid >= MAX_NUMNODES)
		return -EINVAL;
	n = hp_nodes[array_index_nospec(nid, MAX_NUMNODES)];
	if (!n)
		return -EINVAL;
	nr = len >> HP_SHIFT;

	buf = mltune_alloc(kvzalloc(struct_size(buf, pages, nr), GFP_KERNEL));
	if (!buf)
		return -ENOMEM;
	ret = hp_user_charge(uid, nr);
	if (ret) {
		kvfree(buf);
		return ret;
	}
	spin_lock(&n->lock);
	if (n->nr_free < nr) {
		spin_unlock(&n->lock);
		hp_user_uncharge(uid, nr);
		kvfree(buf);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		buf->pages[i] = list_first_entry(&n->free_list, struct page,
						 lru);
		list_del_init(&buf->pages[i]->lru);
	}
	n->nr_free -= nr;
	spin_unlock(&n->lock);

	refcount_set(&buf->ref, 1);
	buf->node = n;
	buf->uid = uid;
	buf->nr = nr;
	buf->pgoff = vma->vm_pgoff;

	hp_vma_set_flags(vma, (HP_PMD_CAPABLE ? VM_HUGEPAGE : VM_MIXEDMAP) |
			 VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &hp_vm_ops;
	vma->vm_private_data = buf;
	return 0;
}

static long hp_ioctl_info(void __user *uarg)
{
	struct mltune_hugepool_info info;
	unsigned long reserved, free;
	struct hp_node *n;

	if (copy_from_user(&info, uarg, sizeof(info)))
		return -EFAULT;
	if (info.flags || info.node >= MAX_NUMNODES)
		return -EINVAL;
	n = hp_nodes[array_index_nospec(info.node, MAX_NUMNODES)];
	if (!n)
		return -EINVAL;
	hp_node_counts(n, &reserved, &free);
	info.page_size = HP_SIZE;
	info.reserved = reserved;
	info.free = free;
	info.mapped = reserved - free;
	info.mmap_offset = MLTUNE_HUGEPOOL_MMAP_OFFSET(info.node);
	if (copy_to_user(uarg, &info, sizeof(info)))
		return -EFAULT;
	return 0;
}

/*
 * Unknown numbers of our own type (0xB9) get -EINVAL; foreign types get the
 * conventional -ENOTTY (isatty() and friends rely on it).
 */
long mltune_hugepool_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	if (_IOC_TYPE(cmd) != MLTUNE_IOC_MAGIC)
		return -ENOTTY;
	switch (cmd) {
	case MLTUNE_IOC_HUGEPOOL_INFO:
		return hp_ioctl_info((void __user *)arg);
	default:
		return -EINVAL;
	}
}

/* ---- init / exit ---- */

static int hp_add_node(int nid)
{
	struct hp_node *n;
	int ret;

	n = kzalloc(sizeof(*n), GFP_KERNEL);
	if (!n)
		return -ENOMEM;
	n->nid = nid;
	spin_lock_init(&n->lock);
	INIT_LIST_HEAD(&n->free_list);
	ret = kobject_init_and_add(&n->kobj, &hp_node_ktype, hp_kobj,
				   "node%d", nid);
	if (ret) {
		kobject_put(&n->kobj);
		return ret;
	}
	hp_nodes[nid] = n;
	return 0;
}

static void hp_remove_nodes(void)
{
	int nid;

	for (nid = 0; nid < MAX_NUMNODES; nid++) {
		struct hp_node *n = hp_nodes[nid];

		if (!n)
			continue;
		/* Drains sysfs writers: nothing can grow the node after this. */
		kobject_del(&n->kobj);
		mutex_lock(&hp_resize_lock);
		hp_node_shrink(n, 0);
		mutex_unlock(&hp_resize_lock);
		if (n->nr_reserved)
			pr_err("node %d: %lu pages still mapped at exit, leaking them\n",
			       nid, n->nr_reserved);
		hp_nodes[nid] = NULL;
		kobject_put(&n->kobj);
	}
}

/* Apply "NODE:SIZE[,NODE:SIZE...]"; syntax errors fail the module load. */
static int hp_apply_param(char *spec)
{
	char *item, *size;
	unsigned long pages;
	unsigned int nid;
	int ret;

	while ((item = strsep(&spec, ",")) != NULL) {
		if (!*item)
			continue;
		size = strchr(item, ':');
		if (!size)
			goto bad;
		*size++ = '\0';
		if (kstrtouint(item, 10, &nid) || hp_parse_pages(size, &pages))
			goto bad;
		if (nid >= MAX_NUMNODES || !hp_nodes[nid]) {
			pr_err("hugepool=: node %u has no memory\n", nid);
			return -EINVAL;
		}
		mutex_lock(&hp_resize_lock);
		ret = hp_node_resize(hp_nodes[nid], pages, false);
		mutex_unlock(&hp_resize_lock);
		/* A short reservation is reported and kept; load goes on. */
		if (ret == -EINTR)
			return ret;
	}
	return 0;
bad:
	pr_err("hugepool=: bad entry '%s', expected NODE:SIZE\n", item);
	return -EINVAL;
}

int mltune_hugepool_init(void)
{
	char *spec;
	int nid, ret;

	if (hp_quota_param && *hp_quota_param &&
	    hp_parse_quota(hp_quota_param, &hp_quota_set, &hp_user_quota)) {
		pr_err("hugepool_user_quota=: bad size '%s'\n", hp_quota_param);
		return -EINVAL;
	}
	hp_kobj = kobject_create_and_add("hugepool", mltune_kobj);
	if (!hp_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(hp_kobj, &hp_group);
	if (ret)
		goto err_kobj;
	for_each_node_state(nid, N_MEMORY) {
		ret = hp_add_node(nid);
		if (ret)
			goto err_nodes;
	}
	if (hp_param && *hp_param) {
		spec = kstrdup(hp_param, GFP_KERNEL);
		if (!spec) {
			ret = -ENOMEM;
			goto err_nodes;
		}
		ret = hp_apply_param(spec);
		kfree(spec);
		if (ret)
			goto err_nodes;
	}
	return 0;

err_nodes:
	hp_remove_nodes();
	sysfs_remove_group(hp_kobj, &hp_group);
err_kobj:
	kobject_put(hp_kobj);
	return ret;
}

void mltune_hugepool_exit(void)
{
	hp_remove_nodes();
	hp_users_clear();
	sysfs_remove_group(hp_kobj, &hp_group);
	kobject_put(hp_kobj);
}
