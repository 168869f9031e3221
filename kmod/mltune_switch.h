/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune switch engine: applies a knob set all or nothing, keeps the
 * baseline. See mltune_switch.c; the sysfs side is mltune_profile.c.
 */
#ifndef MLTUNE_SWITCH_H
#define MLTUNE_SWITCH_H

#include <linux/mutex.h>
#include <linux/types.h>

#include "mltune_knobs.h"

/*
 * Serializes every change of a profile and every switch; what it protects
 * and its rules are written next to it in mltune_switch.c.
 */
extern struct mutex mltune_lock;

/*
 * Switch to knob set @set, recorded as profile @name; @set NULL: to the
 * baseline. @announce: sysfs_notify() and a uevent. Returns the error of
 * the knob that failed (everything rolled back) or 0. Holds mltune_lock.
 */
int mltune_switch_to(const char *name, const struct mltune_knobset *set,
		     bool announce);

/* Accessors of the switch state; caller holds mltune_lock. */
const char *mltune_switch_active(void);
u64 mltune_switch_generation(void);
const char *mltune_switch_last(void);
/* The baseline, first written first; kvfree() it. NULL: no memory. */
struct mltune_knob *mltune_baseline_knobs(unsigned int *nr);

/* Load and unload; unload restores the baseline unless told not to. */
int mltune_switch_init(void);
void mltune_switch_unload(void);
void mltune_switch_exit(void);

#endif /* MLTUNE_SWITCH_H */
