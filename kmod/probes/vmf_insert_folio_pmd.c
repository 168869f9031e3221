// SPDX-License-Identifier: GPL-2.0
/*
 * vmf_insert_folio_pmd() (6.15) for refcounted, rmapped folio PMDs in a
 * driver mapping, and ->huge_fault(vmf, order) (6.6).  Kernels before
 * 6.16 marked such PMDs special (stable fix "don't mark refcounted folios
 * special in vmf_insert_folio_pmd()"); to stay on the safe side the probe
 * also requires the later removal of vma_is_special_huge() (the
 * declaration below conflicts with it where it still exists).
 */
#include <linux/mm.h>

int vma_is_special_huge(void);

static vm_fault_t probe_huge_fault(struct vm_fault *vmf, unsigned int order)
{
	return vmf_insert_folio_pmd(vmf, page_folio(vmf->page), true);
}

const struct vm_operations_struct probe_ops = {
	.huge_fault = probe_huge_fault,
};
