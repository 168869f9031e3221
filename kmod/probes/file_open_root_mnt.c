// SPDX-License-Identifier: GPL-2.0
/* file_open_root_mnt() (5.15); before it, file_open_root(dentry, mnt, ...). */
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#include <linux/fs.h>

struct file *(*probe_open)(struct vfsmount *, const char *, int, umode_t) =
	file_open_root_mnt;
