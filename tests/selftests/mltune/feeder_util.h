/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the feeder kselftests (feeder_*_test.c): CPU sets, and
 * snapshots of every IRQ's affinity and of the default IRQ affinity.
 */
#ifndef MLTUNE_FEEDER_UTIL_H
#define MLTUNE_FEEDER_UTIL_H

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "mltune_test.h"

#define FEEDER_FILE	MLTUNE_SYSFS "/feeder/cpus"
#define INJECT_FILE	"/sys/module/mltune/parameters/feeder_inject_fault"
#define DEFAULT_FILE	"/proc/irq/default_smp_affinity"
#define CPU_DIR		"/sys/devices/system/cpu"

#define MAX_CPUS	1024
#define MAX_IRQS	4096
#define LIST_MAX	512

/* A set of CPU numbers. */
struct cpus {
	unsigned long long w[MAX_CPUS / 64];
};

static inline void cpus_set(struct cpus *s, int cpu)
{
	s->w[cpu / 64] |= 1ULL << (cpu % 64);
}

static inline bool cpus_has(const struct cpus *s, int cpu)
{
	return s->w[cpu / 64] >> (cpu % 64) & 1;
}

static inline bool cpus_empty(const struct cpus *s)
{
	size_t i;

	for (i = 0; i < MAX_CPUS / 64; i++)
		if (s->w[i])
			return false;
	return true;
}

static inline bool cpus_equal(const struct cpus *a, const struct cpus *b)
{
	return !memcmp(a, b, sizeof(*a));
}

static inline bool cpus_intersects(const struct cpus *a, const struct cpus *b)
{
	size_t i;

	for (i = 0; i < MAX_CPUS / 64; i++)
		if (a->w[i] & b->w[i])
			return true;
	return false;
}

static inline struct cpus cpus_andnot(const struct cpus *a,
				      const struct cpus *b)
{
	struct cpus r;
	size_t i;

	for (i = 0; i < MAX_CPUS / 64; i++)
		r.w[i] = a->w[i] & ~b->w[i];
	return r;
}

static inline struct cpus cpus_or(const struct cpus *a, const struct cpus *b)
{
	struct cpus r;
	size_t i;

	for (i = 0; i < MAX_CPUS / 64; i++)
		r.w[i] = a->w[i] | b->w[i];
	return r;
}

static inline int cpus_count(const struct cpus *s)
{
	int cpu, n = 0;

	for (cpu = 0; cpu < MAX_CPUS; cpu++)
		n += cpus_has(s, cpu);
	return n;
}

/* The @i-th CPU of @s (from 0), or -1. */
static inline int cpus_nth(const struct cpus *s, int i)
{
	int cpu;

	for (cpu = 0; cpu < MAX_CPUS; cpu++)
		if (cpus_has(s, cpu) && i-- == 0)
			return cpu;
	return -1;
}

/* "0-2,5" (trailing whitespace allowed; "" is empty); 0 or -1. */
static inline int cpus_parse_list(const char *str, struct cpus *s)
{
	const char *p = str;

	memset(s, 0, sizeof(*s));
	while (*p && !isspace((unsigned char)*p)) {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p || a < 0 || a >= MAX_CPUS)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b >= MAX_CPUS)
				return -1;
			p = end;
		}
		for (; a <= b; a++)
			cpus_set(s, a);
		if (*p == ',')
			p++;
		else if (*p && !isspace((unsigned char)*p))
			return -1;
	}
	return 0;
}

/* A hex mask as in /proc/irq/default_smp_affinity ("ff", "00000000,0000000f"). */
static inline int cpus_parse_hex(const char *str, struct cpus *s)
{
	int len = strcspn(str, " \t\n"), cpu = 0;

	memset(s, 0, sizeof(*s));
	while (len-- > 0) {
		char c = str[len];
		int v, bit;

		if (c == ',')
			continue;
		if (!isxdigit((unsigned char)c))
			return -1;
		v = isdigit((unsigned char)c) ? c - '0' :
						 tolower((unsigned char)c) - 'a' + 10;
		for (bit = 0; bit < 4; bit++, cpu++)
			if (v >> bit & 1) {
				if (cpu >= MAX_CPUS)
					return -1;
				cpus_set(s, cpu);
			}
	}
	return 0;
}

static inline void cpus_format(const struct cpus *s, char *buf, size_t len)
{
	size_t o = 0;
	int cpu = 0;

	buf[0] = '\0';
	while (cpu < MAX_CPUS) {
		int last;

		if (!cpus_has(s, cpu)) {
			cpu++;
			continue;
		}
		for (last = cpu; last + 1 < MAX_CPUS && cpus_has(s, last + 1);)
			last++;
		if (o < len)
			o += snprintf(buf + o, len - o, "%s%d", o ? "," : "",
				      cpu);
		if (last > cpu && o < len)
			o += snprintf(buf + o, len - o, "-%d", last);
		cpu = last + 1;
	}
}

/* A cpulist file of /sys/devices/system/cpu; empty when missing or "(null)". */
static inline struct cpus cpus_of(const char *file)
{
	char path[128], buf[LIST_MAX];
	struct cpus s = {};

	snprintf(path, sizeof(path), CPU_DIR "/%s", file);
	if (mltune_read_file(path, buf, sizeof(buf)) > 0 &&
	    cpus_parse_list(buf, &s))
		memset(&s, 0, sizeof(s));
	return s;
}

/* Housekeeping CPUs as the module counts them, for feeder set @f. */
static inline struct cpus housekeeping(const struct cpus *f)
{
	struct cpus online = cpus_of("online");
	struct cpus iso = cpus_of("isolated"), nohz = cpus_of("nohz_full");
	struct cpus boot = cpus_or(&iso, &nohz);
	struct cpus hk = cpus_andnot(&online, &boot);

	return cpus_andnot(&hk, f);
}

/* One IRQ's state as /proc/irq/N shows it. */
struct irq_snap {
	int irq;
	bool movable;		/* writing its own affinity back works */
	bool msi;		/* an MSI IRQ (for the log) */
	char aff[LIST_MAX];	/* smp_affinity_list */
};

struct snap {
	int nr;
	char def[LIST_MAX];	/* default_smp_affinity */
	struct irq_snap irqs[MAX_IRQS];
};

/* Read a one-line file without its newline; 0 or -errno. */
static inline int read_line(const char *path, char *buf, size_t len)
{
	ssize_t n = mltune_read_file(path, buf, len);

	if (n < 0)
		return n;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static inline int irq_read(int irq, const char *file, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/irq/%d/%s", irq, file);
	return read_line(path, buf, len);
}

/* Mark MSI IRQs from /proc/interrupts (the chip name contains "MSI"). */
static inline void snap_mark_msi(struct snap *s)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[4096];
	int i;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *end;
		long irq = strtol(line, &end, 10);

		if (end == line || *end != ':' || !strstr(line, "MSI"))
			continue;
		for (i = 0; i < s->nr; i++)
			if (s->irqs[i].irq == irq)
				s->irqs[i].msi = true;
	}
	fclose(f);
}

/* Interrupt counts (all CPUs) per IRQ number below MAX_IRQS. */
struct counts {
	unsigned long long n[MAX_IRQS];
};

static inline void counts_take(struct counts *c)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[4096];

	memset(c, 0, sizeof(*c));
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p, *end;
		long irq = strtol(line, &end, 10);

		if (end == line || *end != ':' || irq < 0 || irq >= MAX_IRQS)
			continue;
		for (p = end + 1;; p = end) {
			unsigned long long v = strtoull(p, &end, 10);

			if (end == p)
				break;
			c->n[irq] += v;
		}
	}
	fclose(f);
}

/* Counts right after the last successful feeder write (feeder_write()). */
static struct counts counts_at_write;

static int snap_cmp_irq(const void *a, const void *b)
{
	return ((const struct irq_snap *)a)->irq -
	       ((const struct irq_snap *)b)->irq;
}

/*
 * Snapshot every IRQ's smp_affinity_list and the default affinity. With
 * @probe, find out which IRQs are movable by writing each IRQ's own
 * affinity back (EIO: not movable); this may move the effective CPU
 * within the same mask, nothing else. 0 or -errno.
 */
static inline int snap_take(struct snap *s, bool probe)
{
	DIR *d = opendir("/proc/irq");
	struct dirent *de;
	int err;

	if (!d)
		return -errno;
	s->nr = 0;
	while ((de = readdir(d)) && s->nr < MAX_IRQS) {
		struct irq_snap *q = &s->irqs[s->nr];
		char path[64];
		char *end;
		long irq = strtol(de->d_name, &end, 10);

		if (end == de->d_name || *end)
			continue;
		q->irq = irq;
		if (irq_read(irq, "smp_affinity_list", q->aff, sizeof(q->aff)))
			continue;
		q->movable = false;
		q->msi = false;
		if (probe) {
			snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list",
				 q->irq);
			q->movable = !mltune_write_file(path, q->aff);
		}
		s->nr++;
	}
	closedir(d);
	qsort(s->irqs, s->nr, sizeof(s->irqs[0]), snap_cmp_irq);
	snap_mark_msi(s);
	err = read_line(DEFAULT_FILE, s->def, sizeof(s->def));
	return err;
}

/*
 * Compare the current affinities with @s: 0 when every IRQ of @s (still
 * present) and the default read the same, else the number of differences
 * (each logged).
 */
static inline int snap_diff(const struct snap *s)
{
	char buf[LIST_MAX];
	int i, bad = 0;

	for (i = 0; i < s->nr; i++) {
		const struct irq_snap *q = &s->irqs[i];

		if (irq_read(q->irq, "smp_affinity_list", buf, sizeof(buf)))
			continue;
		if (strcmp(buf, q->aff)) {
			ksft_print_msg("IRQ %d: affinity %.64s, was %.64s\n",
				       q->irq, buf, q->aff);
			bad++;
		}
	}
	if (read_line(DEFAULT_FILE, buf, sizeof(buf)) || strcmp(buf, s->def)) {
		ksft_print_msg("default_smp_affinity %.64s, was %.64s\n", buf,
			       s->def);
		bad++;
	}
	return bad;
}

/*
 * Check that feeder set @f is in force over the state @orig had before:
 * every movable IRQ's affinity is its old one minus @f (the housekeeping
 * CPUs when that leaves no online CPU), other IRQs are unchanged, the
 * default likewise, and no movable IRQ that fired since the write has its
 * effective affinity on a feeder CPU. Returns the number of differences
 * (each logged).
 */
static inline int snap_check_steered(const struct snap *orig,
				     const struct cpus *f)
{
	struct cpus online = cpus_of("online"), hk = housekeeping(f);
	char buf[LIST_MAX], want_s[LIST_MAX], got_s[LIST_MAX];
	static struct counts now;
	struct cpus was, got, want;
	int i, bad = 0;

	counts_take(&now);
	for (i = 0; i < orig->nr; i++) {
		const struct irq_snap *q = &orig->irqs[i];

		if (irq_read(q->irq, "smp_affinity_list", buf, sizeof(buf)))
			continue;
		if (cpus_parse_list(q->aff, &was) || cpus_parse_list(buf, &got)) {
			ksft_print_msg("IRQ %d: cannot parse %.64s / %.64s\n",
				       q->irq, q->aff, buf);
			bad++;
			continue;
		}
		want = was;
		if (q->movable) {
			want = cpus_andnot(&was, f);
			if (!cpus_intersects(&want, &online))
				want = hk;
		}
		if (!cpus_equal(&want, &got)) {
			cpus_format(&want, want_s, sizeof(want_s));
			cpus_format(&got, got_s, sizeof(got_s));
			ksft_print_msg("IRQ %d%s: affinity %s, want %s (was %s)\n",
				       q->irq, q->movable ? "" : " (not movable)",
				       got_s, want_s, q->aff);
			bad++;
		}
		if (!q->movable ||
		    irq_read(q->irq, "effective_affinity_list", buf, sizeof(buf)) ||
		    cpus_parse_list(buf, &got) || !cpus_intersects(&got, f))
			continue;
		cpus_format(&got, got_s, sizeof(got_s));
		/*
		 * Where the chip cannot move an IRQ at once (x86 without
		 * interrupt remapping while an earlier move waits for an
		 * interrupt, or an IO-APIC line), the move happens at its
		 * next interrupt. Once it fired twice since the write, the
		 * effective affinity must be off the feeder CPUs.
		 */
		if (q->irq < MAX_IRQS &&
		    now.n[q->irq] >= counts_at_write.n[q->irq] + 2) {
			ksft_print_msg("IRQ %d%s: effective affinity %s on a feeder CPU after %llu interrupts\n",
				       q->irq, q->msi ? " (MSI)" : "", got_s,
				       now.n[q->irq] - counts_at_write.n[q->irq]);
			bad++;
		} else {
			ksft_print_msg("IRQ %d%s: effective affinity %s, move pending until its next interrupt\n",
				       q->irq, q->msi ? " (MSI)" : "", got_s);
		}
	}
	if (cpus_parse_hex(orig->def, &was) ||
	    read_line(DEFAULT_FILE, buf, sizeof(buf)) ||
	    cpus_parse_hex(buf, &got)) {
		ksft_print_msg("cannot read default_smp_affinity\n");
		return bad + 1;
	}
	want = cpus_andnot(&was, f);
	if (!cpus_intersects(&want, &online))
		want = hk;
	if (!cpus_equal(&want, &got)) {
		cpus_format(&want, want_s, sizeof(want_s));
		cpus_format(&got, got_s, sizeof(got_s));
		ksft_print_msg("default affinity %s, want %s\n", got_s, want_s);
		bad++;
	}
	return bad;
}

/* One write(2) of @len bytes; 0 or -errno. */
static inline int feeder_write_len(const char *buf, size_t len)
{
	return mltune_write_len(FEEDER_FILE, buf, len);
}

static inline int feeder_write(const char *list)
{
	int ret = feeder_write_len(list, strlen(list));

	if (!ret)
		counts_take(&counts_at_write);
	return ret;
}

/* The feeder file's content without the newline; -errno on error. */
static inline int feeder_read(char *buf, size_t len)
{
	return read_line(FEEDER_FILE, buf, len);
}

#endif /* MLTUNE_FEEDER_UTIL_H */
