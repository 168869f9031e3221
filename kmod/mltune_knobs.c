// SPDX-License-Identifier: GPL-2.0
/*
 * mltune knob lists: the text of profiles/NAME/knobs and of the built-in
 * profiles, parsed into knob sets.
 *
 * A knob list has lines "[FLAGS]PATH VALUE": an absolute path below /proc
 * or /sys inside the allowed trees (include/mltune_knobs_allow.h, checked
 * by mltune_allow.c), a value (the rest of the line) and flags before the
 * path: '?' optional, '>' at least VALUE, '<' at most VALUE (a decimal
 * integer; enum mltune_cmp). Only lexical checks happen here; where a path
 * really leads is checked when a switch opens it (mltune_switch.c).
 *
 * Nothing here takes a lock: the functions work on the caller's buffers.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "mltune_common.h"
#include "mltune_knobs.h"

static const char *const mltune_path_why[] = {
	[MLTUNE_PATH_TOO_LONG] = "too long",
	[MLTUNE_PATH_NOT_PROC_SYS] = "not under /proc or /sys",
	[MLTUNE_PATH_BAD_COMPONENT] = "empty, . or .. component",
	[MLTUNE_PATH_NOT_ALLOWED] = "outside the allowed trees",
};

/*
 * Validate a knob path p[0..len) (bytes already checked printable, no
 * space): see mltune_path_check().
 */
static int mltune_check_path(const char *p, size_t len, u8 *tree)
{
	int v = mltune_path_check(p, len, tree);

	if (v == MLTUNE_PATH_OK)
		return 0;
	return mltune_refuse(-EINVAL, "knob path %.*s: %s\n",
			     (int)min_t(size_t, len, 80), p, mltune_path_why[v]);
}

/* --- knob lists --- */

/* Printable ASCII and newline only: refuses NUL and control bytes. */
int mltune_check_bytes(const char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = buf[i];

		if (c != '\n' && (c < 0x20 || c > 0x7e))
			return mltune_refuse(-EINVAL, "byte 0x%02x at offset %zu\n",
					     c, i);
	}
	return 0;
}

/* Read the flags in front of a path: '?' and one of '>' or '<'. */
static int mltune_parse_flags(const char **pp, const char *end,
			      struct mltune_span *sp)
{
	const char *p;

	for (p = *pp; p < end && (*p == '?' || *p == '<' || *p == '>'); p++) {
		if (*p == '?' && !sp->optional)
			sp->optional = true;
		else if (*p != '?' && sp->cmp == MLTUNE_CMP_EQ)
			sp->cmp = *p == '>' ? MLTUNE_CMP_GE : MLTUNE_CMP_LE;
		else
			return mltune_refuse(-EINVAL, "knob line with repeated flags: %.*s\n",
					     (int)min_t(size_t, end - *pp, 80), *pp);
	}
	*pp = p;
	return 0;
}

/*
 * Parse a knob list: lines "[FLAGS]PATH VALUE", VALUE being the rest of the
 * line (trailing spaces dropped); empty lines and lines starting with '#'
 * are ignored. With @partial, a last line without '\n' is not checked yet
 * (more text may follow in the next write). Returns the number of knobs or
 * -errno; fills @spans (MLTUNE_MAX_KNOBS entries).
 */
int mltune_parse(const char *text, size_t len, bool partial,
		 struct mltune_span *spans)
{
	const char *s = text, *end = text + len;
	int nr = 0, i, ret;

	ret = mltune_check_bytes(text, len);
	if (ret)
		return ret;
	while (s < end) {
		const char *le = memchr(s, '\n', end - s);
		const char *p, *v, *ve;
		struct mltune_span sp = {};

		if (!le) {
			if (partial)
				break;
			le = end;
		}
		p = s;
		s = le + 1;
		while (p < le && *p == ' ')
			p++;
		ve = le;
		while (ve > p && ve[-1] == ' ')
			ve--;
		if (p == ve || *p == '#')
			continue;
		ret = mltune_parse_flags(&p, ve, &sp);
		if (ret)
			return ret;
		v = memchr(p, ' ', ve - p);
		if (!v)
			return mltune_refuse(-EINVAL, "knob line without a value: %.*s\n",
					     (int)min_t(size_t, ve - p, 80), p);
		ret = mltune_check_path(p, v - p, &sp.tree);
		if (ret)
			return ret;
		if (nr >= MLTUNE_MAX_KNOBS)
			return mltune_refuse(-E2BIG, "more than %d knobs\n",
					     MLTUNE_MAX_KNOBS);
		sp.path = p;
		sp.path_len = v - p;
		while (*v == ' ')
			v++;
		sp.value = v;
		if (ve - v > MLTUNE_VALUE_MAX)
			return mltune_refuse(-EINVAL, "value of %.*s longer than %d bytes\n",
					     sp.path_len, p, MLTUNE_VALUE_MAX);
		sp.value_len = ve - v;
		if (sp.cmp != MLTUNE_CMP_EQ && !mltune_is_int(v, sp.value_len))
			return mltune_refuse(-EINVAL, "bound of %.*s is not a decimal integer\n",
					     sp.path_len, p);
		for (i = 0; i < nr; i++)
			if (spans[i].path_len == sp.path_len &&
			    !memcmp(spans[i].path, p, sp.path_len))
				return mltune_refuse(-EINVAL, "knob %.*s listed twice\n",
						     sp.path_len, p);
		spans[nr++] = sp;
	}
	if (partial && end - s > MLTUNE_PATH_MAX + MLTUNE_VALUE_MAX + 2)
		return mltune_refuse(-EINVAL, "knob line longer than %d bytes\n",
				     MLTUNE_PATH_MAX + MLTUNE_VALUE_MAX + 2);
	return nr;
}

/* Parse and validate a complete knob list into a new knob set. */
int mltune_build(const char *text, size_t len, struct mltune_knobset **out)
{
	struct mltune_span *spans;
	struct mltune_knobset *set;
	size_t size;
	char *str;
	int nr, i;

	spans = mltune_alloc(kmalloc_array(MLTUNE_MAX_KNOBS, sizeof(*spans), GFP_KERNEL));
	if (!spans)
		return -ENOMEM;
	nr = mltune_parse(text, len, false, spans);
	if (nr < 0) {
		kfree(spans);
		return nr;
	}
	size = struct_size(set, knobs, nr);
	for (i = 0; i < nr; i++)
		size += spans[i].path_len + spans[i].value_len + 3;
	set = mltune_alloc(kvmalloc(size, GFP_KERNEL));
	if (!set) {
		kfree(spans);
		return -ENOMEM;
	}
	set->nr = nr;
	str = (char *)&set->knobs[nr];
	for (i = 0; i < nr; i++) {
		struct mltune_knob *k = &set->knobs[i];

		k->tree = spans[i].tree;
		k->cmp = spans[i].cmp;
		k->optional = spans[i].optional;
		k->path = str;
		memcpy(str, spans[i].path, spans[i].path_len);
		str += spans[i].path_len;
		*str++ = '\0';
		k->value = str;
		k->value_len = spans[i].value_len;
		memcpy(str, spans[i].value, spans[i].value_len);
		str += spans[i].value_len;
		*str++ = '\n';
		*str++ = '\0';
	}
	kfree(spans);
	*out = set;
	return 0;
}

/* Print a knob list as accepted by the knobs file; returns the length. */
size_t mltune_print_knobs(char *buf, const struct mltune_knob *k,
			  unsigned int nr, bool flags)
{
	size_t n = 0, l;
	unsigned int i;

	for (i = 0; i < nr; i++, k++) {
		if (flags && k->optional) {
			if (buf)
				buf[n] = '?';
			n++;
		}
		if (flags && k->cmp != MLTUNE_CMP_EQ) {
			if (buf)
				buf[n] = k->cmp == MLTUNE_CMP_GE ? '>' : '<';
			n++;
		}
		l = strlen(k->path);
		if (buf) {
			memcpy(buf + n, k->path, l);
			buf[n + l] = ' ';
			memcpy(buf + n + l + 1, k->value, k->value_len + 1);
		}
		n += l + 1 + k->value_len + 1;
	}
	return n;
}
