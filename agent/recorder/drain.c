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
 *
 * The rings and what went through them are this file's alone (struct
 * drain, r->drain): the others ask (drain_count(), drain_left_unread()).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "meta.h"
#include "page.h"
#include "recorder.h"
#include "ring.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* At most this many pages of one CPU before the others get their turn. */
#define DRAIN_BURST_PAGES	256

/* One CPU's reader and what went through it. */
struct drain_cpu {
	struct ring		*ring;		/* NULL: CPU not present */
	struct drain_count	 n;
};

/* The recorder's rings. */
struct drain {
	int			 ncpus;
	struct drain_cpu	*cpu;
	uint8_t			*page;		/* a page read alone */
	int			 epfd;		/* the loop's, -1 before */
	bool			 final;		/* the last drain began */
	uint64_t		 left_unread;	/* final drain stopped: full */
};

/* The rings of r's CPUs, not open yet (drain_open()). */
struct drain *
drain_new(const struct recorder *r)
{
	struct drain *d = xcalloc(1, sizeof *d);

	d->ncpus = r->ncpus;
	d->cpu = xcalloc(d->ncpus, sizeof *d->cpu);
	d->page = xmalloc(r->page_size);
	d->epfd = -1;
	return d;
}

/* Open each CPU's reader (as root); a CPU not present is skipped. */
int
drain_open(struct recorder *r)
{
	struct drain *d = r->drain;
	int i;

	for (i = 0; i < d->ncpus; i++) {
		d->cpu[i].ring = ring_open(r->in, i, r->page_size, true);
		if (d->cpu[i].ring == NULL) {
			if (errno == ENOENT)
				continue;	/* CPU not present */
			snprintf(r->err, sizeof r->err, "cannot open CPU %d "
			    "ring buffer: %s", i, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The readers join the loop's epoll set, each by its CPU number. */
int
drain_watch(struct recorder *r, int epfd)
{
	struct drain *d = r->drain;
	struct epoll_event ev;
	int i;

	d->epfd = epfd;
	for (i = 0; i < d->ncpus; i++) {
		if (d->cpu[i].ring == NULL)
			continue;
		memset(&ev, 0, sizeof ev);
		ev.events = EPOLLIN;
		ev.data.u32 = i;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, ring_fd(d->cpu[i].ring),
		    &ev) == -1)
			return -1;
	}
	return 0;
}

/*
 * Count what one page holds (info->data_len is 0 if it cannot be parsed)
 * and hand it to the sink.
 */
static int
drain_page(struct recorder *r, struct drain_cpu *c, const void *page,
    size_t n, struct td_page_info *info)
{
	if (td_page_parse(page, r->page_size, r->commit_size, info) == 0) {
		c->n.events += info->events;
		if (info->missed) {
			c->n.missed_pages++;
			if (info->missed_stored)
				c->n.missed_events += info->missed_count;
		}
	} else
		info->data_len = 0;
	c->n.pages++;
	if (r->sink.page(r->sink.arg, ring_cpu(c->ring), page, n) == -1) {
		if ((errno == ENOSPC || errno == EDQUOT) && r->file != NULL &&
		    meta_tee_failed_arg(r->sinks) == r->file)
			r->disk_full = true;
		snprintf(r->err, sizeof r->err, "%s: %s",
		    meta_tee_what(r->sinks), strerror(errno));
		r->failed = true;
		return -1;
	}
	return 0;
}

static int
drain_read_failed(struct recorder *r, struct drain_cpu *c)
{
	snprintf(r->err, sizeof r->err, "cannot read CPU %d ring buffer: %s",
	    ring_cpu(c->ring), strerror(errno));
	r->failed = true;
	return -1;
}

/*
 * The n bytes of whole pages ring_fill() moved: read straight into the
 * sink's memory where it offers room (the network stream's open batch: no
 * copy), else into the reader's buffer, then counted and handed over.  The
 * pages read, or -1.
 */
static ssize_t
drain_batch(struct recorder *r, struct drain_cpu *c, size_t n)
{
	uint32_t k, np = (uint32_t)(n / r->page_size);
	struct td_page_info info;
	const uint8_t *pages;
	void *room = NULL;

	if (r->sink.room != NULL)
		room = r->sink.room(r->sink.arg, ring_cpu(c->ring), &np);
	if (room == NULL)	/* it may have lowered np before it failed */
		np = (uint32_t)(n / r->page_size);
	pages = ring_take(c->ring, room, (size_t)np * r->page_size);
	if (pages == NULL)
		return drain_read_failed(r, c);
	for (k = 0; k < np; k++)
		if (drain_page(r, c, pages + (size_t)k * r->page_size,
		    r->page_size, &info) == -1)
			return -1;
	if (r->drain->final && uplink_final_send(r->up) == -1) {
		r->failed = true;
		return -1;
	}
	return np;
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
 * rest stays in the ring.  Between the probes of a time-sync round
 * (DRAIN_ROUND) it is read as at a wake-up, and the network is never given
 * up.
 */
static int
drain_cpu(struct recorder *r, struct drain_cpu *c, enum record_drain how)
{
	struct td_page_info info;
	size_t cap = r->page_size - 8 - r->commit_size;
	bool final = how == DRAIN_FINAL;
	bool wake = how == DRAIN_WAKE || how == DRAIN_ROUND;
	ssize_t n;
	int i = 0;

	while (final || i < DRAIN_BURST_PAGES) {
		if (!uplink_room(r->up, final, how == DRAIN_ROUND)) {
			if (final)
				r->drain->left_unread++;
			return 0;
		}
		if ((n = ring_fill(c->ring)) > 0) {
			if ((n = drain_batch(r, c, (size_t)n)) == -1)
				return -1;
			i += (int)n;
			continue;
		}
		if (n == 0 && wake && ring_batched(c->ring))
			return 0;
		if (n == 0)
			n = ring_read(c->ring, r->drain->page);
		if (n == 0)
			return 0;
		if (n < 0)
			return drain_read_failed(r, c);
		if (drain_page(r, c, r->drain->page, (size_t)n, &info) == -1)
			return -1;
		if (r->drain->final && uplink_final_send(r->up) == -1) {
			r->failed = true;
			return -1;
		}
		if (!final && info.data_len < cap * 3 / 4)
			return 0;
		i++;
	}
	return 0;
}

/*
 * Every CPU, as how says (DRAIN_FINAL: the last drain, tracing off; then
 * the time-sync rounds drain nothing more), while the network lets the
 * rings be read; -1 when the recording cannot go on.
 */
int
drain_all(struct recorder *r, enum record_drain how)
{
	struct drain *d = r->drain;
	int i;

	if (how == DRAIN_FINAL)
		d->final = true;
	else if (d->final || r->failed)
		return 0;
	for (i = 0; i < d->ncpus; i++) {
		if (how != DRAIN_FINAL && uplink_paused(r->up))
			return 0;
		if (d->cpu[i].ring != NULL &&
		    drain_cpu(r, &d->cpu[i], how) == -1)
			return -1;
	}
	return 0;
}

/* The kernel says CPU cpu's buffer reached its watermark. */
void
drain_wake(struct recorder *r, uint32_t cpu)
{
	struct drain *d = r->drain;

	if (!uplink_paused(r->up) && cpu < (uint32_t)d->ncpus &&
	    d->cpu[cpu].ring != NULL)
		drain_cpu(r, &d->cpu[cpu], DRAIN_WAKE);
}

/*
 * The stream's watermarks (uplink_ops.pause): the rings are read again,
 * or not; while they wait the kernel counts what they lose.
 */
void
drain_pause(struct recorder *r, bool pause)
{
	struct drain *d = r->drain;
	struct epoll_event ev;
	int i;

	for (i = 0; i < d->ncpus; i++) {
		if (d->cpu[i].ring == NULL)
			continue;
		memset(&ev, 0, sizeof ev);
		ev.events = pause ? 0 : EPOLLIN;
		ev.data.u32 = i;
		epoll_ctl(d->epfd, EPOLL_CTL_MOD, ring_fd(d->cpu[i].ring), &ev);
	}
}

/* What went through CPU cpu's reader (zeros for a CPU not present). */
void
drain_count(const struct recorder *r, int cpu, struct drain_count *n)
{
	memset(n, 0, sizeof *n);
	if (r->drain != NULL && cpu >= 0 && cpu < r->drain->ncpus)
		*n = r->drain->cpu[cpu].n;
}

/* Whether the final drain left pages in a ring (no room anywhere). */
bool
drain_left_unread(const struct recorder *r)
{
	return r->drain != NULL && r->drain->left_unread != 0;
}

/* The privileged parent's copy: the readers stay, the buffer goes. */
void
drain_release(struct recorder *r)
{
	if (r->drain == NULL)
		return;
	free(r->drain->page);
	r->drain->page = NULL;
}

/* Close the readers. */
void
drain_free(struct drain *d)
{
	int i;

	if (d == NULL)
		return;
	for (i = 0; i < d->ncpus; i++)
		ring_close(d->cpu[i].ring);
	free(d->cpu);
	free(d->page);
	free(d);
}
