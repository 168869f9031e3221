// SPDX-License-Identifier: GPL-2.0
/*
 * mltune: lexical checks of knob paths and profile names, and the
 * comparison of decimal integers that knob bounds use.
 *
 * Pure functions over the trees of include/mltune_knobs_allow.h: no locks,
 * no allocation, nothing but the C string functions, so that the user-space
 * unit test tests/unit/profile/test_allowlist.cpp builds this very file and
 * checks that the library (userspace/lib/src/profile/allow.cpp) agrees.
 */
#define MLTUNE_ALLOW_TREES
#include "mltune_allow.h"

#ifdef __KERNEL__
#include <linux/string.h>
#else
#include <string.h>
#endif

/* Match s[0..len) (components separated by '/') against pattern pat. */
static bool mltune_match(const char *pat, const char *s, size_t len)
{
	const char *end = s + len;

	while (*pat) {
		const char *pe = strchr(pat, '/');
		size_t pl = pe ? (size_t)(pe - pat) : strlen(pat);
		const char *se;

		if (s >= end)
			return false;
		se = memchr(s, '/', end - s);
		if (!se)
			se = end;
		if (pl == 2 && !memcmp(pat, "**", 2))
			return true;
		if (!(pl == 1 && *pat == '*') &&
		    (pl != (size_t)(se - s) || memcmp(pat, s, pl)))
			return false;
		pat = pe ? pe + 1 : pat + pl;
		s = se < end ? se + 1 : end;
	}
	return s >= end;
}

/* Does s[0..len) match one of the NULL-terminated patterns @pats? */
static bool mltune_allowed(const char *const *pats, const char *s, size_t len)
{
	for (; *pats; pats++)
		if (mltune_match(*pats, s, len))
			return true;
	return false;
}

/* True if s[0..len) has a component equal to c. */
static bool mltune_has_component(const char *s, size_t len, const char *c)
{
	size_t cl = strlen(c);
	const char *end = s + len;

	while (s < end) {
		const char *se = memchr(s, '/', end - s);

		if (!se)
			se = end;
		if ((size_t)(se - s) == cl && !memcmp(s, c, cl))
			return true;
		s = se + 1;
	}
	return false;
}

/* Is rel[0..len), relative to the root of @tree, inside the trees? */
bool mltune_tree_allowed(unsigned char tree, const char *rel, size_t len)
{
	if (tree == MLTUNE_PROC)
		return mltune_allowed(mltune_proc_allow, rel, len);
	return mltune_allowed(mltune_sys_allow, rel, len);
}

/*
 * Check a knob path p[0..len): shorter than MLTUNE_PATH_MAX, below /proc/
 * or /sys/ (sets *tree), no empty, "." or ".." component, inside the
 * allowed trees. The caller checks the bytes (printable, no space).
 * Returns an enum mltune_path_verdict.
 */
int mltune_path_check(const char *p, size_t len, unsigned char *tree)
{
	const char *s, *end = p + len;
	size_t off;

	if (len >= MLTUNE_PATH_MAX)
		return MLTUNE_PATH_TOO_LONG;
	if (len > 6 && !memcmp(p, "/proc/", 6))
		*tree = MLTUNE_PROC;
	else if (len > 5 && !memcmp(p, "/sys/", 5))
		*tree = MLTUNE_SYS;
	else
		return MLTUNE_PATH_NOT_PROC_SYS;
	off = mltune_rel_off(*tree);
	for (s = p + off; s <= end; ) {
		const char *se = memchr(s, '/', end - s);

		if (!se)
			se = end;
		if (se == s || (se - s == 1 && s[0] == '.') ||
		    (se - s == 2 && s[0] == '.' && s[1] == '.'))
			return MLTUNE_PATH_BAD_COMPONENT;
		s = se + 1;
	}
	if (!mltune_tree_allowed(*tree, p + off, len - off))
		return MLTUNE_PATH_NOT_ALLOWED;
	return MLTUNE_PATH_OK;
}

/*
 * After opening knob @path of @tree: is rel[0..len), where the file really
 * is below the root of its mount, still inside the trees? Symbolic links
 * inside sysfs are followed but may not leave them; /sys/block/NAME is a
 * link into /sys/devices, so /sys/block/NAME/queue/X may resolve to
 * devices/.../NAME/queue/X.
 */
bool mltune_resolved_allowed(unsigned char tree, const char *path,
			     const char *rel, size_t len)
{
	if (mltune_tree_allowed(tree, rel, len))
		return true;
	return tree == MLTUNE_SYS && !strncmp(path, "/sys/block/", 11) &&
	       !strncmp(rel, "devices/", 8) &&
	       mltune_has_component(rel, len, "queue");
}

/*
 * A profile name: 1 to MLTUNE_NAME_MAX - 1 bytes of [A-Za-z0-9_-],
 * starting with a letter or digit. ASCII only: the kernel's isalnum()
 * accepts Latin-1.
 */
bool mltune_name_ok(const char *name, size_t len)
{
	size_t i;

	if (!len || len >= MLTUNE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (!i || (c != '_' && c != '-')))
			return false;
	}
	return true;
}

/* A decimal integer: an optional '-', then one or more digits. */
bool mltune_is_int(const char *s, size_t len)
{
	size_t i = len && *s == '-';

	if (i == len)
		return false;
	for (; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* Digits of a non-negative decimal s[0..len) without leading zeros. */
static void mltune_skip_zeros(const char **s, size_t *len)
{
	while (*len > 1 && **s == '0') {
		(*s)++;
		(*len)--;
	}
}

/*
 * Compare the decimal integers a[0..alen) and b[0..blen) of any length
 * (no overflow): *res is <0, 0 or >0 as a is less than, equal to or
 * greater than b. False, *res untouched, when either is not an integer.
 */
bool mltune_int_cmp(const char *a, size_t alen, const char *b, size_t blen,
		    int *res)
{
	bool aneg, bneg;
	int mag;

	if (!mltune_is_int(a, alen) || !mltune_is_int(b, blen))
		return false;
	aneg = *a == '-';
	bneg = *b == '-';
	a += aneg;
	alen -= aneg;
	b += bneg;
	blen -= bneg;
	mltune_skip_zeros(&a, &alen);
	mltune_skip_zeros(&b, &blen);
	if (alen == 1 && *a == '0')
		aneg = false;	/* -0 is 0 */
	if (blen == 1 && *b == '0')
		bneg = false;
	if (aneg != bneg) {
		*res = aneg ? -1 : 1;
		return true;
	}
	if (alen != blen)
		mag = alen < blen ? -1 : 1;
	else
		mag = memcmp(a, b, alen);
	mag = mag < 0 ? -1 : mag > 0;
	*res = aneg ? -mag : mag;
	return true;
}
