/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune: internal interfaces between the parts of the module.
 *
 * mltune_main.c owns the /sys/kernel/mltune kobject and the /dev/mltune misc
 * device; the profile, hugepool and feeder parts hang their attributes and
 * file operations off these.
 */
#ifndef MLTUNE_H
#define MLTUNE_H

#include <linux/kobject.h>
#include <linux/miscdevice.h>

#define MLTUNE_VERSION		"0.1.0"
/* Bumped on every incompatible change of the sysfs or ioctl ABI. */
#define MLTUNE_ABI_VERSION	1

/* /sys/kernel/mltune; valid between module init and exit. */
extern struct kobject *mltune_kobj;
/* /dev/mltune; uevents for profile switches are sent on its device. */
extern struct miscdevice mltune_miscdev;

#endif /* MLTUNE_H */
