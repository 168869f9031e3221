// SPDX-License-Identifier: GPL-2.0
/* Loaders of the noise and drift programs; see mltune_observe.h. */
#include "mltune_observe.h"
#include "mltune_loader.h"
#include "mltune_noise.skel.h"
#include "mltune_drift.skel.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void add_missing(char *missing, size_t len, const char *name)
{
	size_t used;

	if (!missing || !len)
		return;
	used = strlen(missing);
	snprintf(missing + used, len - used, "%s%s", used ? " " : "", name);
}

/*
 * Whether the attach point of a tp_btf/fentry/fexit program exists in the
 * running kernel's BTF (other program types: assumed present).
 */
static int target_exists(const struct btf *vmlinux, const struct bpf_program *prog)
{
	const char *sec = bpf_program__section_name(prog);
	const char *name = strchr(sec, '/');
	char buf[128];

	if (!vmlinux || !name)
		return 1;
	name++;
	if (!strncmp(sec, "tp_btf/", 7)) {
		snprintf(buf, sizeof(buf), "btf_trace_%s", name);
		return btf__find_by_name_kind(vmlinux, buf, BTF_KIND_TYPEDEF) > 0;
	}
	if (!strncmp(sec, "fentry/", 7) || !strncmp(sec, "fexit/", 6))
		return btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) > 0;
	return 1;
}

static int is_required(const char *name, const char *const *required)
{
	for (; *required; required++)
		if (!strcmp(name, *required))
			return 1;
	return 0;
}

/* Leaves out programs without an attach point; fails if a required one is. */
static int prune(struct bpf_object *obj, const char *const *required,
		 char *missing, size_t missing_len, char *err, size_t errlen)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	struct bpf_program *prog;
	int ret = 0;

	if (missing && missing_len)
		missing[0] = '\0';
	bpf_object__for_each_program(prog, obj) {
		const char *name = bpf_program__name(prog);

		if (target_exists(vmlinux, prog))
			continue;
		if (is_required(name, required)) {
			ret = mltune_bpf_fail(err, errlen, ENOENT, "%s: the kernel has no %s",
					      name, bpf_program__section_name(prog));
			break;
		}
		bpf_program__set_autoload(prog, false);
		add_missing(missing, missing_len, name);
	}
	btf__free(vmlinux);
	return ret;
}

/*
 * Attaches every loaded program into @links (indexed like the object's
 * programs); an optional one that fails is detached from the plan and named
 * in @missing.
 */
static int attach_all(struct bpf_object *obj, struct bpf_link **links, int nlinks,
		      const char *const *required, char *missing, size_t missing_len,
		      char *err, size_t errlen)
{
	struct bpf_program *prog;
	int i = 0;

	bpf_object__for_each_program(prog, obj) {
		const char *name = bpf_program__name(prog);

		if (i >= nlinks)
			return mltune_bpf_fail(err, errlen, E2BIG, "too many programs");
		links[i] = NULL;
		if (bpf_program__autoload(prog)) {
			links[i] = bpf_program__attach(prog);
			if (!links[i]) {
				int e = errno;

				if (is_required(name, required))
					return mltune_bpf_fail(err, errlen, e, "attach %s: %s",
							       name, strerror(e));
				add_missing(missing, missing_len, name);
			}
		}
		i++;
	}
	return 0;
}

int mltune_observe_possible_cpus(void)
{
	return libbpf_num_possible_cpus();
}

/* ---- noise ---------------------------------------------------------------- */

#define NOISE_MAX_PROGS 64

struct mltune_noise {
	struct mltune_noise_bpf *skel;
	struct bpf_link *links[NOISE_MAX_PROGS];
};

static const char *const noise_required[] = {
	"noise_irq_entry", "noise_irq_exit", "noise_local_timer_entry",
	"noise_local_timer_exit", "noise_softirq_entry", "noise_softirq_exit",
	"noise_sched_switch", NULL
};

void mltune_noise_close(struct mltune_noise *n)
{
	int i;

	if (!n)
		return;
	for (i = 0; i < NOISE_MAX_PROGS; i++)
		bpf_link__destroy(n->links[i]);
	mltune_noise_bpf__destroy(n->skel);
	free(n);
}

int mltune_noise_open(struct mltune_noise **out, const struct mltune_noise_cfg *cfg,
		      char *missing, size_t missing_len, char *err, size_t errlen)
{
	struct mltune_noise *n;
	int ret;

	*out = NULL;
	libbpf_set_print(mltune_bpf_log);
	n = calloc(1, sizeof(*n));
	if (!n)
		return mltune_bpf_fail(err, errlen, ENOMEM, "out of memory");
	n->skel = mltune_noise_bpf__open();
	if (!n->skel) {
		ret = mltune_bpf_fail(err, errlen, errno, "open the noise BPF object: %s",
				      strerror(errno));
		goto out;
	}
	ret = prune(n->skel->obj, noise_required, missing, missing_len, err, errlen);
	if (ret)
		goto out;
	ret = mltune_noise_bpf__load(n->skel);
	if (ret) {
		mltune_bpf_fail(err, errlen, ret, "load the noise BPF programs (verifier): %s",
				strerror(-ret));
		goto out;
	}
	ret = mltune_noise_set_cfg(n, cfg, err, errlen);
	if (ret)
		goto out;
	ret = attach_all(n->skel->obj, n->links, NOISE_MAX_PROGS, noise_required, missing,
			 missing_len, err, errlen);
	if (ret)
		goto out;
	*out = n;
	return 0;
out:
	mltune_noise_close(n);
	return ret;
}

int mltune_noise_set_cfg(struct mltune_noise *n, const struct mltune_noise_cfg *cfg,
			 char *err, size_t errlen)
{
	__u32 zero = 0;

	if (bpf_map_update_elem(bpf_map__fd(n->skel->maps.cfg), &zero, cfg, BPF_ANY))
		return mltune_bpf_fail(err, errlen, errno, "write the noise cfg: %s",
				       strerror(errno));
	return 0;
}

int mltune_noise_read(struct mltune_noise *n,
		      int (*fn)(void *ctx, const struct mltune_noise_key *k,
				const struct mltune_noise_val *v),
		      void *ctx, char *err, size_t errlen)
{
	int fd = bpf_map__fd(n->skel->maps.counts);
	struct mltune_noise_key k, next;
	struct mltune_noise_val v;
	void *prev = NULL;
	int ret;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &v) == 0) {
			ret = fn(ctx, &next, &v);
			if (ret)
				return ret;
		}
		k = next;
		prev = &k;
	}
	if (errno != ENOENT)
		return mltune_bpf_fail(err, errlen, errno, "read the noise counts: %s",
				       strerror(errno));
	return 0;
}

int mltune_noise_read_pcpu(struct mltune_noise *n, struct mltune_noise_pcpu *out,
			   int ncpu, char *err, size_t errlen)
{
	__u32 zero = 0;

	if (ncpu != libbpf_num_possible_cpus())
		return mltune_bpf_fail(err, errlen, EINVAL, "possible CPUs: %d, not %d",
				       libbpf_num_possible_cpus(), ncpu);
	if (bpf_map_lookup_elem(bpf_map__fd(n->skel->maps.pcpu), &zero, out))
		return mltune_bpf_fail(err, errlen, errno, "read the per-CPU noise state: %s",
				       strerror(errno));
	return 0;
}

/* ---- drift ---------------------------------------------------------------- */

#define DRIFT_MAX_PROGS 32

static const char *const drift_required[] = {
	"drift_sysctl", "drift_sysctl_ret", "drift_kernfs", "drift_kernfs_ret", NULL
};

/* bpffs at /sys/fs/bpf (mounted when missing), then the pin directory. */
static int ensure_pin_dir(const char *pin_dir, char *err, size_t errlen)
{
	int ret = mltune_bpf_mount_fs(err, errlen);

	if (ret)
		return ret;
	if (mkdir(pin_dir, 0700) != 0) {
		if (errno == EEXIST)
			return mltune_bpf_fail(err, errlen, EEXIST,
					       "%s exists: the drift watcher is running", pin_dir);
		return mltune_bpf_fail(err, errlen, errno, "mkdir %s: %s", pin_dir,
				       strerror(errno));
	}
	return 0;
}

int mltune_drift_stop(const char *pin_dir, char *err, size_t errlen)
{
	char path[512];
	struct dirent *de;
	int ret = 0;
	DIR *d;

	d = opendir(pin_dir);
	if (!d)
		return errno == ENOENT ? 0 : mltune_bpf_fail(err, errlen, errno, "%s: %s", pin_dir,
							     strerror(errno));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_dir, de->d_name);
		if (unlink(path) != 0 && !ret)
			ret = mltune_bpf_fail(err, errlen, errno, "unpin %s: %s", path,
					      strerror(errno));
	}
	closedir(d);
	if (rmdir(pin_dir) != 0 && !ret)
		ret = mltune_bpf_fail(err, errlen, errno, "rmdir %s: %s", pin_dir, strerror(errno));
	return ret;
}

int mltune_drift_start(const char *pin_dir, const struct mltune_drift_cfg *cfg,
		       char *missing, size_t missing_len, char *err, size_t errlen)
{
	struct bpf_link *links[DRIFT_MAX_PROGS] = { 0 };
	struct mltune_drift_bpf *skel;
	struct bpf_program *prog;
	char path[512];
	__u32 zero = 0;
	int ret, i;

	libbpf_set_print(mltune_bpf_log);
	skel = mltune_drift_bpf__open();
	if (!skel)
		return mltune_bpf_fail(err, errlen, errno, "open the drift BPF object: %s",
				       strerror(errno));
	ret = prune(skel->obj, drift_required, missing, missing_len, err, errlen);
	if (ret)
		goto out;
	ret = mltune_drift_bpf__load(skel);
	if (ret) {
		mltune_bpf_fail(err, errlen, ret, "load the drift BPF programs (verifier): %s",
				strerror(-ret));
		goto out;
	}
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.cfg), &zero, cfg, BPF_ANY)) {
		ret = mltune_bpf_fail(err, errlen, errno, "write the drift cfg: %s",
				      strerror(errno));
		goto out;
	}
	ret = ensure_pin_dir(pin_dir, err, errlen);
	if (ret)
		goto out;
	snprintf(path, sizeof(path), "%s/writes", pin_dir);
	ret = bpf_map__pin(skel->maps.writes, path);
	if (!ret) {
		snprintf(path, sizeof(path), "%s/cfg", pin_dir);
		ret = bpf_map__pin(skel->maps.cfg, path);
	}
	if (ret) {
		mltune_bpf_fail(err, errlen, ret, "pin %s: %s", path, strerror(-ret));
		goto unpin;
	}
	ret = attach_all(skel->obj, links, DRIFT_MAX_PROGS, drift_required, missing,
			 missing_len, err, errlen);
	if (ret)
		goto unpin;
	i = 0;
	bpf_object__for_each_program(prog, skel->obj) {
		if (i < DRIFT_MAX_PROGS && links[i]) {
			snprintf(path, sizeof(path), "%s/link_%s", pin_dir,
				 bpf_program__name(prog));
			ret = bpf_link__pin(links[i], path);
			if (ret) {
				mltune_bpf_fail(err, errlen, ret, "pin %s: %s", path,
						strerror(-ret));
				goto unpin;
			}
		}
		i++;
	}
	/* The pinned links keep the programs; drop our references. */
	for (i = 0; i < DRIFT_MAX_PROGS; i++) {
		if (links[i])
			bpf_link__disconnect(links[i]);
		bpf_link__destroy(links[i]);
	}
	mltune_drift_bpf__destroy(skel);
	return 0;
unpin:
	for (i = 0; i < DRIFT_MAX_PROGS; i++)
		bpf_link__destroy(links[i]);
	mltune_drift_stop(pin_dir, NULL, 0);
out:
	mltune_drift_bpf__destroy(skel);
	return ret;
}

int mltune_drift_read(const char *pin_dir,
		      int (*fn)(void *ctx, const struct mltune_drift_key *k,
				const struct mltune_drift_rec *r),
		      void *ctx, char *err, size_t errlen)
{
	struct mltune_drift_key k, next;
	struct mltune_drift_rec r;
	void *prev = NULL;
	char path[512];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/writes", pin_dir);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return mltune_bpf_fail(err, errlen, errno, "%s: %s", path, strerror(errno));
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &r) == 0) {
			ret = fn(ctx, &next, &r);
			if (ret)
				break;
		}
		k = next;
		prev = &k;
	}
	if (!ret && errno != ENOENT)
		ret = mltune_bpf_fail(err, errlen, errno, "read %s: %s", path, strerror(errno));
	close(fd);
	return ret;
}
