/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between the mltune feeder sched_ext scheduler (BPF) and its loader.
 *
 * Maps pinned under MLTUNE_SCX_PIN_DIR:
 *   cfg    ARRAY[1] of struct mltune_feeder_cfg: feeder cgroup and CPU mask;
 *          rewritten by user space at runtime (no reload), gen bumped each time
 *   stats  PERCPU_ARRAY[1] of struct mltune_feeder_stats
 *   uei    ARRAY[1] of struct mltune_feeder_uei: filled by ops.exit()
 *   intruders LRU_HASH tid -> struct mltune_feeder_intruder: real-time and
 *          DEADLINE threads (which sched_ext does not schedule) seen starting
 *          on a feeder CPU; the feeder watcher moves them and deletes the entry
 *   link   the struct_ops link; unpinning it (feeder off) unloads the scheduler
 *   rtguard the sched_switch link that fills intruders
 */
#ifndef MLTUNE_FEEDER_H
#define MLTUNE_FEEDER_H

#define MLTUNE_SCX_PIN_DIR "/sys/fs/bpf/mltune"
#define MLTUNE_SCX_NAME "mltune_feeder"
#define MLTUNE_FEEDER_MAX_CPUS 1024
#define MLTUNE_FEEDER_MASK_WORDS (MLTUNE_FEEDER_MAX_CPUS / 64)
#define MLTUNE_FEEDER_MAX_LEVEL 32
#define MLTUNE_FEEDER_MAX_INTRUDERS 1024

struct mltune_feeder_cfg {
	unsigned long long cgid;   /* feeder cgroup id (cgroup2 inode number) */
	unsigned int level;        /* its depth below the root (root = 0) */
	unsigned int inject_error; /* != 0: the scheduler reports an error (tests) */
	unsigned long long gen;    /* bumped by every update */
	unsigned long long mask[MLTUNE_FEEDER_MASK_WORDS]; /* feeder CPUs */
};

struct mltune_feeder_stats {
	unsigned long long foreign;   /* non-feeder task started on a feeder CPU */
	unsigned long long stray;     /* feeder task started on a non-feeder CPU */
	unsigned long long forced;    /* placed against the policy: affinity left no choice */
	unsigned long long feeder_enq;
	unsigned long long normal_enq;
	unsigned long long kthread_enq;
	unsigned long long preempted; /* tick found a task on the wrong kind of CPU */
	/* a non-feeder SCHED_FIFO/RR thread switched in on a feeder CPU */
	unsigned long long rt_foreign;
	unsigned long long dl_foreign; /* the same for SCHED_DEADLINE */
};

struct mltune_feeder_intruder {
	unsigned int cpu;         /* the feeder CPU it last started on */
	unsigned int policy;      /* SCHED_FIFO 1, SCHED_RR 2, SCHED_DEADLINE 6 */
	unsigned long long count; /* starts on feeder CPUs since recorded */
	char comm[16];
};

struct mltune_feeder_uei {
	int kind;                 /* enum scx_exit_kind, 0 while attached */
	int pad;
	long long exit_code;
	char reason[128];
	char msg[256];
};

#endif /* MLTUNE_FEEDER_H */
