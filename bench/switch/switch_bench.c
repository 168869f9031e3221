// SPDX-License-Identifier: GPL-2.0
/*
 * switch_bench: cost of a full training <-> inference switch, three ways,
 * side by side in one run (in the guest; it changes kernel settings):
 *
 *   kernel   echo NAME > /sys/kernel/mltune/profile; duration_ns from
 *            last_switch (in-kernel: open, capture, write every knob) and
 *            the wall time of the write(2) itself
 *   c-loop   open(2) + write(2) + close(2) of every knob of the profile
 *            from user space (no capture, no rollback)
 *   shell    one "sh -c 'echo V > PATH; ...'" per switch
 *
 *   switch_bench [SWITCHES]     default 200 per method
 *
 * Prints the median per switch of each method and the ratios to the C
 * loop; restores the baseline at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MLTUNE "/sys/kernel/mltune"
#define MAXK 256

struct knob {
	char path[256];
	char value[4098];	/* with '\n' */
	size_t len;
};

static struct knob knobs[2][MAXK];
static int nknobs[2];
static const char *const names[2] = { "training", "inference" };
static char *script[2];

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static ssize_t read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n, t = 0;

	if (fd < 0)
		return -1;
	while ((n = read(fd, buf + t, len - 1 - t)) > 0)
		t += n;
	close(fd);
	buf[t] = '\0';
	return t;
}

static int write_file(const char *path, const char *s, size_t len)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -errno;
}

static void load(int p)
{
	static char text[65536];
	char path[128], *s, *e, *sp;
	size_t sl = 0, cap = 1 << 16;

	snprintf(path, sizeof(path), MLTUNE "/profiles/%s/knobs", names[p]);
	if (read_file(path, text, sizeof(text)) <= 0) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	script[p] = malloc(cap);
	script[p][0] = '\0';
	for (s = text; *s; s = *e ? e + 1 : e) {
		struct knob *k = &knobs[p][nknobs[p]];
		int opt = 0;
		char *f;

		e = strchrnul(s, '\n');
		sp = memchr(s, ' ', e - s);
		if (!sp || nknobs[p] == MAXK)
			continue;
		/* Flags before the path: '?' optional, '>' '<' bounds. */
		for (f = s; *f == '?' || *f == '>' || *f == '<'; f++)
			opt |= *f == '?';
		snprintf(k->path, sizeof(k->path), "%.*s", (int)(sp - f), f);
		k->len = snprintf(k->value, sizeof(k->value), "%.*s\n",
				  (int)(e - sp - 1), sp + 1);
		sl += snprintf(script[p] + sl, cap - sl, "echo '%.*s' > %s%s\n",
			       (int)(e - sp - 1), sp + 1, k->path,
			       opt ? " 2>/dev/null" : "");
		nknobs[p]++;
	}
}

static long long last_duration(void)
{
	char buf[4096], *d;

	if (read_file(MLTUNE "/last_switch", buf, sizeof(buf)) <= 0)
		return -1;
	d = strstr(buf, "duration_ns=");
	return d ? atoll(d + 12) : -1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200, i, j, p, fails = 0;
	double *kin, *kwall, *cl, *sh, t;
	double m_kin, m_kwall, m_cl, m_sh;

	if (access(MLTUNE "/profile", W_OK)) {
		fprintf(stderr, "mltune module not loaded\n");
		return 4;
	}
	if (n < 2)
		n = 2;
	kin = calloc(n, sizeof(double));
	kwall = calloc(n, sizeof(double));
	cl = calloc(n, sizeof(double));
	sh = calloc(n, sizeof(double));
	load(0);
	load(1);

	/* Warm up every path once. */
	for (p = 0; p < 2; p++)
		write_file(MLTUNE "/profile", names[p], strlen(names[p]));

	for (i = 0; i < n; i++) {
		p = i % 2;
		t = now_ns();
		if (write_file(MLTUNE "/profile", names[p], strlen(names[p])))
			fails++;
		kwall[i] = now_ns() - t;
		kin[i] = last_duration();
	}
	for (i = 0; i < n; i++) {
		p = i % 2;
		t = now_ns();
		for (j = 0; j < nknobs[p]; j++)
			write_file(knobs[p][j].path, knobs[p][j].value,
				   knobs[p][j].len);
		cl[i] = now_ns() - t;
	}
	for (i = 0; i < n; i++) {
		pid_t pid;
		int st;

		p = i % 2;
		t = now_ns();
		pid = fork();
		if (pid == 0) {
			execl("/bin/sh", "sh", "-c", script[p], (char *)NULL);
			_exit(127);
		}
		waitpid(pid, &st, 0);
		sh[i] = now_ns() - t;
	}
	write_file(MLTUNE "/profile", "baseline", 8);

	m_kin = median(kin, n);
	m_kwall = median(kwall, n);
	m_cl = median(cl, n);
	m_sh = median(sh, n);
	printf("switch_bench: %d switches per method, %d/%d knobs, %d failed\n",
	       n, nknobs[0], nknobs[1], fails);
	printf("%-28s %12s %8s\n", "method", "median us", "vs c-loop");
	printf("%-28s %12.1f %8.2f\n", "kernel (last_switch)", m_kin / 1e3,
	       m_kin / m_cl);
	printf("%-28s %12.1f %8.2f\n", "kernel (write(2) wall)", m_kwall / 1e3,
	       m_kwall / m_cl);
	printf("%-28s %12.1f %8.2f\n", "c-loop open+write+close", m_cl / 1e3,
	       1.0);
	printf("%-28s %12.1f %8.2f\n", "shell echo loop", m_sh / 1e3,
	       m_sh / m_cl);
	printf("target: kernel within 1.5x of the c-loop: %s\n",
	       m_kin <= 1.5 * m_cl ? "met" : "NOT met");
	printf("target: write(2) wall within 1.5x of the in-kernel time: %.2fx, %s\n",
	       m_kwall / m_kin, m_kwall <= 1.5 * m_kin ? "met" : "NOT met");
	return fails ? 1 : 0;
}
