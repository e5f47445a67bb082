/*
 * drain.c: the recorder's page drain: pages from the per-CPU rings into
 * the sink (the trace.dat writer, the network stream, or both), counted as
 * they go.
 *
 * A CPU is read when the kernel says its buffer reached the instance's
 * buffer_percent watermark; reading stops at the first page that is not
 * full, so the reader never chases the writer page by page.  The timer
 * drains every CPU completely, partial pages included, so quiet CPUs still
 * reach the output.  Pages go to the sink as they come: memory use does
 * not grow with the length of the recording.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "meta.h"
#include "page.h"
#include "recorder.h"
#include "ring.h"
#include "banned.h"

/* At most this many pages of one CPU before the others get their turn. */
#define DRAIN_BURST_PAGES	256

/*
 * Hand one page to the sink and count what it holds; info->data_len is 0
 * if the page could not be parsed.
 */
static int
drain_page(struct recorder *r, struct record_cpu *c, const void *page,
    size_t n, struct td_page_info *info_out)
{
	struct td_page_info info;

	if (td_page_parse(page, r->page_size, r->commit_size, &info) == 0) {
		c->events += info.events;
		if (info.missed) {
			c->missed_pages++;
			if (info.missed_stored)
				c->missed_events += info.missed_count;
		}
	} else
		info.data_len = 0;
	*info_out = info;
	c->pages++;
	if (r->sink.page(r->sink.arg, ring_cpu(c->ring), page, n) == -1) {
		snprintf(r->err, sizeof r->err, "%s: %s",
		    meta_tee_what(r->sinks), strerror(errno));
		r->failed = true;
		return -1;
	}
	if (r->final)
		return uplink_final_send(r);
	return 0;
}

/*
 * Read pages of one CPU: first the pages the kernel has finished, in
 * batches where the reader batches, then the page being written, one at a
 * time.  At the end (DRAIN_FINAL), read until the ring is empty.  At a
 * wake-up (DRAIN_WAKE) a batching reader leaves the page being written
 * alone; otherwise stop at the first page that is not nearly full: that is
 * the page the kernel is writing, and reading on would chase the writer one
 * event at a time.  The timer (DRAIN_TICK) takes that page too, so quiet
 * CPUs reach the file.  A burst limit keeps one busy CPU from starving the
 * others.  The network may have no room left (uplink_room()): then the
 * rest stays in the ring.
 */
int
drain_cpu(struct recorder *r, struct record_cpu *c, enum record_drain how)
{
	struct td_page_info info;
	size_t cap = r->page_size - 8 - r->commit_size, off;
	bool final = how == DRAIN_FINAL;
	const void *pages;
	ssize_t n;
	int i = 0;

	while (final || i < DRAIN_BURST_PAGES) {
		if (!uplink_room(r, final))
			return 0;
		if ((n = ring_read_whole(c->ring, &pages)) > 0) {
			for (off = 0; off < (size_t)n; off += r->page_size)
				if (drain_page(r, c, (const uint8_t *)pages +
				    off, r->page_size, &info) == -1)
					return -1;
			i += n / r->page_size;
			continue;
		}
		if (n == 0 && how == DRAIN_WAKE && ring_batched(c->ring))
			return 0;
		if (n == 0)
			n = ring_read(c->ring, r->page);
		if (n == 0)
			return 0;
		if (n < 0) {
			snprintf(r->err, sizeof r->err, "cannot read CPU %d "
			    "ring buffer: %s", ring_cpu(c->ring),
			    strerror(errno));
			r->failed = true;
			return -1;
		}
		if (drain_page(r, c, r->page, n, &info) == -1)
			return -1;
		if (!final && info.data_len < cap * 3 / 4)
			return 0;
		i++;
	}
	return 0;
}
