/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers for the profile kselftests (profile_*_test.c). */
#ifndef MLTUNE_PROFILE_UTIL_H
#define MLTUNE_PROFILE_UTIL_H

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mltune_test.h"

#define PROFILE_FILE	MLTUNE_SYSFS "/profile"
#define GENERATION_FILE	MLTUNE_SYSFS "/generation"
#define LAST_FILE	MLTUNE_SYSFS "/last_switch"
#define BASELINE_FILE	MLTUNE_SYSFS "/baseline"
#define CONTROL_FILE	MLTUNE_SYSFS "/profiles/control"

#define KNOB_PATH_MAX	256
#define KNOB_VALUE_MAX	4096
#define MAX_TEST_KNOBS	256

struct knob {
	char path[KNOB_PATH_MAX];
	char value[KNOB_VALUE_MAX + 1];
	bool optional;
	char cmp;	/* '=' exact, '>' at least, '<' at most */
};

/* Read a file of any size into a malloc'd string; NULL on error. */
static inline char *slurp(const char *path)
{
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0 || !buf) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 4097) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				break;
		}
	}
	close(fd);
	if (!buf || n < 0) {
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/*
 * Normalize a knob value as the module does: whitespace runs to one
 * space, ends trimmed; for /sys, "a [b] c" becomes "b".
 */
static inline void normalize(char *s, bool selector)
{
	char *o = s, *i = s, *l, *r;
	bool space = false;

	for (; *i; i++) {
		if (isspace((unsigned char)*i)) {
			space = o != s;
			continue;
		}
		if (space)
			*o++ = ' ';
		space = false;
		*o++ = *i;
	}
	*o = '\0';
	if (!selector)
		return;
	l = strchr(s, '[');
	r = l ? strchr(l, ']') : NULL;
	if (!r || strchr(l + 1, '[') || strchr(r, '['))
		return;
	memmove(s, l + 1, r - l - 1);
	s[r - l - 1] = '\0';
}

/* Current value of a knob, normalized; -errno on error. */
static inline int knob_read(const char *path, char *buf, size_t len)
{
	ssize_t n = mltune_read_file(path, buf, len);

	if (n < 0)
		return n;
	normalize(buf, !strncmp(path, "/sys/", 5));
	return 0;
}

/* Parse "[FLAGS]PATH VALUE" lines; returns the number of knobs. */
static inline int parse_knobs(const char *text, struct knob *k, int max)
{
	int nr = 0;

	while (*text && nr < max) {
		const char *le = strchrnul(text, '\n');
		const char *sp = memchr(text, ' ', le - text);

		if (sp && *text != '#') {
			const char *p = text;

			k[nr].optional = false;
			k[nr].cmp = '=';
			for (; *p == '?' || *p == '>' || *p == '<'; p++) {
				if (*p == '?')
					k[nr].optional = true;
				else
					k[nr].cmp = *p;
			}
			snprintf(k[nr].path, sizeof(k[nr].path), "%.*s",
				 (int)(sp - p), p);
			snprintf(k[nr].value, sizeof(k[nr].value), "%.*s",
				 (int)(le - sp - 1), sp + 1);
			nr++;
		}
		text = *le ? le + 1 : le;
	}
	return nr;
}

/* Knobs of a committed profile; returns the number or -errno. */
static inline int profile_knobs(const char *name, struct knob *k, int max)
{
	char path[128];
	char *text;
	int nr;

	snprintf(path, sizeof(path), MLTUNE_SYSFS "/profiles/%s/knobs", name);
	text = slurp(path);
	if (!text)
		return -errno;
	nr = parse_knobs(text, k, max);
	free(text);
	return nr;
}

/* Create (or replace) profile @name with knob list @text and commit it. */
static inline int define_profile(const char *name, const char *text)
{
	char path[128], cmd[64];
	int err;

	snprintf(cmd, sizeof(cmd), "+%s", name);
	err = mltune_write_file(CONTROL_FILE, cmd);
	if (err && err != -EEXIST)
		return err;
	snprintf(path, sizeof(path), MLTUNE_SYSFS "/profiles/%s/knobs", name);
	err = mltune_write_file(path, text);
	if (err)
		return err;
	snprintf(path, sizeof(path), MLTUNE_SYSFS "/profiles/%s/state", name);
	return mltune_write_file(path, "commit");
}

static inline int remove_profile(const char *name)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "-%s", name);
	return mltune_write_file(CONTROL_FILE, cmd);
}

static inline int switch_to(const char *name)
{
	return mltune_write_file(PROFILE_FILE, name);
}

static inline long long read_generation(void)
{
	char buf[64];

	if (mltune_read_file(GENERATION_FILE, buf, sizeof(buf)) <= 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

static inline void read_active(char *buf, size_t len)
{
	if (mltune_read_file(PROFILE_FILE, buf, len) <= 0)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* Whether decimal @cur is at least ('>') or at most ('<') decimal @bound. */
static inline bool bound_holds(const char *cur, char cmp, const char *bound)
{
	char *e1, *e2;
	long long c = strtoll(cur, &e1, 10), b = strtoll(bound, &e2, 10);

	if (*e1 || *e2 || e1 == cur || e2 == bound)
		return false;
	return cmp == '>' ? c >= b : c <= b;
}

/* Knobs of k[0..nr) whose current value does not satisfy the list. */
static inline int count_mismatches(const struct knob *k, int nr, bool verbose)
{
	char cur[KNOB_VALUE_MAX + 2], want[KNOB_VALUE_MAX + 1];
	int i, bad = 0;

	for (i = 0; i < nr; i++) {
		if (knob_read(k[i].path, cur, sizeof(cur))) {
			if (!k[i].optional) {
				bad++;
				if (verbose)
					ksft_print_msg("%s: unreadable\n",
						       k[i].path);
			}
			continue;
		}
		snprintf(want, sizeof(want), "%.4096s", k[i].value);
		normalize(want, false);
		if (k[i].cmp != '=' ? !bound_holds(cur, k[i].cmp, want) :
		    strcmp(cur, want) != 0) {
			bad++;
			if (verbose)
				ksft_print_msg("%s is '%s', want '%s'\n",
					       k[i].path, cur, want);
		}
	}
	return bad;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The /proc/meminfo line @field ("Slab", "VmallocUsed") in kB; -1 on error. */
static inline long meminfo_kb(const char *field)
{
	char *mi = slurp("/proc/meminfo"), key[64];
	char *s;
	long kb = -1;

	snprintf(key, sizeof(key), "\n%s:", field);
	s = mi ? strstr(mi, key) : NULL;
	if (s)
		kb = strtol(s + strlen(key), NULL, 10);
	free(mi);
	return kb;
}

/*
 * Whether a /proc/vmallocinfo caller allocates kernel thread stacks
 * (CONFIG_VMAP_STACK): kworkers and helper threads come and go with the
 * load, and up to two freed stacks per CPU stay cached, so their pages
 * measure the machine, not the module under test.
 */
static inline bool vmalloc_stack_caller(const char *caller)
{
	static const char *const stack[] = {
		"alloc_thread_stack_node", "dup_task_struct", "copy_process",
		"kernel_clone", "fork_idle", "create_io_thread",
	};
	size_t i, n;

	for (i = 0; i < sizeof(stack) / sizeof(stack[0]); i++) {
		n = strlen(stack[i]);
		if (!strncmp(caller, stack[i], n) && caller[n] == '+')
			return true;
	}
	return false;
}

/*
 * vmalloc memory in kB from /proc/vmallocinfo (root: callers by symbol),
 * kernel thread stacks left out: the module's text and data, what its code
 * vmallocs (an area it leaks keeps a raw address as its caller once the
 * module is gone) and everything else but stacks. With @report, each area
 * counted is printed (caller and kB) for a failure's diagnosis. -1 on error.
 */
static inline long vmalloc_kb_no_stacks(bool report)
{
	char *info = slurp("/proc/vmallocinfo"), *line, *save = NULL;
	long kb = 0;

	if (!info)
		return -1;
	for (line = strtok_r(info, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *pages = strstr(line, " pages=");
		char range[64], caller[128];
		long size, area_kb;

		if (!pages || !strstr(line, " vmalloc") ||
		    sscanf(line, "%63s %ld %127s", range, &size, caller) != 3 ||
		    vmalloc_stack_caller(caller))
			continue;
		area_kb = strtol(pages + 7, NULL, 10) * (getpagesize() / 1024);
		kb += area_kb;
		if (report)
			ksft_print_msg("  vmalloc %ld kB by %s\n", area_kb, caller);
	}
	free(info);
	return kb;
}

/* Slab in /proc/meminfo in kB after dropping caches; -1 on error. */
static inline long slab_kb(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		sync();
		mltune_write_file("/proc/sys/vm/drop_caches", "3");
	}
	return meminfo_kb("Slab");
}

#endif /* MLTUNE_PROFILE_UTIL_H */
