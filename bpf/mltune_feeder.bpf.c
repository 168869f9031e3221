// SPDX-License-Identifier: GPL-2.0
/*
 * mltune feeder scheduler: a sched_ext scheduler that keeps GPU-feeder CPUs
 * for GPU-feeder tasks.
 *
 * Policy (full switch: every SCHED_NORMAL/BATCH/IDLE task is scheduled here):
 *  - feeder tasks are the tasks of the feeder cgroup (cfg.cgid) and of its
 *    descendants; they run only on feeder CPUs (cfg.mask); one pinned to a
 *    single feeder CPU is queued on that CPU's local queue directly;
 *  - feeder CPUs run only feeder tasks and per-CPU kthreads;
 *  - a task whose affinity leaves no CPU of its kind runs where its affinity
 *    says and is counted in stats.forced (never a stall);
 *  - real-time and DEADLINE threads are not scheduled by sched_ext: a
 *    sched_switch program counts those outside the feeder cgroup that start
 *    on a feeder CPU (per-CPU kthreads and threads whose affinity is that
 *    one CPU aside) and records them in the intruders map, from which the
 *    feeder watcher in user space moves them off (stats.rt_foreign,
 *    stats.dl_foreign);
 *  - cfg is a map rewritten by user space at runtime; busy CPUs notice a
 *    change at the next tick (the wrong-kind task's slice is cut to 0),
 *    queued tasks at their next dispatch.
 * Two global FIFO DSQs, one per kind; each CPU consumes the DSQ of its kind.
 *
 * Built only against the BTF of a kernel with CONFIG_SCHED_CLASS_EXT (7.x);
 * kfunc declarations are our own: the scx_bpf_dsq_insert / dsq_move_to_local
 * names that kernels from 6.13 on export.
 */
#define BPF_NO_KFUNC_PROTOTYPES
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "mltune_feeder.h"

char _license[] SEC("license") = "GPL";

#define FEEDER_DSQ	1
#define NORMAL_DSQ	2
#define SLICE_NS	5000000ULL
#define PF_KTHREAD_FLAG	0x00200000
#define POLICY_FIFO	1
#define POLICY_RR	2
#define POLICY_DEADLINE	6

/* kfuncs (kernel/sched/ext.c, ext_idle.c, kernel/bpf/bpf_iter.c) */
extern s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
extern void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice,
			       u64 enq_flags) __ksym;
extern bool scx_bpf_dsq_move_to_local(u64 dsq_id) __ksym;
extern void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
extern bool scx_bpf_test_and_clear_cpu_idle(s32 cpu) __ksym;
extern s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
extern u32 scx_bpf_nr_cpu_ids(void) __ksym;
extern void scx_bpf_error_bstr(char *fmt, unsigned long long *data,
			       u32 data__sz) __ksym;
extern bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_feeder_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_feeder_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_feeder_uei);
} uei SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MLTUNE_FEEDER_MAX_INTRUDERS);
	__type(key, u32);
	__type(value, struct mltune_feeder_intruder);
} intruders SEC(".maps");

static struct mltune_feeder_cfg *get_cfg(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&cfg, &zero);
}

static struct mltune_feeder_stats *get_stats(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static bool cpu_is_feeder(const struct mltune_feeder_cfg *c, s32 cpu)
{
	u32 w;

	if (cpu < 0)
		return false;
	w = (u32)cpu >> 6;
	/* Keep the bound check on w itself: the verifier tracks it there. */
	asm volatile("" : "+r"(w));
	if (w >= MLTUNE_FEEDER_MASK_WORDS)
		return false;
	return (c->mask[w] >> ((u32)cpu & 63)) & 1;
}

static bool is_percpu_kthread(const struct task_struct *p)
{
	return (p->flags & PF_KTHREAD_FLAG) && p->nr_cpus_allowed == 1;
}

/* In the feeder cgroup or below it: ancestors[level] of the task's cgroup. */
static bool task_is_feeder(struct task_struct *p, const struct mltune_feeder_cfg *c)
{
	struct cgroup *cgrp, *anc = NULL;
	u32 lvl = c->level;
	int level;

	if (!c->cgid || lvl >= MLTUNE_FEEDER_MAX_LEVEL)
		return false;
	cgrp = BPF_CORE_READ(p, cgroups, dfl_cgrp);
	if (!cgrp)
		return false;
	level = BPF_CORE_READ(cgrp, level);
	if (level < (int)lvl)
		return false;
	if (bpf_probe_read_kernel(&anc, sizeof(anc), &cgrp->ancestors[lvl]) || !anc)
		return false;
	return BPF_CORE_READ(anc, kn, id) == c->cgid;
}

static bool cpu_ok(struct task_struct *p, const struct mltune_feeder_cfg *c,
		   bool feeder, s32 cpu)
{
	return cpu_is_feeder(c, cpu) == feeder &&
	       bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

/*
 * First CPU of the task's kind in its affinity; with @idle, only an idle one,
 * whose idle state is claimed.  -1 when none.
 */
static s32 find_cpu(struct task_struct *p, const struct mltune_feeder_cfg *c,
		    bool feeder, bool idle)
{
	u32 nr = scx_bpf_nr_cpu_ids();
	struct bpf_iter_num it;
	s32 found = -1;
	int *v;

	if (nr > MLTUNE_FEEDER_MAX_CPUS)
		nr = MLTUNE_FEEDER_MAX_CPUS;
	bpf_iter_num_new(&it, 0, nr);
	while ((v = bpf_iter_num_next(&it))) {
		s32 cpu = *v;

		if (!cpu_ok(p, c, feeder, cpu))
			continue;
		if (idle && !scx_bpf_test_and_clear_cpu_idle(cpu))
			continue;
		found = cpu;
		break;
	}
	bpf_iter_num_destroy(&it);
	return found;
}

static void report_error(const char *what)
{
	unsigned long long args[1] = { (unsigned long long)what };
	static char fmt[] = "mltune_feeder: %s";

	scx_bpf_error_bstr(fmt, args, sizeof(args));
}

SEC("struct_ops/mltune_select_cpu")
s32 BPF_PROG(mltune_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct mltune_feeder_cfg *c = get_cfg();
	bool feeder;
	s32 cpu;

	if (!c || is_percpu_kthread(p))
		return prev_cpu;
	feeder = task_is_feeder(p, c);
	if (cpu_ok(p, c, feeder, prev_cpu) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu))
		cpu = prev_cpu;
	else
		cpu = find_cpu(p, c, feeder, true);
	if (cpu >= 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SLICE_NS, 0);
		return cpu;
	}
	/* Nothing idle: queue on a CPU of the right kind (it is task_cpu()). */
	if (cpu_ok(p, c, feeder, prev_cpu))
		return prev_cpu;
	cpu = find_cpu(p, c, feeder, false);
	return cpu >= 0 ? cpu : prev_cpu;
}

SEC("struct_ops/mltune_enqueue")
void BPF_PROG(mltune_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct mltune_feeder_cfg *c = get_cfg();
	struct mltune_feeder_stats *s = get_stats();
	s32 cpu = scx_bpf_task_cpu(p);
	bool feeder;

	if (!c || !s) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SLICE_NS, enq_flags);
		return;
	}
	if (is_percpu_kthread(p)) {
		s->kthread_enq++;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SLICE_NS, enq_flags);
		return;
	}
	feeder = task_is_feeder(p, c);
	if (feeder)
		s->feeder_enq++;
	else
		s->normal_enq++;
	/*
	 * A feeder task pinned to one feeder CPU (one feeding loop per core)
	 * goes straight to that CPU's local queue: through the shared queue
	 * another CPU's dispatch may pull it first and pass it back, which
	 * leaves its own CPU idle in between (an involuntary switch of the
	 * task each time its slice ends).
	 */
	if (feeder && p->nr_cpus_allowed == 1 && cpu_ok(p, c, feeder, cpu)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, SLICE_NS, enq_flags);
		if (cpu != (s32)bpf_get_smp_processor_id())
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	/* Last runnable task of a CPU of its kind: keep it there. */
	if ((enq_flags & SCX_ENQ_LAST) && cpu_ok(p, c, feeder, cpu)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SLICE_NS, enq_flags);
		return;
	}
	if (find_cpu(p, c, feeder, false) < 0) {
		/* Its affinity leaves no CPU of its kind: never stall it. */
		s->forced++;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SLICE_NS, enq_flags);
		return;
	}
	scx_bpf_dsq_insert(p, feeder ? FEEDER_DSQ : NORMAL_DSQ, SLICE_NS, enq_flags);
	/*
	 * Wake an idle CPU of its kind, but not this one: a wake-up here (a
	 * pinned task's timer firing on its own idle CPU, where the kernel
	 * calls no select_cpu) already reschedules the idle task, and a kick
	 * would only add a self-IPI (irq_work) to every such wake-up.
	 */
	cpu = find_cpu(p, c, feeder, true);
	if (cpu >= 0 && cpu != (s32)bpf_get_smp_processor_id())
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

SEC("struct_ops/mltune_dispatch")
void BPF_PROG(mltune_dispatch, s32 cpu, struct task_struct *prev)
{
	struct mltune_feeder_cfg *c = get_cfg();

	if (!c)
		return;
	scx_bpf_dsq_move_to_local(cpu_is_feeder(c, cpu) ? FEEDER_DSQ : NORMAL_DSQ);
}

SEC("struct_ops/mltune_tick")
void BPF_PROG(mltune_tick, struct task_struct *p)
{
	struct mltune_feeder_cfg *c = get_cfg();
	struct mltune_feeder_stats *s = get_stats();
	s32 cpu = scx_bpf_task_cpu(p);
	bool feeder;

	if (!c || !s)
		return;
	if (c->inject_error) {
		report_error("error injected by user space");
		return;
	}
	if (is_percpu_kthread(p))
		return;
	feeder = task_is_feeder(p, c);
	/* The mask changed under a running task: move it at once. */
	if (!cpu_ok(p, c, feeder, cpu) && find_cpu(p, c, feeder, false) >= 0) {
		p->scx.slice = 0;
		s->preempted++;
	}
}

SEC("struct_ops/mltune_running")
void BPF_PROG(mltune_running, struct task_struct *p)
{
	struct mltune_feeder_cfg *c = get_cfg();
	struct mltune_feeder_stats *s = get_stats();
	s32 cpu = scx_bpf_task_cpu(p);
	bool feeder;

	if (!c || !s || is_percpu_kthread(p))
		return;
	feeder = task_is_feeder(p, c);
	if (cpu_is_feeder(c, cpu) == feeder)
		return;
	if (find_cpu(p, c, feeder, false) < 0)
		return; /* affinity-forced, counted in stats.forced */
	if (feeder)
		s->stray++;
	else
		s->foreign++;
}

/*
 * Real-time and DEADLINE threads outside the feeder cgroup starting on a
 * feeder CPU.  A thread allowed on that CPU alone is someone's explicit
 * choice (and per-CPU kthreads belong everywhere): not counted.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(mltune_rt_guard, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	struct mltune_feeder_cfg *c = get_cfg();
	struct mltune_feeder_stats *s = get_stats();
	struct mltune_feeder_intruder *in, fresh = {};
	s32 cpu = bpf_get_smp_processor_id();
	u32 policy = next->policy;
	u32 tid = next->pid;

	if (!c || !s || !cpu_is_feeder(c, cpu))
		return 0;
	if (policy != POLICY_FIFO && policy != POLICY_RR && policy != POLICY_DEADLINE)
		return 0;
	if (next->nr_cpus_allowed <= 1 || task_is_feeder(next, c))
		return 0;
	if (policy == POLICY_DEADLINE)
		s->dl_foreign++;
	else
		s->rt_foreign++;
	in = bpf_map_lookup_elem(&intruders, &tid);
	if (in) {
		in->cpu = cpu;
		in->policy = policy;
		__sync_fetch_and_add(&in->count, 1);
		return 0;
	}
	fresh.cpu = cpu;
	fresh.policy = policy;
	fresh.count = 1;
	bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), next->comm);
	bpf_map_update_elem(&intruders, &tid, &fresh, BPF_NOEXIST);
	return 0;
}

SEC("struct_ops.s/mltune_init")
s32 BPF_PROG(mltune_init)
{
	s32 ret;

	ret = scx_bpf_create_dsq(FEEDER_DSQ, -1);
	if (ret)
		return ret;
	return scx_bpf_create_dsq(NORMAL_DSQ, -1);
}

SEC("struct_ops/mltune_exit")
void BPF_PROG(mltune_exit, struct scx_exit_info *ei)
{
	struct mltune_feeder_uei *u;
	u32 zero = 0;

	u = bpf_map_lookup_elem(&uei, &zero);
	if (!u)
		return;
	bpf_probe_read_kernel_str(u->reason, sizeof(u->reason), ei->reason);
	bpf_probe_read_kernel_str(u->msg, sizeof(u->msg), ei->msg);
	u->exit_code = ei->exit_code;
	u->kind = ei->kind;
}

SEC(".struct_ops.link")
struct sched_ext_ops mltune_feeder_ops = {
	.select_cpu	= (void *)mltune_select_cpu,
	.enqueue	= (void *)mltune_enqueue,
	.dispatch	= (void *)mltune_dispatch,
	.tick		= (void *)mltune_tick,
	.running	= (void *)mltune_running,
	.init		= (void *)mltune_init,
	.exit		= (void *)mltune_exit,
	.flags		= SCX_OPS_ENQ_LAST,
	.timeout_ms	= 5000,
	.name		= MLTUNE_SCX_NAME,
};
