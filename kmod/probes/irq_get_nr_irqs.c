// SPDX-License-Identifier: GPL-2.0
/* irq_get_nr_irqs() (6.13) replaced the exported nr_irqs variable. */
#include <linux/irqnr.h>

unsigned int probe(void)
{
	return irq_get_nr_irqs();
}
