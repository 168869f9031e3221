/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * mltune user-space ABI: /dev/mltune ioctls and mmap offsets.
 *
 * Huge-page pool (Documentation/hugepool.rst):
 *
 *   fd = open("/dev/mltune", O_RDWR | O_CLOEXEC);
 *   p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
 *	      MLTUNE_HUGEPOOL_MMAP_OFFSET(node));
 *
 * takes len / MLTUNE_HUGEPOOL_PAGE_SIZE pages from the pool of NUMA node
 * "node" (all or nothing) and maps them; they return to the pool when the
 * last mapping of the buffer goes away.  len must be a non-zero multiple of
 * MLTUNE_HUGEPOOL_PAGE_SIZE and the mapping MAP_SHARED.
 *
 * Errors: EINVAL for a bad node, length, offset or MAP_PRIVATE; ENOMEM when
 * the node's pool has fewer free pages than asked for.
 *
 * Usable from C and C++; no kernel-only types.
 */
#ifndef _UAPI_LINUX_MLTUNE_H
#define _UAPI_LINUX_MLTUNE_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

/* Pool pages are 2 MiB on every architecture. */
#define MLTUNE_HUGEPOOL_PAGE_SHIFT	21
#define MLTUNE_HUGEPOOL_PAGE_SIZE	_BITULL(MLTUNE_HUGEPOOL_PAGE_SHIFT)

/*
 * mmap offset selecting a node: bits 40 and up hold the node number, the
 * bits below must be zero.
 */
#define MLTUNE_HUGEPOOL_NODE_SHIFT	40
#define MLTUNE_HUGEPOOL_MMAP_OFFSET(node) \
	((node) * _BITULL(MLTUNE_HUGEPOOL_NODE_SHIFT))

#define MLTUNE_IOC_MAGIC		0xB9

/**
 * struct mltune_hugepool_info - state of one node's pool
 * @node:	in: NUMA node
 * @flags:	in: must be 0
 * @page_size:	out: MLTUNE_HUGEPOOL_PAGE_SIZE
 * @reserved:	out: pages owned by the pool (free plus mapped)
 * @free:	out: pages ready to be mapped
 * @mapped:	out: pages in buffers that are still mapped somewhere
 * @mmap_offset: out: MLTUNE_HUGEPOOL_MMAP_OFFSET(@node)
 *
 * Counts are in pool pages.  EINVAL for a node without a pool or non-zero
 * @flags.
 */
struct mltune_hugepool_info {
	__u32 node;
	__u32 flags;
	__u64 page_size;
	__u64 reserved;
	__u64 free;
	__u64 mapped;
	__u64 mmap_offset;
};

#define MLTUNE_IOC_HUGEPOOL_INFO \
	_IOWR(MLTUNE_IOC_MAGIC, 0x01, struct mltune_hugepool_info)

#endif /* _UAPI_LINUX_MLTUNE_H */
