// SPDX-License-Identifier: GPL-2.0
/*
 * WQ_PERCPU (6.17): a per-CPU workqueue must say so; alloc_workqueue()
 * warns when neither WQ_PERCPU nor WQ_UNBOUND is given.
 */
#include <linux/workqueue.h>

int probe(void)
{
	return WQ_PERCPU;
}
