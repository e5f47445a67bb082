/*
 * tsfilter.c: time-sync samples that lie off their neighbours' line, or
 * whose bounds are far wider than their neighbours' (see tsfilter.h).
 */
#include <stdlib.h>
#include <string.h>

#include "tsfilter.h"
#include "banned.h"

static int
tsfilter_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n), n > 0; v is sorted in place. */
static double
tsfilter_median(double *v, uint32_t n)
{
	qsort(v, n, sizeof *v, tsfilter_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double
td_tsfilter_diff(int64_t a, int64_t b)
{
	int64_t d;

	if (__builtin_sub_overflow(a, b, &d))
		return (double)a - (double)b;
	return (double)d;
}

/*
 * How far sample i lies from the line through its neighbours, and in
 * *spread the neighbours' median distance from that line.  Times are taken
 * relative to sample i, so that doubles keep nanoseconds.
 */
static double
tsfilter_residual(const uint64_t *ts, const int64_t *offset, uint32_t n,
    uint32_t i, double *spread)
{
	double x[2 * TD_TSFILTER_SIDE], y[2 * TD_TSFILTER_SIDE];
	double v[2 * TD_TSFILTER_SIDE * (2 * TD_TSFILTER_SIDE - 1) / 2];
	double slope, at;
	uint32_t a, b, j, k = 0, m = 0;
	uint32_t lo = i > TD_TSFILTER_SIDE ? i - TD_TSFILTER_SIDE : 0;
	uint32_t hi = n - i - 1 > TD_TSFILTER_SIDE ? i + TD_TSFILTER_SIDE :
	    n - 1;

	for (j = lo; j <= hi; j++) {
		if (j == i)
			continue;
		x[k] = (double)(int64_t)(ts[j] - ts[i]);
		y[k] = td_tsfilter_diff(offset[j], offset[i]);
		k++;
	}
	for (a = 0; a < k; a++)
		for (b = a + 1; b < k; b++)
			if (x[b] != x[a])
				v[m++] = (y[b] - y[a]) / (x[b] - x[a]);
	slope = m > 0 ? tsfilter_median(v, m) : 0;
	for (a = 0; a < k; a++)
		v[a] = y[a] - slope * x[a];
	at = tsfilter_median(v, k);	/* the line at sample i */
	for (a = 0; a < k; a++) {
		v[a] = y[a] - slope * x[a] - at;
		if (v[a] < 0)
			v[a] = -v[a];
	}
	*spread = tsfilter_median(v, k);
	return at < 0 ? -at : at;
}

uint32_t
td_tsfilter_outliers(const uint64_t *ts, const int64_t *offset, uint32_t n,
    double floor, bool *out)
{
	double r, spread, lim;
	uint32_t i, count = 0;

	memset(out, 0, n * sizeof *out);
	if (n < TD_TSFILTER_MIN)
		return 0;
	for (i = 0; i < n; i++) {
		r = tsfilter_residual(ts, offset, n, i, &spread);
		lim = 4 * spread > floor ? 4 * spread : floor;
		if (r > lim) {
			out[i] = true;
			count++;
		}
	}
	if (count > n / 2) {
		memset(out, 0, n * sizeof *out);
		return 0;
	}
	return count;
}

/* Whether sample i's bound is far wider than its neighbours'. */
static bool
tsfilter_is_imprecise(const uint64_t *bound, uint32_t n, uint32_t i,
    uint64_t floor_ns)
{
	uint64_t best = UINT64_MAX, lim;
	uint32_t j;
	uint32_t lo = i > TD_TSFILTER_SIDE ? i - TD_TSFILTER_SIDE : 0;
	uint32_t hi = n - i - 1 > TD_TSFILTER_SIDE ? i + TD_TSFILTER_SIDE :
	    n - 1;

	for (j = lo; j <= hi; j++)
		if (j != i && bound[j] < best)
			best = bound[j];
	if (best == UINT64_MAX)
		return false;	/* no neighbour */
	if (best < floor_ns)
		best = floor_ns;
	lim = best > UINT64_MAX / TD_TSFILTER_IMPRECISE ? UINT64_MAX :
	    best * TD_TSFILTER_IMPRECISE;
	return bound[i] > lim;
}

uint32_t
td_tsfilter_imprecise(const uint64_t *ts, const int64_t *offset,
    const uint64_t *bound, uint32_t n, uint64_t floor_ns,
    double units_per_ns, bool *out)
{
	bool *bad;
	uint32_t i, count = 0;
	int64_t p, q, j;
	double want, tol, b;

	if (n < 2)
		return 0;
	bad = calloc(n, sizeof *bad);
	if (bad == NULL)
		return 0;	/* keep them all */
	for (i = 0; i < n; i++)
		bad[i] = tsfilter_is_imprecise(bound, n, i, floor_ns);
	for (i = 0; i < n; i++) {
		if (!bad[i] || out[i])
			continue;
		/* the nearest precise samples: p before, q after */
		for (p = (int64_t)i - 1; p >= 0 && bad[p]; p--)
			;
		for (q = (int64_t)i + 1; q < (int64_t)n && bad[q]; q++)
			;
		if (p < 0 && q >= (int64_t)n)
			continue;	/* cannot be: the best is precise */
		if (p < 0) {
			/* none before: the two after (or the one) */
			for (j = q + 1; j < (int64_t)n && bad[j]; j++)
				;
			p = q;
			q = j < (int64_t)n ? j : q;
		} else if (q >= (int64_t)n) {
			/* none after: the two before (or the one) */
			for (j = p - 1; j >= 0 && bad[j]; j--)
				;
			q = p;
			p = j >= 0 ? j : p;
		}
		want = 0;	/* offset[i] - offset[p], if it agrees */
		if (p != q && ts[q] != ts[p])
			want = td_tsfilter_diff(offset[q], offset[p]) *
			    (double)(int64_t)(ts[i] - ts[p]) /
			    (double)(int64_t)(ts[q] - ts[p]);
		b = (double)(bound[p] > bound[q] ? bound[p] : bound[q]);
		if (b < (double)floor_ns)
			b = (double)floor_ns;
		tol = b * units_per_ns;
		b = td_tsfilter_diff(offset[i], offset[p]) - want;
		if (b > tol || b < -tol) {
			out[i] = true;
			count++;
		}
	}
	free(bad);
	return count;
}

uint32_t
td_tsfilter_steep(const uint64_t *ts, const int64_t *offset,
    const uint64_t *bound, uint32_t n, uint64_t min_bound_ns,
    uint64_t floor_ns, double units_per_ns, bool *out)
{
	uint32_t i, p, left = 0, count = 0;
	double dx, dy;
	bool again = true;

	for (i = 0; i < n; i++)
		left += !out[i];
	while (again && left > 1) {
		again = false;
		for (p = 0; p < n && out[p]; p++)
			;
		for (i = p + 1; i < n; i++) {
			if (out[i])
				continue;
			dx = (double)(int64_t)(ts[i] - ts[p]);
			dy = td_tsfilter_diff(offset[i], offset[p]);
			if (dy < 0)
				dy = -dy;
			if (dx > 0 && dy > TD_TSFILTER_MAX_SLOPE * dx +
			    (double)floor_ns * units_per_ns &&
			    (bound[p] >= min_bound_ns ||
			    bound[i] >= min_bound_ns)) {
				out[bound[i] > bound[p] ? i : p] = true;
				count++;
				left--;
				again = true;
				break;
			}
			p = i;
		}
	}
	return count;
}
