// SPDX-License-Identifier: GPL-2.0
/*
 * mltune: node tuning for GPU training and inference machines.
 *
 * This file owns the module's two user-visible roots:
 *   /sys/kernel/mltune   sysfs directory (version and the parts below it)
 *   /dev/mltune          misc device
 * See Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>		/* thp_get_unmapped_area */
#include <linux/module.h>
#include <linux/sysfs.h>

#include "mltune.h"
#include "mltune_common.h"
#include "mltune_compat.h"
#include "mltune_feeder.h"
#include "mltune_hugepool.h"
#include "mltune_profile.h"

struct kobject *mltune_kobj;

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%s abi %d\n", MLTUNE_VERSION,
			  MLTUNE_ABI_VERSION);
}

static struct kobj_attribute version_attr = __ATTR_RO(version);

static struct attribute *mltune_root_attrs[] = {
	&version_attr.attr,
	NULL,
};

static const struct attribute_group mltune_root_group = {
	.attrs = mltune_root_attrs,
};

static int mltune_dev_open(struct inode *inode, struct file *file)
{
	return nonseekable_open(inode, file);
}

static const struct file_operations mltune_fops = {
	.owner = THIS_MODULE,
	.open = mltune_dev_open,
	.mmap = mltune_hugepool_mmap,
	.get_unmapped_area = thp_get_unmapped_area,
	.unlocked_ioctl = mltune_hugepool_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

struct miscdevice mltune_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "mltune",
	.fops = &mltune_fops,
	.mode = 0600,
};

static int __init mltune_init(void)
{
	int ret;

	/* The workqueue and private mounts every part uses. */
	ret = mltune_common_init();
	if (ret)
		return ret;

	ret = -ENOMEM;
	mltune_kobj = kobject_create_and_add("mltune", kernel_kobj);
	if (!mltune_kobj)
		goto err_common;

	ret = sysfs_create_group(mltune_kobj, &mltune_root_group);
	if (ret)
		goto err_kobj;

	ret = mltune_hugepool_init();
	if (ret)
		goto err_group;

	ret = misc_register(&mltune_miscdev);
	if (ret)
		goto err_hugepool;

	ret = mltune_profile_init();
	if (ret)
		goto err_misc;

	ret = mltune_feeder_init();
	if (ret)
		goto err_profile;

	pr_info("version %s (abi %d) loaded\n", MLTUNE_VERSION,
		MLTUNE_ABI_VERSION);
	return 0;

err_profile:
	mltune_profile_exit();
err_misc:
	misc_deregister(&mltune_miscdev);
err_hugepool:
	mltune_hugepool_exit();
err_group:
	sysfs_remove_group(mltune_kobj, &mltune_root_group);
err_kobj:
	kobject_put(mltune_kobj);
err_common:
	mltune_common_exit();
	return ret;
}

static void __exit mltune_exit(void)
{
	mltune_feeder_exit();
	mltune_profile_exit();
	misc_deregister(&mltune_miscdev);
	mltune_hugepool_exit();
	sysfs_remove_group(mltune_kobj, &mltune_root_group);
	kobject_put(mltune_kobj);
	mltune_common_exit();
}

module_init(mltune_init);
module_exit(mltune_exit);

MODULE_DESCRIPTION("Node tuning for GPU training and inference machines");
MODULE_AUTHOR("The mltune authors");
MODULE_LICENSE("GPL");
MODULE_VERSION(MLTUNE_VERSION);
