// SPDX-License-Identifier: GPL-2.0
/*
 * enum hk_type (5.18): housekeeping_cpumask(HK_TYPE_*); before it the
 * masks were named by enum hk_flags (HK_FLAG_*).
 */
#include <linux/sched/isolation.h>

int probe(void)
{
	return HK_TYPE_DOMAIN + HK_TYPE_TICK;
}
