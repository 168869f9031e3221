/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mltune knob lists: parsing and validation of the text written to
 * profiles/NAME/knobs. See mltune_knobs.c.
 */
#ifndef MLTUNE_KNOBS_H
#define MLTUNE_KNOBS_H

#include <linux/types.h>

#include "mltune_allow.h"

/* One knob; strings live in the allocation of the owning set or entry. */
struct mltune_knob {
	const char *path;	/* absolute, validated by mltune_path_check() */
	const char *value;	/* value_len bytes, then '\n', then NUL */
	unsigned int value_len;
	u8 tree;		/* enum mltune_tree */
	u8 cmp;			/* enum mltune_cmp */
	bool optional;		/* missing or failing: skip, do not roll back */
};

/* A parsed, validated knob list. Immutable once built; kvfree() it. */
struct mltune_knobset {
	unsigned int nr;
	struct mltune_knob knobs[];
	/* followed by the strings */
};

/* One line of a knob list, pointing into the text. */
struct mltune_span {
	const char *path;
	const char *value;
	u16 path_len;
	u16 value_len;
	u8 tree;
	u8 cmp;
	bool optional;
};

int mltune_check_bytes(const char *buf, size_t len);
int mltune_parse(const char *text, size_t len, bool partial,
		 struct mltune_span *spans);
int mltune_build(const char *text, size_t len, struct mltune_knobset **out);
size_t mltune_print_knobs(char *buf, const struct mltune_knob *k,
			  unsigned int nr, bool flags);

#endif /* MLTUNE_KNOBS_H */
