/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune profiles: named knob lists switched atomically through
 * /sys/kernel/mltune/profile. See mltune_profile.c and
 * Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#ifndef MLTUNE_PROFILE_H
#define MLTUNE_PROFILE_H

/* Called from mltune_init() after mltune_kobj and mltune_miscdev exist. */
int mltune_profile_init(void);
/* Called from mltune_exit() before mltune_kobj and mltune_miscdev go. */
void mltune_profile_exit(void);

/* A profile compiled into the module (generated mltune_builtin.h). */
struct mltune_builtin {
	const char *name;
	/* Knob list in the format of profiles/NAME/knobs. */
	const char *knobs;
};

#endif /* MLTUNE_PROFILE_H */
