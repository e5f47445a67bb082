/*
 * pagebuild.c: ring-buffer pages built event by event (see pagebuild.h for
 * the layout).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pagebuild.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

#define PB_TYPE_EXTEND		30
#define PB_DELTA_BITS		27
#define PB_DELTA_MASK		((1u << PB_DELTA_BITS) - 1)
/* A TIME_EXTEND holds 27 + 32 bits. */
#define PB_EXTEND_MAX		((1ULL << 59) - 1)
/* Largest payload with its own type_len (28 words). */
#define PB_SMALL_MAX		112

/* One page being built. */
struct td_pagebuild {
	uint8_t		*page;
	uint32_t	 page_size;
	int		 commit_size;
	size_t		 hdr;		/* 8 + commit_size */
	size_t		 len;		/* bytes of event data so far */
	uint64_t	 page_ts;	/* time of the page's first event */
	uint64_t	 last_ts;	/* time of the previous event */
	bool		 have_last;
	uint32_t	 events;
	bool		 taken;		/* the next add starts a new page */
};

/* A builder with an empty page. */
struct td_pagebuild *
td_pagebuild_new(uint32_t page_size, int commit_size)
{
	struct td_pagebuild *b;

	if ((commit_size != 4 && commit_size != 8) ||
	    page_size < TD_MIN_PAGE_SIZE || page_size > TD_MAX_PAGE_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	b = xcalloc(1, sizeof *b);
	b->page = xcalloc(1, page_size);
	b->page_size = page_size;
	b->commit_size = commit_size;
	b->hdr = 8 + (size_t)commit_size;
	return b;
}

/* Free a builder (NULL is fine). */
void
td_pagebuild_free(struct td_pagebuild *b)
{
	if (b == NULL)
		return;
	free(b->page);
	free(b);
}

static void
pb_put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof v);
}

/* Append one event, with a TIME_EXTEND before it when its delta needs one. */
int
td_pagebuild_add(struct td_pagebuild *b, uint64_t ts, const void *payload,
    size_t len)
{
	size_t words, size, need;
	uint64_t delta = 0;
	uint8_t *e;

	if (len == 0 || (b->have_last && ts < b->last_ts)) {
		errno = EINVAL;
		return -1;
	}
	words = (len + 3) / 4;
	size = 4 + words * 4 + (len > PB_SMALL_MAX ? 4 : 0);
	if (size > b->page_size - b->hdr) {
		errno = E2BIG;
		return -1;
	}
	if (b->taken) {
		memset(b->page, 0, b->page_size);
		b->len = 0;
		b->events = 0;
		b->taken = false;
	}
	need = size;
	if (b->events > 0) {
		delta = ts - b->last_ts;
		if (delta > PB_EXTEND_MAX) {
			errno = ENOSPC;	/* a new page holds any time */
			return -1;
		}
		if (delta > PB_DELTA_MASK)
			need += 8;
		if (need > b->page_size - b->hdr - b->len) {
			errno = ENOSPC;
			return -1;
		}
	} else
		b->page_ts = ts;
	e = b->page + b->hdr + b->len;
	if (delta > PB_DELTA_MASK) {
		pb_put32(e, PB_TYPE_EXTEND | (uint32_t)(delta & PB_DELTA_MASK)
		    << 5);
		pb_put32(e + 4, (uint32_t)(delta >> PB_DELTA_BITS));
		e += 8;
		delta = 0;
	}
	if (len <= PB_SMALL_MAX) {
		pb_put32(e, (uint32_t)words | (uint32_t)delta << 5);
		memcpy(e + 4, payload, len);
	} else {
		/* type_len 0: the length word counts itself */
		pb_put32(e, (uint32_t)delta << 5);
		pb_put32(e + 4, (uint32_t)(words * 4 + 4));
		memcpy(e + 8, payload, len);
	}
	b->len += need;
	b->events++;
	b->last_ts = ts;
	b->have_last = true;
	return 0;
}

/* Whether the page being built holds no event. */
bool
td_pagebuild_empty(const struct td_pagebuild *b)
{
	return b->taken || b->events == 0;
}

/* Write the page's header and hand the page out. */
const void *
td_pagebuild_take(struct td_pagebuild *b)
{
	uint64_t commit = b->len;
	uint32_t commit32 = (uint32_t)b->len;

	if (td_pagebuild_empty(b)) {
		errno = ENOENT;
		return NULL;
	}
	memcpy(b->page, &b->page_ts, 8);
	if (b->commit_size == 8)
		memcpy(b->page + 8, &commit, 8);
	else
		memcpy(b->page + 8, &commit32, 4);
	b->taken = true;
	return b->page;
}

/* Events in the page being built. */
uint32_t
td_pagebuild_events(const struct td_pagebuild *b)
{
	return b->taken ? 0 : b->events;
}
