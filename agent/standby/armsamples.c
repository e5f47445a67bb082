/*
 * armsamples.c: the samples an armed agent keeps (see armsamples.h).
 */
#include <stdlib.h>
#include <string.h>

#include "armsamples.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * Two CLOCK_MONOTONICs drift apart by at most 1000 ppm (NTP slews one by
 * 500 ppm at most): two samples further apart than that and their bounds
 * are of two references (another listener's machine).
 */
#define ARMSAMPLES_DRIFT_DIV	1000

/* The samples kept, oldest first. */
struct armsamples {
	uint32_t		 n;
	struct armsample	 s[TD_MAX_ARMED_SAMPLES];
};

struct armsamples *
armsamples_new(void)
{
	return xcalloc(1, sizeof(struct armsamples));
}

void
armsamples_free(struct armsamples *a)
{
	free(a);
}

void
armsamples_clear(struct armsamples *a)
{
	a->n = 0;
}

/* Leave out every other sample but the newest (the cap is reached). */
static void
armsamples_thin(struct armsamples *a)
{
	uint32_t i, k = 0;

	for (i = 0; i + 1 < a->n; i += 2)
		a->s[k++] = a->s[i];
	a->s[k++] = a->s[a->n - 1];
	a->n = k;
}

void
armsamples_keep(struct armsamples *a, const struct armsample *x,
    uint64_t start)
{
	const struct armsample *l;
	uint64_t lim;
	int64_t d;
	uint32_t i = 0;

	if (a->n > 0) {
		l = &a->s[a->n - 1];
		d = x->theta - l->theta;
		lim = l->bound + x->bound + (x->mono > l->mono ?
		    (x->mono - l->mono) / ARMSAMPLES_DRIFT_DIV : 0) + 1;
		if (x->ts <= l->ts || x->mono <= l->mono ||
		    (uint64_t)(d < 0 ? -d : d) > lim)
			a->n = 0;
	}
	while (i + 1 < a->n && a->s[i + 1].mono <= start)
		i++;
	if (i > 0) {
		memmove(a->s, a->s + i, (a->n - i) * sizeof *a->s);
		a->n -= i;
	}
	if (a->n == TD_MAX_ARMED_SAMPLES)
		armsamples_thin(a);
	a->s[a->n++] = *x;
}

uint32_t
armsamples_count(const struct armsamples *a)
{
	return a->n;
}

const struct armsample *
armsamples_get(const struct armsamples *a, uint32_t i)
{
	return &a->s[i];
}
