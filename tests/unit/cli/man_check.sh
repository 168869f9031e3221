#!/bin/sh
# The man page renders as written: groff reports no warning (-ww), and every
# .TP tag is one line (a tag continued on the next line by a font macro
# renders as body text, the way "persist" and "config ..." once did).
#   man_check.sh PAGE
set -eu
page=$1
command -v groff >/dev/null || { echo "man_check: groff missing: run 'make deps'" >&2; exit 1; }
warnings=$(groff -ww -man -Tutf8 "$page" 2>&1 >/dev/null) || { printf '%s\n' "$warnings"; exit 1; }
if [ -n "$warnings" ]; then
	echo "man_check: $page: groff warnings:"
	printf '%s\n' "$warnings"
	exit 1
fi
split=$(awk '
	tag && /^\.(B|I|R|BR|RB|BI|IB|IR|RI) / { print FILENAME ":" NR ": .TP tag continues here: " $0 }
	{ tag = (prev == ".TP" && /^\./ && !/^\.TP/) ; prev = $1 }
' "$page")
if [ -n "$split" ]; then
	printf '%s\n' "$split"
	exit 1
fi
echo "man_check: $page: renders without warnings, every .TP tag on one line"
