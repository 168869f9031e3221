#!/bin/sh
# Every Documentation/*.rst renders as written: docutils reports no warning
# (a table whose text runs into the column margin, an inline literal split
# across table lines, a title overline shorter than its title).
#   rst_check.sh FILE...
set -eu
py=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import docutils' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "rst_check: python3-docutils missing: run 'make deps'" >&2; exit 1; }
exec "$py" - "$@" <<'PY'
import sys
import docutils.core
import docutils.utils
bad = 0
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as f:
            docutils.core.publish_doctree(f.read(), source_path=path,
                                          settings_overrides={"report_level": 2, "halt_level": 2,
                                                              "warning_stream": sys.stdout})
    except docutils.utils.SystemMessage:  # the warning stream printed it, with file and line
        bad += 1
n = len(sys.argv) - 1
print(f"rst_check: {n - bad} of {n} files render without warnings")
sys.exit(1 if bad else 0)
PY
