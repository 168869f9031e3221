// SPDX-License-Identifier: GPL-2.0
/*
 * mltune noise accounting: every interruption of the watched CPUs, by source.
 *
 * BTF tracepoints (tp_btf, CO-RE; loads on every kernel with BTF):
 *   irq_handler_entry/exit        device IRQs (once per IRQ: the exit of the
 *                                 last action of a shared line counts)
 *   irq_vectors:*_entry/exit      local timer, IPIs, other APIC vectors
 *   hrtimer_expire_entry          what a local timer interrupt was for: the
 *                                 first hrtimer it expired names it (a
 *                                 task's sleep, the tick, the deadline
 *                                 server, ...); every expiry is a detail
 *                                 (the fair deadline server's apart)
 *   softirq_entry/exit            softirqs by vector; their time is also
 *                                 charged to the hardirq whose exit ran them
 *   sched_switch                  tasks switched in, and their CPU time
 *   workqueue_execute_start,
 *   timer_expire_entry            work items and timer callbacks (details)
 * and fentry/flush_tlb_func for TLB shootdowns (remote flushes).
 *
 * Times exclude nested interruptions: a softirq's time does not include the
 * hardirqs that hit it, a task's time neither hardirqs nor softirqs.
 * Counting happens only while cfg.enabled and on CPUs in cfg.mask; the
 * per-CPU state is kept up to date while attached, so a task that was
 * already running when the window opened is still charged (from start_ns).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "mltune_noise.h"

char _license[] SEC("license") = "GPL";

/* hrtimer functions that name a local timer interrupt's cause (0 if absent). */
extern const void hrtimer_wakeup __ksym __weak;
extern const void dl_task_timer __ksym __weak;
extern const void inactive_task_timer __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_noise_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MLTUNE_NOISE_MAX_ENTRIES);
	__type(key, struct mltune_noise_key);
	__type(value, struct mltune_noise_val);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct mltune_noise_pcpu);
} pcpu SEC(".maps");

/* Whether @cpu is in the watched mask of @c. */
static bool cpu_watched(const struct mltune_noise_cfg *c, u32 cpu)
{
	u32 w = cpu >> 6;

	/* Keep the bound check on w itself: the verifier tracks it there. */
	asm volatile("" : "+r"(w));
	return w < MLTUNE_NOISE_MASK_WORDS && ((c->mask[w] >> (cpu & 63)) & 1);
}

/* The per-CPU state and cfg, or NULL when this CPU is not watched. */
static struct mltune_noise_pcpu *watched(struct mltune_noise_cfg **cp, u32 *cpup)
{
	u32 zero = 0, cpu = bpf_get_smp_processor_id();
	struct mltune_noise_cfg *c = bpf_map_lookup_elem(&cfg, &zero);

	if (!c || !cpu_watched(c, cpu))
		return NULL;
	*cp = c;
	*cpup = cpu;
	return bpf_map_lookup_elem(&pcpu, &zero);
}

/* The counts entry of @k, created with @name (a kernel string) if new. */
static struct mltune_noise_val *entry(struct mltune_noise_pcpu *s,
				      struct mltune_noise_key *k,
				      const void *name, bool name_is_array)
{
	struct mltune_noise_val *v = bpf_map_lookup_elem(&counts, k);
	struct mltune_noise_val nv = {};

	if (v)
		return v;
	if (name) {
		if (name_is_array)
			bpf_probe_read_kernel(nv.name, 16, name);
		else
			bpf_probe_read_kernel_str(nv.name, sizeof(nv.name), name);
	}
	/* EEXIST: created meanwhile by a nested program; use that one. */
	bpf_map_update_elem(&counts, k, &nv, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&counts, k);
	if (!v)
		s->dropped++;
	return v;
}

static void count_detail(struct mltune_noise_pcpu *s, u32 cpu, u32 kind, u64 id)
{
	struct mltune_noise_key k = { .cpu = cpu, .kind = kind, .id = id };
	struct mltune_noise_val *v = entry(s, &k, NULL, false);

	if (v)
		__sync_fetch_and_add(&v->count, 1);
}

static u64 since(u64 ts, const struct mltune_noise_cfg *c, u64 now)
{
	if (ts < c->start_ns)
		ts = c->start_ns;
	return now > ts ? now - ts : 0;
}

/*
 * Makes @t the running task of @s since @ts, with the nested-interruption
 * bases @hard and @soft; the idle task (pid 0) leaves no running task.
 * Returns @t's pid.
 */
static u32 set_task(struct mltune_noise_pcpu *s, struct task_struct *t, u64 ts,
		    u64 hard, u64 soft)
{
	u32 pid = BPF_CORE_READ(t, pid);

	s->task_pid = pid;
	s->task_ts = 0;
	if (!pid)
		return 0;
	s->task_ts = ts;
	s->task_tgid = BPF_CORE_READ(t, tgid);
	s->task_flags = BPF_CORE_READ(t, flags);
	s->task_cgid = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	s->task_hard_base = hard;
	s->task_soft_base = soft;
	bpf_probe_read_kernel(s->task_comm, sizeof(s->task_comm), &t->comm);
	return pid;
}

/*
 * A CPU whose running task is unknown has seen no sched_switch since the
 * programs were attached: the task interrupted now has run since before
 * then, so since the window opened if it is open (all of the window's
 * interruptions on this CPU nested in it: bases 0, the totals start at
 * enable), else since now.  Without this a task that never leaves the CPU
 * (a busy thread on an otherwise idle core) would never be charged.
 */
static void seed_task(struct mltune_noise_pcpu *s, const struct mltune_noise_cfg *c)
{
	if (s->task_pid || s->task_ts)
		return;
	if (c->enabled)
		set_task(s, bpf_get_current_task_btf(), c->start_ns, 0, 0);
	else
		set_task(s, bpf_get_current_task_btf(), bpf_ktime_get_ns(),
			 s->hard_ns, s->soft_ns);
}

static void start_hard(u32 kind, u64 id)
{
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	u32 cpu;

	s = watched(&c, &cpu);
	if (!s || s->in_hard)
		return;
	seed_task(s, c);
	s->in_hard = 1;
	s->hard_ts = bpf_ktime_get_ns();
	s->hard_key.cpu = cpu;
	s->hard_key.kind = kind;
	s->hard_key.id = id;
	s->timer_id = 0;
	s->timer_kind = 0;
	s->bh_valid = 0;
}

/* Ends the hardirq/vector in progress if it is @kind/@id (kind 0: any timer). */
static void end_hard(u32 kind, u64 id, const void *name, bool name_is_array)
{
	struct mltune_noise_val *v;
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	u32 cpu;
	u64 now, dur;

	s = watched(&c, &cpu);
	if (!s || !s->in_hard)
		return;
	if (kind) {
		if (s->hard_key.kind != kind || s->hard_key.id != id)
			return;
	} else if (s->hard_key.kind != MLTUNE_NOISE_TIMER) {
		return;
	}
	now = bpf_ktime_get_ns();
	s->in_hard = 0;
	if (!c->enabled)
		return;
	dur = since(s->hard_ts, c, now);
	if (!kind && s->timer_kind) {
		/* A local timer interrupt, named by its first expiry. */
		s->hard_key.kind = s->timer_kind;
		s->hard_key.id = s->timer_id;
		name = s->timer_kind == MLTUNE_NOISE_TIMER_TASK ? s->timer_name : NULL;
		name_is_array = true;
	}
	v = entry(s, &s->hard_key, name, name_is_array);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		__sync_fetch_and_add(&v->ns, dur);
	}
	s->hard_ns += dur;
	s->bh_key = s->hard_key;
	s->bh_valid = 1;
}

/* ---- device IRQs ---------------------------------------------------------- */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(noise_irq_entry, int irq, struct irqaction *action)
{
	start_hard(MLTUNE_NOISE_IRQ, (u32)irq);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(noise_irq_exit, int irq, struct irqaction *action, int ret)
{
	/* A shared line runs every action: count at the last one. */
	if (BPF_CORE_READ(action, next))
		return 0;
	end_hard(MLTUNE_NOISE_IRQ, (u32)irq, BPF_CORE_READ(action, name), false);
	return 0;
}

/* ---- APIC vectors ---------------------------------------------------------- */

#define VECTOR(tp, vec)							\
SEC("tp_btf/" #tp "_entry")						\
int BPF_PROG(noise_##tp##_entry, int vector)				\
{									\
	start_hard(MLTUNE_NOISE_VECTOR, vec);				\
	return 0;							\
}									\
SEC("tp_btf/" #tp "_exit")						\
int BPF_PROG(noise_##tp##_exit, int vector)				\
{									\
	end_hard(MLTUNE_NOISE_VECTOR, vec, NULL, false);		\
	return 0;							\
}

VECTOR(reschedule, MLTUNE_VEC_RESCHEDULE)
VECTOR(call_function, MLTUNE_VEC_CALL_FUNCTION)
VECTOR(call_function_single, MLTUNE_VEC_CALL_FUNCTION_SINGLE)
VECTOR(irq_work, MLTUNE_VEC_IRQ_WORK)
VECTOR(thermal_apic, MLTUNE_VEC_THERMAL)
VECTOR(threshold_apic, MLTUNE_VEC_THRESHOLD)
VECTOR(deferred_error_apic, MLTUNE_VEC_DEFERRED_ERROR)
VECTOR(error_apic, MLTUNE_VEC_ERROR)
VECTOR(spurious_apic, MLTUNE_VEC_SPURIOUS)
VECTOR(x86_platform_ipi, MLTUNE_VEC_PLATFORM_IPI)

SEC("tp_btf/local_timer_entry")
int BPF_PROG(noise_local_timer_entry, int vector)
{
	start_hard(MLTUNE_NOISE_TIMER, 0);
	return 0;
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(noise_local_timer_exit, int vector)
{
	end_hard(0, 0, NULL, false);
	return 0;
}

/*
 * The fair deadline server whose timer @timer (running @fn) is, or NULL: a
 * task's deadline timers, any other timer and kernels without the server
 * give NULL.
 */
static struct sched_dl_entity *dl_server_of(struct hrtimer *timer, u64 fn)
{
	struct sched_dl_entity *dl;
	u64 addr = (u64)timer;

	if (!fn || !(fn == (u64)&dl_task_timer || fn == (u64)&inactive_task_timer) ||
	    !bpf_core_field_exists(struct sched_dl_entity, dl_server))
		return NULL;
	if (fn == (u64)&dl_task_timer)
		addr -= bpf_core_field_offset(struct sched_dl_entity, dl_timer);
	else
		addr -= bpf_core_field_offset(struct sched_dl_entity, inactive_timer);
	dl = (void *)addr;
	return BPF_CORE_READ_BITFIELD_PROBED(dl, dl_server) ? dl : NULL;
}

/*
 * The replenishment timer of a watched CPU's fair deadline server, expired on
 * another CPU (a nohz_full CPU's timers run on housekeeping CPUs): it kicks
 * the watched CPU with a reschedule IPI and restarts its tick, so it is
 * counted as a detail of the CPU it serves.
 */
static void remote_dl_server(struct hrtimer *timer)
{
	u64 fn = (u64)BPF_CORE_READ(timer, function);
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	struct sched_dl_entity *dl;
	u32 zero = 0, target;

	if (fn != (u64)&dl_task_timer || !bpf_core_field_exists(struct sched_dl_entity, rq))
		return;
	dl = dl_server_of(timer, fn);
	if (!dl)
		return;
	target = BPF_CORE_READ(dl, rq, cpu);
	c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c || !c->enabled || !cpu_watched(c, target))
		return;
	s = bpf_map_lookup_elem(&pcpu, &zero);
	if (s)
		count_detail(s, target, MLTUNE_NOISE_HRTIMER_DL_SERVER, 0);
}

/* The first hrtimer a local timer interrupt expires names the interrupt. */
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(noise_hrtimer_expire, struct hrtimer *timer)
{
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	bool dl_server;
	u64 fn, addr;
	u32 cpu;

	s = watched(&c, &cpu);
	if (!s) {
		remote_dl_server(timer);
		return 0;
	}
	fn = (u64)BPF_CORE_READ(timer, function);
	addr = (u64)timer;
	dl_server = dl_server_of(timer, fn);
	if (c->enabled) {
		if (dl_server)
			count_detail(s, cpu, MLTUNE_NOISE_HRTIMER_DL_SERVER, 0);
		else
			count_detail(s, cpu, MLTUNE_NOISE_HRTIMER, fn);
	}
	if (!s->in_hard || s->hard_key.kind != MLTUNE_NOISE_TIMER || s->timer_kind)
		return 0;
	if (fn && fn == (u64)&hrtimer_wakeup) {
		struct hrtimer_sleeper *sl;
		struct task_struct *t;

		sl = (void *)(addr - bpf_core_field_offset(struct hrtimer_sleeper, timer));
		t = BPF_CORE_READ(sl, task);
		s->timer_kind = MLTUNE_NOISE_TIMER_TASK;
		s->timer_id = t ? (u32)BPF_CORE_READ(t, pid) : 0;
		__builtin_memset(s->timer_name, 0, sizeof(s->timer_name));
		if (t)
			bpf_probe_read_kernel(s->timer_name, sizeof(s->timer_name), &t->comm);
		return 0;
	}
	s->timer_kind = dl_server ? MLTUNE_NOISE_TIMER_DL_SERVER : MLTUNE_NOISE_TIMER;
	s->timer_id = dl_server ? 0 : fn;
	return 0;
}

/* ---- softirqs ------------------------------------------------------------- */

SEC("tp_btf/softirq_entry")
int BPF_PROG(noise_softirq_entry, unsigned int vec)
{
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	u32 cpu;

	s = watched(&c, &cpu);
	if (!s)
		return 0;
	s->soft_ts = bpf_ktime_get_ns();
	s->soft_vec = vec;
	s->soft_hard_base = s->hard_ns;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(noise_softirq_exit, unsigned int vec)
{
	struct mltune_noise_key k = { .kind = MLTUNE_NOISE_SOFTIRQ, .id = vec };
	struct mltune_noise_val *v;
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	u64 now, dur, nested;
	u32 cpu;

	s = watched(&c, &cpu);
	if (!s || !s->soft_ts || s->soft_vec != vec)
		return 0;
	now = bpf_ktime_get_ns();
	dur = since(s->soft_ts, c, now);
	s->soft_ts = 0;
	if (!c->enabled)
		return 0;
	nested = s->hard_ns - s->soft_hard_base;
	dur = dur > nested ? dur - nested : 0;
	k.cpu = cpu;
	v = entry(s, &k, NULL, false);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		__sync_fetch_and_add(&v->ns, dur);
	}
	s->soft_ns += dur;
	if (s->bh_valid) {
		v = entry(s, &s->bh_key, NULL, false);
		if (v)
			__sync_fetch_and_add(&v->bh_ns, dur);
	}
	return 0;
}

/* ---- tasks ---------------------------------------------------------------- */

static struct mltune_noise_val *task_entry(struct mltune_noise_pcpu *s, u32 cpu)
{
	struct mltune_noise_key k = { .cpu = cpu, .kind = MLTUNE_NOISE_TASK, .id = s->task_pid };
	struct mltune_noise_val *v = entry(s, &k, s->task_comm, true);

	if (v && !v->tgid) {
		v->tgid = s->task_tgid;
		v->flags = s->task_flags;
		v->cgid = s->task_cgid;
	}
	return v;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(noise_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	struct mltune_noise_val *v;
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	u64 now, dur, nested;
	u32 cpu, pid;

	s = watched(&c, &cpu);
	if (!s)
		return 0;
	now = bpf_ktime_get_ns();
	s->bh_valid = 0;
	if (c->enabled) {
		s->switches++;
		pid = BPF_CORE_READ(prev, pid);
		if (s->task_pid && s->task_pid == pid && s->task_ts) {
			dur = since(s->task_ts, c, now);
			nested = s->hard_ns - s->task_hard_base;
			nested += s->soft_ns - s->task_soft_base;
			dur = dur > nested ? dur - nested : 0;
			v = task_entry(s, cpu);
			if (v)
				__sync_fetch_and_add(&v->ns, dur);
		}
	}
	if (!set_task(s, next, now, s->hard_ns, s->soft_ns))
		return 0;
	if (c->enabled) {
		v = task_entry(s, cpu);
		if (v) {
			__sync_fetch_and_add(&v->count, 1);
			/*
			 * The name it runs under now: a child forked just
			 * before the window first runs under its parent's
			 * name, until its prctl(PR_SET_NAME) or exec.
			 */
			__builtin_memcpy(v->name, s->task_comm, sizeof(s->task_comm));
		}
	}
	return 0;
}

/* ---- details -------------------------------------------------------------- */

static void detail(u32 kind, u64 id)
{
	struct mltune_noise_cfg *c;
	struct mltune_noise_pcpu *s;
	u32 cpu;

	s = watched(&c, &cpu);
	if (s && c->enabled)
		count_detail(s, cpu, kind, id);
}

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(noise_work, struct work_struct *work)
{
	detail(MLTUNE_NOISE_WORK, (u64)BPF_CORE_READ(work, func));
	return 0;
}

SEC("tp_btf/timer_expire_entry")
int BPF_PROG(noise_timer_cb, struct timer_list *timer)
{
	detail(MLTUNE_NOISE_TIMER_CB, (u64)BPF_CORE_READ(timer, function));
	return 0;
}

/*
 * NUMA balancing's page-table scan, run on return to user space by the task
 * that task_tick_numa() queued it on; queueing it from a remote tick (a
 * nohz_full CPU) kicks the task's CPU with a reschedule IPI.
 */
SEC("fentry/task_numa_work")
int BPF_PROG(noise_numa_scan, void *work)
{
	detail(MLTUNE_NOISE_NUMA_SCAN, 0);
	return 0;
}

/* A TLB flush run for another CPU: a shootdown (inside a function-call IPI). */
SEC("fentry/flush_tlb_func")
int BPF_PROG(noise_tlb, void *info)
{
	const struct flush_tlb_info *f = info;

	if (BPF_CORE_READ(f, initiating_cpu) != bpf_get_smp_processor_id())
		detail(MLTUNE_NOISE_VECTOR, MLTUNE_VEC_TLB_SHOOTDOWN);
	return 0;
}
