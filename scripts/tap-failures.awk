# What a failed test printed: for every "not ok" line of a (K)TAP log, at
# any nesting ("# not ok ..."), the lines since the result line before it
# (the last 40 of them), then the "not ok" line itself. Used by
# scripts/check.sh so that a failure's reason is in the check's own output,
# not only in a log file of the build tree. Exit 1 when nothing matched.
function flush_to(line) {
	if (n > 40) {
		print "     | ... (" n - 40 " lines before)"
	}
	for (i = (n > 40 ? n - 40 : 0); i < n; i++)
		print "     | " buf[i % 40]
	print "     | " line
	found = 1
}
/^(# )*(not )?ok [0-9]+/ {
	if ($0 ~ /^(# )*not ok /) {
		# An outer "not ok" right after an inner one adds nothing new.
		if (n > 0 || !last_nok)
			flush_to($0)
		last_nok = 1
	} else {
		last_nok = 0
	}
	n = 0
	next
}
{ buf[n % 40] = $0; n++ }
END { exit found ? 0 : 1 }
