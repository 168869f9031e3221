// SPDX-License-Identifier: GPL-2.0
/* Loader of the mltune feeder sched_ext scheduler; see mltune_scx.h. */
#include "mltune_scx.h"
#include "mltune_loader.h"
#include "mltune_feeder.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* bpffs at /sys/fs/bpf (mounted when missing), then the pin directory. */
static int ensure_pin_dir(const char *pin_dir, char *err, size_t errlen)
{
	int ret = mltune_bpf_mount_fs(err, errlen);

	if (ret)
		return ret;
	if (mkdir(pin_dir, 0700) != 0 && errno != EEXIST)
		return mltune_bpf_fail(err, errlen, errno, "mkdir %s: %s", pin_dir,
				       strerror(errno));
	return 0;
}

int mltune_scx_attach(const char *pin_dir, const struct mltune_feeder_cfg *cfg,
		      char *err, size_t errlen)
{
	struct mltune_feeder *skel;
	struct bpf_link *link = NULL;
	char path[256];
	__u32 zero = 0;
	int ret;

	libbpf_set_print(mltune_bpf_log);
	ret = ensure_pin_dir(pin_dir, err, errlen);
	if (ret)
		return ret;
	pin_path(path, sizeof(path), pin_dir, "link");
	if (access(path, F_OK) == 0)
		return mltune_bpf_fail(err, errlen, EEXIST,
				       "%s exists: the scheduler is already attached", path);

	skel = mltune_feeder__open();
	if (!skel)
		return mltune_bpf_fail(err, errlen, errno, "open BPF object: %s", strerror(errno));
	ret = mltune_feeder__load(skel);
	if (ret) {
		mltune_bpf_fail(err, errlen, ret,
				"load BPF scheduler (verifier or kernel without sched_ext): %s",
				strerror(-ret));
		goto out;
	}
	ret = bpf_map_update_elem(bpf_map__fd(skel->maps.cfg), &zero, cfg, BPF_ANY);
	if (ret) {
		mltune_bpf_fail(err, errlen, errno, "write cfg: %s", strerror(errno));
		goto out;
	}
	/* Pin the maps first: user space must reach them once attached. */
	pin_path(path, sizeof(path), pin_dir, "cfg");
	ret = bpf_map__pin(skel->maps.cfg, path);
	if (!ret) {
		pin_path(path, sizeof(path), pin_dir, "stats");
		ret = bpf_map__pin(skel->maps.stats, path);
	}
	if (!ret) {
		pin_path(path, sizeof(path), pin_dir, "uei");
		ret = bpf_map__pin(skel->maps.uei, path);
	}
	if (!ret) {
		pin_path(path, sizeof(path), pin_dir, "intruders");
		ret = bpf_map__pin(skel->maps.intruders, path);
	}
	if (ret) {
		mltune_bpf_fail(err, errlen, ret, "pin maps in %s: %s", pin_dir, strerror(-ret));
		goto unpin;
	}
	link = bpf_map__attach_struct_ops(skel->maps.mltune_feeder_ops);
	if (!link) {
		ret = -errno;
		mltune_bpf_fail(err, errlen, ret, "attach sched_ext scheduler: %s%s",
				strerror(-ret),
				ret == -EINVAL ? " (isolcpus= domain isolation active?)" :
				ret == -EBUSY ? " (another sched_ext scheduler is active)" : "");
		goto unpin;
	}
	pin_path(path, sizeof(path), pin_dir, "link");
	ret = bpf_link__pin(link, path);
	if (ret) {
		mltune_bpf_fail(err, errlen, ret, "pin link %s: %s", path, strerror(-ret));
		bpf_link__destroy(link);
		goto unpin;
	}
	/* The pinned link keeps the scheduler; drop our references. */
	bpf_link__disconnect(link);
	bpf_link__destroy(link);
	/*
	 * The real-time guard: without it the feeder promise does not hold for
	 * SCHED_FIFO/RR/DEADLINE threads, so a guard that cannot attach
	 * unloads the scheduler again.
	 */
	link = bpf_program__attach(skel->progs.mltune_rt_guard);
	ret = link ? 0 : -errno;
	if (!ret) {
		pin_path(path, sizeof(path), pin_dir, "rtguard");
		ret = bpf_link__pin(link, path);
		if (!ret)
			bpf_link__disconnect(link);
		bpf_link__destroy(link);
	}
	if (ret) {
		mltune_bpf_fail(err, errlen, ret,
				"attach the real-time guard (tp_btf/sched_switch): %s",
				strerror(-ret));
		pin_path(path, sizeof(path), pin_dir, "link");
		unlink(path);
		goto unpin;
	}
	mltune_feeder__destroy(skel);
	return 0;
unpin:
	bpf_map__unpin(skel->maps.cfg, NULL);
	bpf_map__unpin(skel->maps.stats, NULL);
	bpf_map__unpin(skel->maps.uei, NULL);
	bpf_map__unpin(skel->maps.intruders, NULL);
out:
	mltune_feeder__destroy(skel);
	return ret;
}

static int open_map(const char *pin_dir, const char *name, char *err, size_t errlen)
{
	char path[256];
	int fd;

	pin_path(path, sizeof(path), pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return mltune_bpf_fail(err, errlen, errno, "%s: %s", path, strerror(errno));
	return fd;
}

int mltune_scx_update(const char *pin_dir, const struct mltune_feeder_cfg *cfg,
		      char *err, size_t errlen)
{
	__u32 zero = 0;
	int fd, ret = 0;

	fd = open_map(pin_dir, "cfg", err, errlen);
	if (fd < 0)
		return fd;
	if (bpf_map_update_elem(fd, &zero, cfg, BPF_ANY))
		ret = mltune_bpf_fail(err, errlen, errno, "update cfg: %s", strerror(errno));
	close(fd);
	return ret;
}

static int lookup(const char *pin_dir, const char *name, void *val, char *err, size_t errlen)
{
	__u32 zero = 0;
	int fd, ret = 0;

	fd = open_map(pin_dir, name, err, errlen);
	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, &zero, val))
		ret = mltune_bpf_fail(err, errlen, errno, "read %s: %s", name, strerror(errno));
	close(fd);
	return ret;
}

int mltune_scx_read_cfg(const char *pin_dir, struct mltune_feeder_cfg *cfg,
			char *err, size_t errlen)
{
	return lookup(pin_dir, "cfg", cfg, err, errlen);
}

int mltune_scx_read_uei(const char *pin_dir, struct mltune_feeder_uei *uei,
			char *err, size_t errlen)
{
	return lookup(pin_dir, "uei", uei, err, errlen);
}

int mltune_scx_read_stats(const char *pin_dir, struct mltune_feeder_stats *sum,
			  char *err, size_t errlen)
{
	int ncpu = libbpf_num_possible_cpus();
	struct mltune_feeder_stats per[MLTUNE_FEEDER_MAX_CPUS];
	int ret, i;

	if (ncpu <= 0 || ncpu > MLTUNE_FEEDER_MAX_CPUS)
		return mltune_bpf_fail(err, errlen, EINVAL, "possible CPUs: %d", ncpu);
	ret = lookup(pin_dir, "stats", per, err, errlen);
	if (ret)
		return ret;
	memset(sum, 0, sizeof(*sum));
	for (i = 0; i < ncpu; i++) {
		sum->foreign += per[i].foreign;
		sum->stray += per[i].stray;
		sum->forced += per[i].forced;
		sum->feeder_enq += per[i].feeder_enq;
		sum->normal_enq += per[i].normal_enq;
		sum->kthread_enq += per[i].kthread_enq;
		sum->preempted += per[i].preempted;
		sum->rt_foreign += per[i].rt_foreign;
		sum->dl_foreign += per[i].dl_foreign;
	}
	return 0;
}

int mltune_scx_read_intruders(const char *pin_dir, __u32 *tids,
			      struct mltune_feeder_intruder *out, size_t max,
			      char *err, size_t errlen)
{
	__u32 key, next;
	size_t n = 0;
	int fd, ret;

	fd = open_map(pin_dir, "intruders", err, errlen);
	if (fd < 0)
		return fd;
	ret = bpf_map_get_next_key(fd, NULL, &next);
	while (!ret && n < max) {
		key = next;
		/* An entry the guard's LRU evicted meanwhile is skipped. */
		if (!bpf_map_lookup_elem(fd, &key, &out[n]))
			tids[n++] = key;
		ret = bpf_map_get_next_key(fd, &key, &next);
	}
	if (ret && errno != ENOENT) {
		ret = mltune_bpf_fail(err, errlen, errno, "read intruders: %s", strerror(errno));
		close(fd);
		return ret;
	}
	close(fd);
	return (int)n;
}

int mltune_scx_forget_intruder(const char *pin_dir, __u32 tid, char *err, size_t errlen)
{
	int fd, ret = 0;

	fd = open_map(pin_dir, "intruders", err, errlen);
	if (fd < 0)
		return fd;
	if (bpf_map_delete_elem(fd, &tid) && errno != ENOENT)
		ret = mltune_bpf_fail(err, errlen, errno, "forget intruder %u: %s", tid,
				      strerror(errno));
	close(fd);
	return ret;
}

int mltune_scx_detach(const char *pin_dir, char *err, size_t errlen)
{
	static const char *const names[] = {
		"rtguard", "link", "cfg", "stats", "uei", "intruders",
	};
	char path[256];
	int ret = 0;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		pin_path(path, sizeof(path), pin_dir, names[i]);
		if (unlink(path) != 0 && errno != ENOENT && !ret)
			ret = mltune_bpf_fail(err, errlen, errno, "unpin %s: %s", path,
					      strerror(errno));
	}
	rmdir(pin_dir);
	return ret;
}
