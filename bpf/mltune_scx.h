/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Loader of the mltune feeder sched_ext scheduler (libbpf skeleton).
 *
 * The scheduler outlives the process that loads it: the struct_ops link and
 * the maps are pinned in bpffs under a directory (MLTUNE_SCX_PIN_DIR); the
 * other calls work on the pinned objects only, from any process.
 * Every call returns 0 or a negative errno and writes a message into err.
 */
#ifndef MLTUNE_SCX_H
#define MLTUNE_SCX_H

#include <stddef.h>
#include <linux/types.h>
#include "mltune_feeder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads and attaches the scheduler with @cfg, pins it under @pin_dir. */
int mltune_scx_attach(const char *pin_dir, const struct mltune_feeder_cfg *cfg,
		      char *err, size_t errlen);
/* Rewrites the pinned cfg map (the scheduler stays attached). */
int mltune_scx_update(const char *pin_dir, const struct mltune_feeder_cfg *cfg,
		      char *err, size_t errlen);
int mltune_scx_read_cfg(const char *pin_dir, struct mltune_feeder_cfg *cfg,
			char *err, size_t errlen);
/* Sum of the per-CPU stats. */
int mltune_scx_read_stats(const char *pin_dir, struct mltune_feeder_stats *sum,
			  char *err, size_t errlen);
int mltune_scx_read_uei(const char *pin_dir, struct mltune_feeder_uei *uei,
			char *err, size_t errlen);
/*
 * Up to @max entries of the intruders map (real-time threads seen on feeder
 * CPUs): their TIDs in @tids, records in @out; returns how many, or -errno.
 */
int mltune_scx_read_intruders(const char *pin_dir, __u32 *tids,
			      struct mltune_feeder_intruder *out, size_t max,
			      char *err, size_t errlen);
/* Deletes one entry (done with it); an absent one is not an error. */
int mltune_scx_forget_intruder(const char *pin_dir, __u32 tid, char *err, size_t errlen);
/* Unpins link and maps: the scheduler is unloaded when the link goes. */
int mltune_scx_detach(const char *pin_dir, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* MLTUNE_SCX_H */
