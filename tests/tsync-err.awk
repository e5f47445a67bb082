# tsync-err.awk: the time-sync error of agents recorded between "rulers"
# (used by tests/e2e-tsync.sh and bench/tsync.sh; see docs/timesync.md,
# "Measuring the error").
#
# Input: one line per occurrence of the traced event, 2k+1 timestamps in ns:
#	r0 a1 r1 a2 r2 ... ak rk
# r0..rk from instances on the mono clock without any correction (the
# listener's CLOCK_MONOTONIC itself), a1..ak from the agents' files after
# trace-cmd's corrections.  The kernel wrote the occurrence into the
# instances in this order (the order in which they enabled the event), so
# agent i's stamp was taken between r(i-1) and r(i): its error is
#	e = a - (r(i-1) + r(i)) / 2,
# known to within u = (w - w0) / 2, w = r(i) - r(i-1) the bracket and w0 the
# narrowest bracket of that slot (an interrupt inside a bracket widens it).
# -v names="n1 n2 ..." names the agents (k of them).
#
# Output lines:
#	agent NAME MED MAX LOW_MED LOW_MAX CLEAN_MAX W0 W_MEDIAN WIDE
#	pair A B RAW_MED RAW_MAX COR_MED COR_MAX LOW_MED LOW_MAX CLEAN_MAX WIDE
# agent: MED, MAX of |e|, the error against the reference; pair: RAW, of
# |a_A - a_B| as trace-cmd shows it, and COR, of |e_A - e_B|, the error
# between the two files; LOW: the same for max(|e| - u, 0) and
# max(|e_A - e_B| - u_A - u_B, 0), lower bounds of each occurrence's true
# error, so that LOW_MED and LOW_MAX are lower bounds of the true median
# and maximum; WIDE: occurrences whose uncertainty (u, or u_A + u_B)
# exceeds 250 ns, and CLEAN_MAX the largest error of the others.  The sync
# error changes smoothly with time (linearly between samples a second
# apart) and clean occurrences come every 50 ms, so CLEAN_MAX estimates
# the largest sync error where MAX adds the rulers' own errors.
# Every value is an integer number of ns.

function isort(a, n,	i, j, v, gap) {
	for (gap = int(n / 2); gap > 0; gap = int(gap / 2))
		for (i = gap + 1; i <= n; i++) {
			v = a[i]
			for (j = i; j > gap && a[j - gap] > v; j -= gap)
				a[j] = a[j - gap]
			a[j] = v
		}
}

function median(a, n) {
	isort(a, n)
	return a[int((n + 1) / 2)]
}

function abs(x) {
	return x < 0 ? -x : x
}

BEGIN {
	k = split(names, name, " ")
}

NF == 2 * k + 1 {
	n++
	for (i = 1; i <= k; i++) {
		lo = $(2 * i - 1)
		hi = $(2 * i + 1)
		a[n, i] = $(2 * i)
		e[n, i] = a[n, i] - (lo + hi) / 2
		w[n, i] = hi - lo
		if (n == 1 || w[n, i] < w0[i])
			w0[i] = w[n, i]
	}
}

END {
	if (n == 0)
		exit 1
	for (i = 1; i <= k; i++) {
		wide = mx = lmx = cmx = 0
		for (j = 1; j <= n; j++) {
			u[j, i] = (w[j, i] - w0[i]) / 2
			v[j] = abs(e[j, i])
			if (u[j, i] > 250)
				wide++
			else if (v[j] > cmx)
				cmx = v[j]
			if (v[j] > mx)
				mx = v[j]
			lv[j] = v[j] - u[j, i]
			if (lv[j] < 0)
				lv[j] = 0
			if (lv[j] > lmx)
				lmx = lv[j]
			ww[j] = w[j, i]
		}
		printf "agent %s %.0f %.0f %.0f %.0f %.0f %.0f %.0f %d\n",
		    name[i], median(v, n), mx, median(lv, n), lmx, cmx, w0[i],
		    median(ww, n), wide
	}
	for (i = 1; i <= k; i++)
		for (l = i + 1; l <= k; l++) {
			rmx = cmx = lmx = kmx = wide = 0
			for (j = 1; j <= n; j++) {
				rv[j] = abs(a[j, i] - a[j, l])
				cv[j] = abs(e[j, i] - e[j, l])
				lv[j] = cv[j] - u[j, i] - u[j, l]
				if (lv[j] < 0)
					lv[j] = 0
				if (rv[j] > rmx)
					rmx = rv[j]
				if (cv[j] > cmx)
					cmx = cv[j]
				if (lv[j] > lmx)
					lmx = lv[j]
				if (u[j, i] + u[j, l] > 250)
					wide++
				else if (cv[j] > kmx)
					kmx = cv[j]
			}
			printf "pair %s %s %.0f %.0f %.0f %.0f %.0f %.0f %.0f " \
			    "%d\n", name[i], name[l], median(rv, n), rmx,
			    median(cv, n), cmx, median(lv, n), lmx, kmx, wide
		}
}
