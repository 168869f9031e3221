/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Loaders of the observation programs (libbpf skeletons): noise accounting
 * (mltune_noise.bpf.c) and the drift watcher (mltune_drift.bpf.c).
 *
 * Programs whose attach point this kernel lacks (a tracepoint or function
 * absent from its BTF) are left out, and their names are written into
 * `missing` (space separated); a missing program that the result cannot do
 * without fails the load.  Every call returns 0 or a negative errno and
 * writes a message into err.
 */
#ifndef MLTUNE_OBSERVE_H
#define MLTUNE_OBSERVE_H

#include <stddef.h>
#include "mltune_noise.h"
#include "mltune_drift.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- noise: one window per load, owned by the calling process ---- */
struct mltune_noise;

/* Loads and attaches with @cfg (enabled must be 0). */
int mltune_noise_open(struct mltune_noise **out, const struct mltune_noise_cfg *cfg,
		      char *missing, size_t missing_len, char *err, size_t errlen);
/* Rewrites cfg (enabled, start_ns): opens or closes the window. */
int mltune_noise_set_cfg(struct mltune_noise *n, const struct mltune_noise_cfg *cfg,
			 char *err, size_t errlen);
/* Calls @fn for every counts entry; stops at the first nonzero return. */
int mltune_noise_read(struct mltune_noise *n,
		      int (*fn)(void *ctx, const struct mltune_noise_key *k,
				const struct mltune_noise_val *v),
		      void *ctx, char *err, size_t errlen);
/* The per-CPU state: @out has room for @ncpu entries (possible CPUs). */
int mltune_noise_read_pcpu(struct mltune_noise *n, struct mltune_noise_pcpu *out,
			   int ncpu, char *err, size_t errlen);
void mltune_noise_close(struct mltune_noise *n);

/* ---- drift: pinned under @pin_dir, outlives the loader ---- */
int mltune_drift_start(const char *pin_dir, const struct mltune_drift_cfg *cfg,
		       char *missing, size_t missing_len, char *err, size_t errlen);
/* Unpins links and maps: the watcher stops when the last link goes. */
int mltune_drift_stop(const char *pin_dir, char *err, size_t errlen);
/* Calls @fn for every record of the pinned writes map. */
int mltune_drift_read(const char *pin_dir,
		      int (*fn)(void *ctx, const struct mltune_drift_key *k,
				const struct mltune_drift_rec *r),
		      void *ctx, char *err, size_t errlen);

/* Possible CPUs as libbpf counts them (per-CPU map sizes). */
int mltune_observe_possible_cpus(void);

#ifdef __cplusplus
}
#endif

#endif /* MLTUNE_OBSERVE_H */
