/*
 * tsfilter.c: time-sync samples that lie off their neighbours' line (see
 * tsfilter.h).
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
