/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune huge-page pool: interface to mltune_main.c.
 * See Documentation/hugepool.rst.
 */
#ifndef MLTUNE_HUGEPOOL_H
#define MLTUNE_HUGEPOOL_H

#include <linux/fs.h>
#include <linux/mm_types.h>

/* Creates /sys/kernel/mltune/hugepool and the load-time reservation. */
int mltune_hugepool_init(void);
/* Frees every pool page; only called when nothing can be mapped any more. */
void mltune_hugepool_exit(void);

/*
 * file_operations of /dev/mltune; .get_unmapped_area is
 * thp_get_unmapped_area so that mappings can use PMDs.
 */
int mltune_hugepool_mmap(struct file *file, struct vm_area_struct *vma);
long mltune_hugepool_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg);

#endif /* MLTUNE_HUGEPOOL_H */
