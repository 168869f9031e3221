// SPDX-License-Identifier: GPL-2.0
/*
 * HK_TYPE_DOMAIN_BOOT (in 7.2, not in 6.12): the CPUs not isolated by
 * isolcpus= at boot. Where it exists, HK_TYPE_DOMAIN also leaves out cpuset
 * isolated partitions; where it does not, HK_TYPE_DOMAIN is the boot set.
 */
#include <linux/sched/isolation.h>

int probe(void)
{
	return HK_TYPE_DOMAIN_BOOT;
}
