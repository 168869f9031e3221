// SPDX-License-Identifier: GPL-2.0
/* kobject_init_and_add() takes a const struct kobj_type * (6.1; not 5.10). */
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#pragma GCC diagnostic error "-Wdiscarded-qualifiers"
#include <linux/kobject.h>

static const struct kobj_type probe_ktype;

int probe(struct kobject *kobj)
{
	return kobject_init_and_add(kobj, &probe_ktype, NULL, "probe");
}
