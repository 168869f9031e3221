# Which skips of a check are not in tests/expected-skips (scripts/check.sh).
#   awk -v list=tests/expected-skips -v kernels="6.1 6.12 ..." -f skip-check.awk SKIPS
# SKIPS: one "LOG: TEXT" line per skip, LOG a build/check log name without
# .log (vm-SERIES, guest-SERIES, host-vm-NAME-SERIES, or a suite's own name
# such as unit, node-test, fleet-test), TEXT the skip's TAP or ctest line.
# An entry of the list, "SERIES SUITE WHAT... -- WHY", expects the skips of
# suite SUITE (vm, guest, host-vm-NAME, node-test, ...) on kernel SERIES (or
# * for any) whose text contains WHAT. Prints every skip no entry expects.
BEGIN {
	while ((getline line < list) > 0) {
		if (line ~ /^[ \t]*(#|$)/)
			continue
		if (index(line, " -- ") == 0) {
			printf "%s: an entry without ' -- WHY': %s\n", list, line
			bad = 1
			continue
		}
		head = substr(line, 1, index(line, " -- ") - 1)
		n = split(head, w, /[ \t]+/)
		if (n < 3) {
			printf "%s: an entry without SERIES SUITE WHAT: %s\n", list, line
			bad = 1
			continue
		}
		e++
		ser[e] = w[1]
		sui[e] = w[2]
		what[e] = w[3]
		for (i = 4; i <= n; i++)
			what[e] = what[e] " " w[i]
	}
	nk = split(kernels, ks, /[ \t]+/)
}
{
	logname = $0
	sub(/: .*/, "", logname)
	text = substr($0, length(logname) + 3)
	suite = logname
	series = "-"
	# the longest matrix series the log's name ends with (6.12-rt before 6.12)
	for (i = 1; i <= nk; i++) {
		s = "-" ks[i]
		if (length(logname) > length(s) && substr(logname, length(logname) - length(s) + 1) == s &&
		    length(ks[i]) > length(series == "-" ? "" : series)) {
			series = ks[i]
			suite = substr(logname, 1, length(logname) - length(s))
		}
	}
	for (i = 1; i <= e; i++)
		if ((ser[i] == "*" || ser[i] == series) && sui[i] == suite && index(text, what[i]) > 0)
			next
	print
}
END {
	exit bad
}
