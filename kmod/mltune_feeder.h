/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune feeder CPUs: /sys/kernel/mltune/feeder/cpus steers interrupts off
 * the GPU-feeder cores. See mltune_feeder.c and
 * Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#ifndef MLTUNE_FEEDER_H
#define MLTUNE_FEEDER_H

/* Called from mltune_init() after mltune_kobj exists. */
int mltune_feeder_init(void);
/* Called from mltune_exit() before mltune_kobj goes; restores the IRQs. */
void mltune_feeder_exit(void);

#endif /* MLTUNE_FEEDER_H */
