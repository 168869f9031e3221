/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The readable files of /sys/kernel/mltune (and the knob files the tests'
 * profiles name), and a snapshot of them to compare against after a write
 * that must have changed nothing: kept-open descriptors, one pread per file.
 * Used by the hostile-input and privilege kselftests.
 */
#ifndef MLTUNE_SNAPSHOT_H
#define MLTUNE_SNAPSHOT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile_util.h"
#include "../kselftest_harness.h"

#define MAX_FILES	256
#define MAX_READ	(64 * 1024)

struct file {
	char path[256];
	int fd;		/* kept open: a refused write costs one pread per file */
	char *data;
	ssize_t len;	/* -errno when the read failed */
};

struct snap {
	struct file f[MAX_FILES];
	int nr;
	bool irqs;	/* also every IRQ affinity (add_irq_files()) */
};

/*
 * The whole file through @fd, read afresh from offset 0 (sysfs shows anew).
 * kernfs hands out at most a page per read and procfs and seq_file fill what
 * was asked for, so a read shorter than both has reached the end: most
 * files take one pread, not two.
 */
static inline ssize_t read_fd(int fd, char *buf, size_t cap)
{
	ssize_t n = 0, len = 0;

	if (fd < 0)
		return -EBADF;
	while ((size_t)len < cap) {
		n = pread(fd, buf + len, cap - len, len);
		if (n <= 0)
			break;
		len += n;
		if (n < getpagesize() && (size_t)len < cap)
			break;
	}
	return n < 0 ? -errno : len;
}

/* Every regular file below @dir with a mode bit of @mask (paths only). */
static inline void walk(struct snap *s, const char *dir, mode_t mask)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	struct stat st;
	char p[512];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(s->f[0].path) || lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			walk(s, p, mask);
		} else if (S_ISREG(st.st_mode) && (st.st_mode & mask) &&
			   s->nr < MAX_FILES) {
			memcpy(s->f[s->nr].path, p, strlen(p) + 1);
			s->f[s->nr].data = NULL;
			s->nr++;
		}
	}
	closedir(d);
}

static inline void snap_free(struct snap *s)
{
	for (int i = 0; i < s->nr; i++) {
		free(s->f[i].data);
		if (s->f[i].fd >= 0)
			close(s->f[i].fd);
	}
	s->nr = 0;
}

/* Knob files the generated knob lists name: a switch must leave them exact. */
static const char *const knob_files[] = {
	"/proc/sys/vm/swappiness",
	"/sys/kernel/mm/transparent_hugepage/defrag",
	"/sys/class/net/lo/mtu",
};

static inline void add_knob_files(struct snap *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(knob_files); i++) {
		if (s->nr >= MAX_FILES || access(knob_files[i], R_OK))
			continue;
		snprintf(s->f[s->nr].path, sizeof(s->f[0].path), "%s", knob_files[i]);
		s->f[s->nr++].data = NULL;
	}
}

/*
 * The IRQ affinities the feeder cores change: the default and each IRQ's
 * smp_affinity_list, in /proc/irq order.
 */
static inline void add_irq_files(struct snap *s)
{
	struct dirent *e;
	DIR *d = opendir("/proc/irq");
	char p[sizeof(s->f[0].path) + 64];

	if (!d)
		return;
	if (s->nr < MAX_FILES) {
		snprintf(s->f[s->nr].path, sizeof(s->f[0].path), "/proc/irq/default_smp_affinity");
		s->f[s->nr++].data = NULL;
	}
	while ((e = readdir(d)) && s->nr < MAX_FILES) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		if (snprintf(p, sizeof(p), "/proc/irq/%s/smp_affinity_list", e->d_name) >=
		    (int)sizeof(s->f[0].path) || access(p, R_OK))
			continue;
		memcpy(s->f[s->nr].path, p, strlen(p) + 1);
		s->f[s->nr++].data = NULL;
	}
	closedir(d);
}

/*
 * A switch that ran and was rolled back is refused with the failing knob's
 * errno, yet it counts in generation and last_switch (the ABI): those two
 * may change then, nothing else.
 */
static inline bool switch_record(const char *path)
{
	return !strcmp(path, MLTUNE_SYSFS "/generation") ||
	       !strcmp(path, MLTUNE_SYSFS "/last_switch");
}

/* Read @f afresh into its saved contents. */
static inline void file_load(struct file *f)
{
	static char buf[MAX_READ];

	free(f->data);
	f->len = f->fd < 0 ? -EBADF : read_fd(f->fd, buf, sizeof(buf));
	f->data = malloc(f->len > 0 ? f->len : 1);
	if (f->len > 0)
		memcpy(f->data, buf, f->len);
}

/*
 * After an accepted write that cannot add or remove files: every file read
 * again through its kept descriptor (no walk, no open).
 */
static inline void snap_reload(struct snap *s)
{
	for (int i = 0; i < s->nr; i++)
		file_load(&s->f[i]);
}

static inline void snap_take(struct snap *s)
{
	snap_free(s);
	walk(s, MLTUNE_SYSFS, 0444);
	add_knob_files(s);
	if (s->irqs)
		add_irq_files(s);
	for (int i = 0; i < s->nr; i++)
		s->f[i].fd = open(s->f[i].path, O_RDONLY);
	snap_reload(s);
}

/* Whether the tree still has exactly the files of @s. */
static inline bool same_files(const struct snap *s)
{
	static struct snap now;

	now.nr = 0;
	walk(&now, MLTUNE_SYSFS, 0444);
	add_knob_files(&now);
	if (s->irqs)
		add_irq_files(&now);
	if (now.nr != s->nr)
		return false;
	for (int i = 0; i < s->nr; i++)
		if (strcmp(now.f[i].path, s->f[i].path))
			return false;
	return true;
}

/*
 * The first file that differs from @s, else NULL; with @set, also whether
 * files came or went (only a control write can do that); with @switched,
 * generation and last_switch are not compared.
 */
static inline const char *snap_changed_ex(const struct snap *s, bool set, bool switched)
{
	static char buf[MAX_READ];

	if (set && !same_files(s))
		return "the set of files";
	for (int i = 0; i < s->nr; i++) {
		const struct file *f = &s->f[i];
		ssize_t n;

		if (switched && switch_record(f->path))
			continue;
		n = read_fd(f->fd, buf, sizeof(buf));
		if (n != f->len || (n > 0 && memcmp(buf, f->data, n)))
			return f->path;
	}
	return NULL;
}

/* @len bytes of @b, C-escaped and cut at 160, into @out for a message. */
static inline const char *escaped(const char *b, ssize_t len, char *out, size_t cap)
{
	size_t o = 0;

	if (len < 0) {
		snprintf(out, cap, "(read failed: %s)", strerror((int)-len));
		return out;
	}
	for (ssize_t i = 0; i < len && o + 8 < cap; i++) {
		unsigned char c = b[i];

		if (i == 160) {
			o += snprintf(out + o, cap - o, "... (%zd bytes)", len);
			break;
		}
		if (c == '\\' || c == '"')
			o += snprintf(out + o, cap - o, "\\%c", c);
		else if (c == '\n')
			o += snprintf(out + o, cap - o, "\\n");
		else if (c < 0x20 || c >= 0x7f)
			o += snprintf(out + o, cap - o, "\\x%02x", c);
		else
			out[o++] = c;
	}
	out[o] = '\0';
	return out;
}

/* What @path held in @s and what it holds now, for a failure message. */
static inline void snap_print_change(const struct snap *s, const char *path)
{
	static char now[MAX_READ];
	char a[1024], b[1024];

	for (int i = 0; i < s->nr; i++) {
		const struct file *f = &s->f[i];

		if (strcmp(f->path, path))
			continue;
		ksft_print_msg("%s was \"%s\"\n", path,
			       escaped(f->data, f->len, a, sizeof(a)));
		ksft_print_msg("%s now \"%s\"\n", path,
			       escaped(now, read_fd(f->fd, now, sizeof(now)), b, sizeof(b)));
	}
}

static inline const char *snap_changed(const struct snap *s)
{
	return snap_changed_ex(s, true, false);
}

static inline void expect_unchanged(struct __test_metadata *_metadata, const struct snap *s)
{
	const char *changed = snap_changed(s);

	if (changed)
		ksft_print_msg("%s changed\n", changed);
	EXPECT_EQ(NULL, changed);
}

#endif /* MLTUNE_SNAPSHOT_H */
