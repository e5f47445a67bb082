/*
 * tally.c: tdlisten's counters since it started and the recordings that
 * ended lately (see tally.h).  The ended ones are a ring of
 * TD_TALLY_ENDED: a status page of a listener that ran for months stays
 * the same size.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tally.h"
#include "banned.h"

static struct tally_totals tally_sum;
static struct tally_rec tally_ring[TD_TALLY_ENDED];
static int tally_next;		/* where the next ended one goes */
static int tally_count;		/* how many the ring holds */
static void (*tally_ended_fn)(void *);	/* told of each end */
static void *tally_ended_arg;

void
tally_bytes(uint64_t n)
{
	tally_sum.bytes += n;
}

void
tally_events(uint64_t n, bool missed)
{
	tally_sum.events += n;
	if (missed)
		tally_sum.missed_pages++;
}

/* The number after key in a CPUSTAT text (bounded, not NUL-trusting). */
static uint64_t
tally_stat(const uint8_t *p, size_t n, const char *key)
{
	char text[1024], *at;
	size_t k = n < sizeof text - 1 ? n : sizeof text - 1;

	memcpy(text, p, k);
	text[k] = '\0';
	if ((at = strstr(text, key)) == NULL)
		return 0;
	if (at != text && at[-1] != '\n')
		return 0;
	return strtoull(at + strlen(key), NULL, 10);
}

uint64_t
tally_cpustat(const void *p, size_t n)
{
	uint64_t o = tally_stat(p, n, "overrun: ");
	uint64_t d = tally_stat(p, n, "dropped events: ");

	tally_sum.lost[TALLY_OVERRUN] += o;
	tally_sum.lost[TALLY_DROPPED] += d;
	return o + d;
}

void
tally_resume(void)
{
	tally_sum.resumes++;
}

void
tally_piece(void)
{
	tally_sum.pieces++;
}

void
tally_piece_removed(void)
{
	tally_sum.pieces_removed++;
}

void
tally_restore(const struct tally_rec *r)
{
	tally_ring[tally_next] = *r;
	tally_next = (tally_next + 1) % TD_TALLY_ENDED;
	if (tally_count < TD_TALLY_ENDED)
		tally_count++;
}

void
tally_on_ended(void (*fn)(void *), void *arg)
{
	tally_ended_fn = fn;
	tally_ended_arg = arg;
}

void
tally_ended(const struct tally_rec *r)
{
	if (strcmp(r->state, "done") == 0)
		tally_sum.done++;
	else
		tally_sum.ended_early++;
	tally_restore(r);
	if (tally_ended_fn != NULL)
		tally_ended_fn(tally_ended_arg);
}

const char *
tally_loss_name(enum tally_loss cause)
{
	return cause == TALLY_OVERRUN ? "overrun" : "dropped";
}

const struct tally_totals *
tally_totals(void)
{
	return &tally_sum;
}

const struct tally_rec *
tally_ended_at(int i)
{
	if (i < 0 || i >= tally_count)
		return NULL;
	return &tally_ring[(tally_next - 1 - i + 2 * TD_TALLY_ENDED) %
	    TD_TALLY_ENDED];
}
