/*
 * recording-info.c: what the producers, the registry's users and the
 * status page read of a recording (see recording.h).  Nothing here
 * changes one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "listener.h"
#include "recording.h"
#include "recording-local.h"
#include "tally.h"
#include "tdproto.h"
#include "timesync.h"
#include "banned.h"

/* Seconds since the recording began (recording-local.h). */
double
recording_elapsed(const struct recording *r)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - r->start.tv_sec) +
	    (now.tv_nsec - r->start.tv_nsec) / 1e9;
}

bool
recording_owned(const struct recording *r)
{
	return r->owner != NULL;
}

const char *
recording_label(const struct recording *r)
{
	return r->label;
}

const char *
recording_path(const struct recording *r)
{
	return r->path;
}

const struct recording_params *
recording_params(const struct recording *r)
{
	return &r->p;
}

uint64_t
recording_trace_id(const struct recording *r)
{
	return r->trace_id;
}

uint64_t
recording_position(const struct recording *r)
{
	return r->position;
}

uint64_t
recording_acked(const struct recording *r)
{
	return r->acked;
}

uint64_t
recording_pages(const struct recording *r)
{
	return r->pages;
}

const char *
recording_why(const struct recording *r)
{
	return r->why;
}

enum recording_fault
recording_fault(const struct recording *r)
{
	return r->fault;
}

bool
recording_rewound(const struct recording *r)
{
	return r->rewound;
}

uint64_t
recording_events(const struct recording *r, uint64_t *marked)
{
	uint64_t n = 0;
	uint32_t i;

	*marked = 0;
	for (i = 0; r->cpu != NULL && i < r->p.ncpus; i++) {
		n += r->cpu[i].events;
		*marked += r->cpu[i].missed_pages;
	}
	return n;
}

void
recording_info(const struct recording *r, struct tally_rec *t)
{
	const struct td_tsync_sample *s;
	size_t dl = strlen(r->cfg->dir);
	uint32_t i, n;

	memset(t, 0, sizeof *t);
	snprintf(t->identity, sizeof t->identity, "%s", r->p.identity);
	snprintf(t->name, sizeof t->name, "%s", r->p.name);
	if (r->path != NULL)
		snprintf(t->path, sizeof t->path, "%s", strncmp(r->path,
		    r->cfg->dir, dl) == 0 ? r->path + dl + (r->path[dl] ==
		    '/') : r->path);
	t->state = r->finished ? "done" : r->rewound ? "paused" :
	    r->owner == NULL ? "waiting" : "recording";
	t->trace_id = r->trace_id;
	t->ncpus = r->p.ncpus;
	t->bytes = r->bytes;
	t->events = recording_events(r, &t->missed_pages);
	t->lost = r->lost;
	for (s = timesync_samples(r->ts, &n), i = 0; i < n; i++)
		if (s[i].bound > t->sync_bound_ns)
			t->sync_bound_ns = s[i].bound;
	t->sync_samples = n;
	t->elapsed = recording_elapsed(r);
}

/* What a chunk of count pages makes the recording hold (recording.h). */
size_t
recording_chunk_mem(const struct recording *r, uint32_t count)
{
	size_t n = (size_t)(count < TD_CHUNK_PAGES ? count : TD_CHUNK_PAGES) *
	    r->p.page_size;

	if (r->zbuf == NULL)
		n += (size_t)TD_CHUNK_PAGES * r->p.page_size;
	return n;
}
