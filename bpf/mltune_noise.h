/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between the noise accounting BPF programs (mltune_noise.bpf.c) and
 * their loader (mltune_noise.c, used by userspace/lib/src/noise/).
 *
 * One window per load: the loader attaches every program, then writes cfg
 * with enabled = 1 and start_ns = CLOCK_MONOTONIC now; the programs count
 * only while enabled and only on the CPUs in cfg.mask.  Maps:
 *   cfg    ARRAY[1] of struct mltune_noise_cfg
 *   counts HASH of struct mltune_noise_key -> struct mltune_noise_val: one
 *          entry per CPU and source (an IRQ, a local timer cause, an IPI
 *          kind, a softirq vector, a task, and the hrtimer, work item and
 *          timer callback functions seen inside them)
 *   pcpu   PERCPU_ARRAY[1] of struct mltune_noise_pcpu: per-CPU totals and
 *          the state of the interruption in progress (the task running when
 *          the window closes is read from here)
 */
#ifndef MLTUNE_NOISE_H
#define MLTUNE_NOISE_H

#define MLTUNE_NOISE_MAX_CPUS 1024
#define MLTUNE_NOISE_MASK_WORDS (MLTUNE_NOISE_MAX_CPUS / 64)
#define MLTUNE_NOISE_MAX_ENTRIES 16384
#define MLTUNE_NOISE_NAME_LEN 32

/* struct mltune_noise_key.kind */
enum mltune_noise_kind {
	/* device IRQ; id: IRQ number, name: its action */
	MLTUNE_NOISE_IRQ = 1,
	/* IPI or APIC vector; id: enum mltune_noise_vec */
	MLTUNE_NOISE_VECTOR,
	/* local timer interrupt, by the first hrtimer it expired; id: its
	 * function (0: none expired)
	 */
	MLTUNE_NOISE_TIMER,
	/* ... whose first expiry woke a task (hrtimer_wakeup); id: pid, name: comm */
	MLTUNE_NOISE_TIMER_TASK,
	/* ... whose first expiry was the fair deadline server's timer; id: 0 */
	MLTUNE_NOISE_TIMER_DL_SERVER,
	/* softirq; id: its vector number */
	MLTUNE_NOISE_SOFTIRQ,
	/* a task switched in; id: pid, name: comm */
	MLTUNE_NOISE_TASK,
	/* Details: what ran inside the above (counts only, not interruptions). */
	/* every hrtimer expiry (but the deadline server's); id: function */
	MLTUNE_NOISE_HRTIMER,
	/* work item run by a kworker; id: function */
	MLTUNE_NOISE_WORK,
	/* timer wheel callback; id: function */
	MLTUNE_NOISE_TIMER_CB,
	/* expiry of the CPU's fair deadline server's timers (the replenishment
	 * timer also where it expires on another CPU); id: 0
	 */
	MLTUNE_NOISE_HRTIMER_DL_SERVER,
	/* NUMA balancing scan run by the CPU's task (task_numa_work); id: 0 */
	MLTUNE_NOISE_NUMA_SCAN,
};

/* struct mltune_noise_key.id for MLTUNE_NOISE_VECTOR */
enum mltune_noise_vec {
	MLTUNE_VEC_RESCHEDULE = 1,
	MLTUNE_VEC_CALL_FUNCTION,
	MLTUNE_VEC_CALL_FUNCTION_SINGLE,
	MLTUNE_VEC_IRQ_WORK,
	MLTUNE_VEC_TLB_SHOOTDOWN, /* detail: remote TLB flushes run by function-call IPIs */
	MLTUNE_VEC_THERMAL,
	MLTUNE_VEC_THRESHOLD,
	MLTUNE_VEC_DEFERRED_ERROR,
	MLTUNE_VEC_ERROR,
	MLTUNE_VEC_SPURIOUS,
	MLTUNE_VEC_PLATFORM_IPI,
};

struct mltune_noise_key {
	unsigned int cpu;
	unsigned int kind;
	unsigned long long id;
};

struct mltune_noise_val {
	unsigned long long count; /* occurrences (tasks: switch-ins) */
	unsigned long long ns;    /* time taken, nested interruptions excluded */
	unsigned long long bh_ns; /* softirqs run on this interruption's exit */
	unsigned long long cgid;  /* tasks: cgroup v2 id (the directory's inode) */
	unsigned int tgid;        /* tasks: process id */
	unsigned int flags;       /* tasks: PF_* (PF_KTHREAD) */
	char name[MLTUNE_NOISE_NAME_LEN];
};

struct mltune_noise_cfg {
	unsigned long long enabled;
	unsigned long long start_ns; /* CLOCK_MONOTONIC at enable */
	unsigned long long mask[MLTUNE_NOISE_MASK_WORDS];
};

struct mltune_noise_pcpu {
	/* totals, while enabled */
	unsigned long long switches; /* sched_switch events (idle included) */
	unsigned long long dropped;  /* events lost: counts map full */
	unsigned long long hard_ns;  /* hardirq and vector time */
	unsigned long long soft_ns;  /* softirq time */
	/* state */
	unsigned long long hard_ts;  /* entry of the hardirq/vector in progress */
	unsigned long long soft_ts;
	unsigned long long soft_hard_base;
	unsigned long long task_ts;  /* switch-in of the running task */
	unsigned long long task_hard_base;
	unsigned long long task_soft_base;
	unsigned long long task_cgid;
	unsigned long long timer_id; /* first hrtimer expiry of the local timer */
	struct mltune_noise_key hard_key; /* source in progress */
	struct mltune_noise_key bh_key;   /* last exited: softirqs on its exit */
	unsigned int task_pid;       /* running task (0: idle) */
	unsigned int task_tgid;
	unsigned int task_flags;
	unsigned int timer_kind;
	unsigned int in_hard;
	unsigned int bh_valid;
	unsigned int soft_vec;
	unsigned int pad;
	char task_comm[16];
	char timer_name[16];
};

#endif /* MLTUNE_NOISE_H */
