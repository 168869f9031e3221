# Count test results in the guest's kselftest KTAP output (tests/vm/run).
# A harness program's "# Totals:" line counts its test cases; a program
# without one counts as one test. Prints "passed failed skipped".
/^# # Totals: / {
	for (i = 1; i <= NF; i++) { split($i, kv, ":"); v[kv[1]] = kv[2] }
	tp = v["pass"] + v["xfail"]; tf = v["fail"] + v["error"] + v["xpass"]; ts = v["skip"]
	have = 1
	next
}
/^(not )?ok [0-9]+ selftests: / {
	nok = ($1 == "not")
	is_skip = ($0 ~ /# SKIP/)
	if (have) {
		if (nok && tf == 0)
			tf = 1
		if (!nok && is_skip && tp + tf + ts == 0)
			ts = 1
		P += tp; F += tf; S += ts
	} else if (nok) {
		F++
	} else if (is_skip) {
		S++
	} else {
		P++
	}
	have = 0; tp = tf = ts = 0
}
END { printf "%d %d %d\n", P, F, S }
