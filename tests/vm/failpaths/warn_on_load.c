// SPDX-License-Identifier: GPL-2.0
/*
 * A module that WARNs when loaded. Used only by tests/vm/failpaths/run to
 * prove that tests/vm/run reports a kernel splat and fails the run.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init warn_on_load_init(void)
{
	WARN(1, "mltune failpath: deliberate warning on load\n");
	return 0;
}

static void __exit warn_on_load_exit(void)
{
}

module_init(warn_on_load_init);
module_exit(warn_on_load_exit);
MODULE_DESCRIPTION("mltune test bed: deliberate WARN on load");
MODULE_LICENSE("GPL");
