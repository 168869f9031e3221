/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared between the drift watcher BPF programs (mltune_drift.bpf.c) and
 * their loader (mltune_drift.c, used by userspace/lib/src/drift/).
 *
 * The watcher records the last successful writer of every file it sees
 * written through sysctl (procfs /proc/sys), kernfs (sysfs and cgroup2:
 * cpusets) and /proc/irq/N/smp_affinity(_list), and the last successful
 * sched_setattr/sched_setscheduler/sched_setparam/sched_setaffinity call on
 * each thread.  It outlives its loader: maps and links are pinned under
 * MLTUNE_DRIFT_PIN_DIR, and nothing needs to run in user space meanwhile.
 *   cfg     ARRAY[1] of struct mltune_drift_cfg
 *   writes  LRU_HASH struct mltune_drift_key -> struct mltune_drift_rec
 *   pending HASH pid_tgid -> struct mltune_drift_pending (between the entry
 *           and the successful return of a write; internal)
 *   link_*  one link per program; unpinning them all stops the watcher
 */
#ifndef MLTUNE_DRIFT_H
#define MLTUNE_DRIFT_H

#define MLTUNE_DRIFT_PIN_DIR "/sys/fs/bpf/mltune-drift"
#define MLTUNE_DRIFT_MAX_ENTRIES 4096
#define MLTUNE_DRIFT_DEPTH 8     /* path components recorded, leaf first */
#define MLTUNE_DRIFT_NAME_LEN 32
#define MLTUNE_DRIFT_VALUE_LEN 64

enum mltune_drift_kind {
	MLTUNE_DRIFT_FILE = 1,  /* key: s_dev, i_ino of the file written */
	MLTUNE_DRIFT_SCHED = 2, /* key: 0, thread id of the target */
};

/* struct mltune_drift_rec.flags */
#define MLTUNE_DRIFT_F_OLD 1       /* old_value is valid */
#define MLTUNE_DRIFT_F_KERNEL 2    /* written by kernel_write() (no user buffer) */
#define MLTUNE_DRIFT_F_DEEP 4      /* the path had more than MLTUNE_DRIFT_DEPTH parts */
#define MLTUNE_DRIFT_F_TRUNC 8     /* new_value was longer than recorded */

/* struct mltune_drift_rec.op */
enum mltune_drift_op {
	MLTUNE_DRIFT_OP_SYSCTL = 1,
	MLTUNE_DRIFT_OP_KERNFS,
	MLTUNE_DRIFT_OP_IRQ_AFFINITY,
	MLTUNE_DRIFT_OP_SETATTR,
	MLTUNE_DRIFT_OP_SETSCHEDULER,
	MLTUNE_DRIFT_OP_SETPARAM,
	MLTUNE_DRIFT_OP_SETAFFINITY,
};

struct mltune_drift_key {
	unsigned int kind;
	unsigned int dev;
	unsigned long long ino;
};

struct mltune_drift_rec {
	unsigned long long boot_ns; /* CLOCK_BOOTTIME of the write */
	unsigned long long seq;     /* order of the writes */
	unsigned long long cgid;    /* writer's cgroup v2 id */
	unsigned int pid;           /* writer's thread id */
	unsigned int tgid;          /* writer's process id */
	unsigned int op;            /* enum mltune_drift_op */
	unsigned int flags;         /* MLTUNE_DRIFT_F_* */
	unsigned int magic;         /* file system magic (procfs, sysfs, cgroup2) */
	unsigned int depth;         /* path components in path[] */
	unsigned int target;        /* sched ops: thread id acted on */
	int policy;                 /* sched ops: policy set (-1: unchanged) */
	char comm[16];
	char path[MLTUNE_DRIFT_DEPTH][MLTUNE_DRIFT_NAME_LEN];
	char new_value[MLTUNE_DRIFT_VALUE_LEN];
	char old_value[MLTUNE_DRIFT_VALUE_LEN];
};

struct mltune_drift_pending {
	struct mltune_drift_key key;
	struct mltune_drift_rec rec;
};

struct mltune_drift_cfg {
	unsigned long long seq; /* last write's sequence number */
};

#endif /* MLTUNE_DRIFT_H */
