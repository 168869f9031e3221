// SPDX-License-Identifier: GPL-2.0
/* bin_attribute read/write take a const struct bin_attribute * (6.16). */
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#include <linux/sysfs.h>

static ssize_t probe_read(struct file *f, struct kobject *k,
			  const struct bin_attribute *a, char *b, loff_t o,
			  size_t c)
{
	return 0;
}

const struct bin_attribute probe_attr = { .read = probe_read };
