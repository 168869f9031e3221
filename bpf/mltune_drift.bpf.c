// SPDX-License-Identifier: GPL-2.0
/*
 * mltune drift watcher: who wrote a setting, and what.
 *
 * Every write is seen twice: on entry the writer (thread, process, comm,
 * cgroup), the file (device, inode, the path's last MLTUNE_DRIFT_DEPTH
 * names), the new value and, for sysctls whose data the watcher can read,
 * the old value are staged in `pending` under the writer's pid_tgid; on a
 * successful return the record moves to `writes` under the file's key.
 * Failed writes leave no record.
 *   fentry/fexit proc_sys_write                 sysctls (/proc/sys)
 *   fentry/fexit kernfs_fop_write_iter          sysfs and cgroup2 files
 *   fentry/fexit irq_affinity(_list)_proc_write /proc/irq/N/smp_affinity(_list)
 *   tracepoints syscalls:sys_{enter,exit}_sched_{setattr,setscheduler,
 *               setparam,setaffinity}      scheduling of a thread
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "mltune_drift.h"

char _license[] SEC("license") = "GPL";

/* sysctl handlers whose data reads as the value (0 if absent) */
extern const void proc_dostring __ksym __weak;
extern const void proc_douintvec __ksym __weak;
extern const void proc_douintvec_minmax __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_drift_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MLTUNE_DRIFT_MAX_ENTRIES);
	__type(key, struct mltune_drift_key);
	__type(value, struct mltune_drift_rec);
} writes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, u64);
	__type(value, struct mltune_drift_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_drift_pending);
} scratch SEC(".maps");

/* iov_iter before 6.2 named its iovec pointer iov (now __iov). */
struct iov_iter___old {
	const struct iovec *iov;
} __attribute__((preserve_access_index));

/* A zeroed staging record with the writer filled in. */
static struct mltune_drift_pending *stage(u32 op)
{
	u32 zero = 0;
	struct mltune_drift_pending *p = bpf_map_lookup_elem(&scratch, &zero);
	u64 id = bpf_get_current_pid_tgid();

	if (!p)
		return NULL;
	__builtin_memset(p, 0, sizeof(*p));
	p->rec.op = op;
	p->rec.pid = (u32)id;
	p->rec.tgid = id >> 32;
	p->rec.cgid = bpf_get_current_cgroup_id();
	p->rec.policy = -1;
	bpf_get_current_comm(p->rec.comm, sizeof(p->rec.comm));
	return p;
}

static void keep(struct mltune_drift_pending *p)
{
	u64 id = bpf_get_current_pid_tgid();

	bpf_map_update_elem(&pending, &id, p, BPF_ANY);
}

/* The staged record of this thread becomes the file's last write if ok. */
static void commit(bool ok)
{
	u64 id = bpf_get_current_pid_tgid();
	struct mltune_drift_pending *p = bpf_map_lookup_elem(&pending, &id);
	struct mltune_drift_cfg *c;
	u32 zero = 0;

	if (!p)
		return;
	c = bpf_map_lookup_elem(&cfg, &zero);
	if (ok && c) {
		p->rec.boot_ns = bpf_ktime_get_boot_ns();
		p->rec.seq = __sync_fetch_and_add(&c->seq, 1) + 1;
		bpf_map_update_elem(&writes, &p->key, &p->rec, BPF_ANY);
	}
	bpf_map_delete_elem(&pending, &id);
}

static void set_file(struct mltune_drift_pending *p, struct file *f)
{
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	struct mltune_drift_rec *r = &p->rec;
	int i;

	p->key.kind = MLTUNE_DRIFT_FILE;
	p->key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	p->key.ino = BPF_CORE_READ(inode, i_ino);
	r->magic = BPF_CORE_READ(inode, i_sb, s_magic);
	for (i = 0; i < MLTUNE_DRIFT_DEPTH; i++) {
		struct dentry *up = BPF_CORE_READ(d, d_parent);

		if (!up || up == d)
			break;
		bpf_probe_read_kernel_str(r->path[i], MLTUNE_DRIFT_NAME_LEN,
					  BPF_CORE_READ(d, d_name.name));
		r->depth = i + 1;
		d = up;
	}
	if (i == MLTUNE_DRIFT_DEPTH && BPF_CORE_READ(d, d_parent) != d)
		r->flags |= MLTUNE_DRIFT_F_DEEP;
}

static u64 clamp_len(struct mltune_drift_rec *r, u64 n)
{
	if (n >= MLTUNE_DRIFT_VALUE_LEN) {
		r->flags |= MLTUNE_DRIFT_F_TRUNC;
		n = MLTUNE_DRIFT_VALUE_LEN - 1;
	}
	return n;
}

static void set_value_user(struct mltune_drift_rec *r, const void *buf, u64 n)
{
	n = clamp_len(r, n);
	bpf_probe_read_user(r->new_value, n, buf);
}

/* The bytes being written, from the write's iov_iter. */
static void set_value_iter(struct mltune_drift_rec *r, struct iov_iter *it)
{
	u8 type = BPF_CORE_READ(it, iter_type);
	u64 n = BPF_CORE_READ(it, count);
	const void *base;

	if (type == bpf_core_enum_value(enum iter_type, ITER_UBUF)) {
		set_value_user(r, BPF_CORE_READ(it, ubuf), n);
	} else if (type == bpf_core_enum_value(enum iter_type, ITER_IOVEC)) {
		if (bpf_core_field_exists(it->__iov)) {
			base = BPF_CORE_READ(it, __iov, iov_base);
		} else {
			struct iov_iter___old *o = (void *)it;

			base = BPF_CORE_READ(o, iov, iov_base);
		}
		set_value_user(r, base, n);
	} else if (type == bpf_core_enum_value(enum iter_type, ITER_KVEC)) {
		r->flags |= MLTUNE_DRIFT_F_KERNEL;
		n = clamp_len(r, n);
		bpf_probe_read_kernel(r->new_value, n, BPF_CORE_READ(it, kvec, iov_base));
	}
}

/* ---- sysctl --------------------------------------------------------------- */

/* The sysctl's current value where its data is a plain int, long or string. */
static void set_sysctl_old(struct mltune_drift_rec *r, struct file *f)
{
	static const char fmt_d[] = "%d", fmt_u[] = "%u", fmt_lu[] = "%lu";
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	struct proc_inode *pi;
	const struct ctl_table *t;
	u64 arg = 0, h;
	void *data;
	int maxlen;

	pi = (void *)((u64)inode - bpf_core_field_offset(struct proc_inode, vfs_inode));
	t = BPF_CORE_READ(pi, sysctl_entry);
	if (!t)
		return;
	data = BPF_CORE_READ(t, data);
	maxlen = BPF_CORE_READ(t, maxlen);
	h = (u64)BPF_CORE_READ(t, proc_handler);
	if (!data)
		return;
	if (h && h == (u64)&proc_dostring) {
		if (bpf_probe_read_kernel_str(r->old_value, sizeof(r->old_value), data) > 0)
			r->flags |= MLTUNE_DRIFT_F_OLD;
		return;
	}
	if (maxlen == 4) {
		int v = 0;

		if (bpf_probe_read_kernel(&v, sizeof(v), data))
			return;
		if (h && (h == (u64)&proc_douintvec || h == (u64)&proc_douintvec_minmax)) {
			arg = (u32)v;
			bpf_snprintf(r->old_value, sizeof(r->old_value), fmt_u, &arg, sizeof(arg));
		} else {
			arg = (u64)(s64)v;
			bpf_snprintf(r->old_value, sizeof(r->old_value), fmt_d, &arg, sizeof(arg));
		}
	} else if (maxlen == 8 || maxlen == 1) {
		if (bpf_probe_read_kernel(&arg, maxlen == 8 ? 8 : 1, data))
			return;
		bpf_snprintf(r->old_value, sizeof(r->old_value), fmt_lu, &arg, sizeof(arg));
	} else {
		return;
	}
	r->flags |= MLTUNE_DRIFT_F_OLD;
}

SEC("fentry/proc_sys_write")
int BPF_PROG(drift_sysctl, struct kiocb *iocb, struct iov_iter *iter)
{
	struct mltune_drift_pending *p = stage(MLTUNE_DRIFT_OP_SYSCTL);
	struct file *f = BPF_CORE_READ(iocb, ki_filp);

	if (!p)
		return 0;
	set_file(p, f);
	set_value_iter(&p->rec, iter);
	set_sysctl_old(&p->rec, f);
	keep(p);
	return 0;
}

SEC("fexit/proc_sys_write")
int BPF_PROG(drift_sysctl_ret, struct kiocb *iocb, struct iov_iter *iter, long ret)
{
	commit(ret > 0);
	return 0;
}

/* ---- sysfs and cgroup2 (kernfs) ------------------------------------------- */

SEC("fentry/kernfs_fop_write_iter")
int BPF_PROG(drift_kernfs, struct kiocb *iocb, struct iov_iter *iter)
{
	struct mltune_drift_pending *p = stage(MLTUNE_DRIFT_OP_KERNFS);

	if (!p)
		return 0;
	set_file(p, BPF_CORE_READ(iocb, ki_filp));
	set_value_iter(&p->rec, iter);
	keep(p);
	return 0;
}

SEC("fexit/kernfs_fop_write_iter")
int BPF_PROG(drift_kernfs_ret, struct kiocb *iocb, struct iov_iter *iter, long ret)
{
	commit(ret > 0);
	return 0;
}

/* ---- /proc/irq/N/smp_affinity(_list) -------------------------------------- */

static void irq_write(struct file *f, const char *buf, u64 count)
{
	struct mltune_drift_pending *p = stage(MLTUNE_DRIFT_OP_IRQ_AFFINITY);

	if (!p)
		return;
	set_file(p, f);
	set_value_user(&p->rec, buf, count);
	keep(p);
}

SEC("fentry/irq_affinity_proc_write")
int BPF_PROG(drift_irq, struct file *f, const char *buf, size_t count)
{
	irq_write(f, buf, count);
	return 0;
}

SEC("fexit/irq_affinity_proc_write")
int BPF_PROG(drift_irq_ret, struct file *f, const char *buf, size_t count, loff_t *pos,
	     long ret)
{
	commit(ret > 0);
	return 0;
}

SEC("fentry/irq_affinity_list_proc_write")
int BPF_PROG(drift_irq_list, struct file *f, const char *buf, size_t count)
{
	irq_write(f, buf, count);
	return 0;
}

SEC("fexit/irq_affinity_list_proc_write")
int BPF_PROG(drift_irq_list_ret, struct file *f, const char *buf, size_t count, loff_t *pos,
	     long ret)
{
	commit(ret > 0);
	return 0;
}

/* ---- scheduling of a thread ----------------------------------------------- */

/* struct sched_attr (include/uapi/linux/sched/types.h), the fields read. */
struct drift_sched_attr {
	u32 size;
	u32 sched_policy;
	u64 sched_flags;
	s32 sched_nice;
	u32 sched_priority;
	u64 sched_runtime;
	u64 sched_deadline;
	u64 sched_period;
};

static struct mltune_drift_pending *stage_sched(u32 op, u64 pid)
{
	struct mltune_drift_pending *p = stage(op);

	if (!p)
		return NULL;
	p->key.kind = MLTUNE_DRIFT_SCHED;
	p->rec.target = pid ? (u32)pid : p->rec.pid;
	p->key.ino = p->rec.target;
	return p;
}

SEC("tp/syscalls/sys_enter_sched_setattr")
int drift_setattr(struct trace_event_raw_sys_enter *ctx)
{
	static const char fmt[] =
		"policy=%u flags=%llx nice=%d prio=%u runtime=%llu deadline=%llu period=%llu";
	struct mltune_drift_pending *p = stage_sched(MLTUNE_DRIFT_OP_SETATTR, ctx->args[0]);
	struct drift_sched_attr a = {};
	u64 v[7];

	if (!p)
		return 0;
	bpf_probe_read_user(&a, sizeof(a), (void *)ctx->args[1]);
	p->rec.policy = (int)a.sched_policy;
	v[0] = a.sched_policy;
	v[1] = a.sched_flags;
	v[2] = (u64)(s64)a.sched_nice;
	v[3] = a.sched_priority;
	v[4] = a.sched_runtime;
	v[5] = a.sched_deadline;
	v[6] = a.sched_period;
	bpf_snprintf(p->rec.new_value, sizeof(p->rec.new_value), fmt, v, sizeof(v));
	keep(p);
	return 0;
}

SEC("tp/syscalls/sys_enter_sched_setscheduler")
int drift_setscheduler(struct trace_event_raw_sys_enter *ctx)
{
	static const char fmt[] = "policy=%d prio=%d";
	struct mltune_drift_pending *p = stage_sched(MLTUNE_DRIFT_OP_SETSCHEDULER, ctx->args[0]);
	int prio = 0;
	u64 v[2];

	if (!p)
		return 0;
	bpf_probe_read_user(&prio, sizeof(prio), (void *)ctx->args[2]);
	p->rec.policy = (int)ctx->args[1];
	v[0] = (u64)(s64)(int)ctx->args[1];
	v[1] = (u64)(s64)prio;
	bpf_snprintf(p->rec.new_value, sizeof(p->rec.new_value), fmt, v, sizeof(v));
	keep(p);
	return 0;
}

SEC("tp/syscalls/sys_enter_sched_setparam")
int drift_setparam(struct trace_event_raw_sys_enter *ctx)
{
	static const char fmt[] = "prio=%d";
	struct mltune_drift_pending *p = stage_sched(MLTUNE_DRIFT_OP_SETPARAM, ctx->args[0]);
	int prio = 0;
	u64 v;

	if (!p)
		return 0;
	bpf_probe_read_user(&prio, sizeof(prio), (void *)ctx->args[1]);
	v = (u64)(s64)prio;
	bpf_snprintf(p->rec.new_value, sizeof(p->rec.new_value), fmt, &v, sizeof(v));
	keep(p);
	return 0;
}

SEC("tp/syscalls/sys_enter_sched_setaffinity")
int drift_setaffinity(struct trace_event_raw_sys_enter *ctx)
{
	static const char fmt[] = "cpumask=%llx";
	struct mltune_drift_pending *p = stage_sched(MLTUNE_DRIFT_OP_SETAFFINITY, ctx->args[0]);
	u64 mask = 0;

	if (!p)
		return 0;
	bpf_probe_read_user(&mask, ctx->args[1] < 8 ? 4 : 8, (void *)ctx->args[2]);
	bpf_snprintf(p->rec.new_value, sizeof(p->rec.new_value), fmt, &mask, sizeof(mask));
	keep(p);
	return 0;
}

#define SCHED_EXIT(name)						\
SEC("tp/syscalls/sys_exit_" #name)					\
int drift_##name##_ret(struct trace_event_raw_sys_exit *ctx)		\
{									\
	commit(ctx->ret == 0);						\
	return 0;							\
}

SCHED_EXIT(sched_setattr)
SCHED_EXIT(sched_setscheduler)
SCHED_EXIT(sched_setparam)
SCHED_EXIT(sched_setaffinity)
