// SPDX-License-Identifier: GPL-2.0
/* vm_flags_set() (6.3, backported to some distribution kernels). */
#include <linux/mm.h>

void probe(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTEXPAND);
}
