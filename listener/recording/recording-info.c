/*
 * recording-info.c: what the producers, the registry's users and the
 * status page read of a recording (see recording.h), and what it tells
 * the outside: its checkpoint written, its files put in place (the done
 * callback).  Nothing here changes one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "listener.h"
#include "output.h"
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
	size_t dl = strlen(r->cfg->dir);
	uint32_t n;

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
	t->file_trace_id = r->p.file_trace_id;
	t->ncpus = r->p.ncpus;
	t->bytes = r->bytes;
	t->events = recording_events(r, &t->missed_pages);
	t->lost = r->lost;
	/* the bound in force: none a sample set aside at END would widen */
	timesync_samples(r->ts, &n);
	t->sync_bound_ns = timesync_bound_now(r->ts, r->p.clock);
	t->sync_samples = n;
	t->elapsed = recording_elapsed(r);
	snprintf(t->why, sizeof t->why, "%s", r->paused_why);
	t->started = (double)time(NULL) - t->elapsed;
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

/* What a checkpoint of r holds. */
static void
recording_state(struct recording *r, struct checkpoint *ck)
{
	memset(ck, 0, sizeof *ck);
	ck->params = r->p;
	ck->trace_id = r->trace_id;
	ck->position = r->position;
	ck->bytes = r->bytes;
	ck->pages = r->pages;
	ck->lost = r->lost;
	ck->elapsed_ns = (uint64_t)(recording_elapsed(r) * 1e9);
	ck->cpu = r->cpu;
	ck->ts = r->ts;
	ck->guests = r->guests;
	ck->file = r->file;
}

/* Write r's checkpoint (recording-local.h). */
int
recording_write_state(struct recording *r)
{
	struct checkpoint ck;

	recording_state(r, &ck);
	return checkpoint_write(r->state_path, &ck, &r->ck_len);
}

/* Who hears of the files put in place (recording_set_done()). */
static void	(*recording_done_cb)(const struct output_done *, void *);
static void	*recording_done_arg;

void
recording_set_done(void (*cb)(const struct output_done *, void *), void *arg)
{
	recording_done_cb = cb;
	recording_done_arg = arg;
}

void
recording_set_producer(struct recording *r, const char *producer)
{
	r->producer = producer;
}

/*
 * r's file is in place as path (recording.h).  The name the done
 * callback hears is the one in the file's name (output_sanitize()), never
 * the agent's raw --name: it reaches --on-finish commands (issue 31, row
 * 5: a name "$(touch /tmp/x)" ran in a site's command).
 */
void
recording_done(const struct recording *r, const char *path, bool complete)
{
	struct output_done d;
	char name[TD_MAX_NAME_LEN + 1];

	if (recording_done_cb == NULL)
		return;
	snprintf(name, sizeof name, "%s", r->p.name);
	output_sanitize(name);
	d.path = path;
	d.complete = complete;
	d.producer = r->producer;
	d.identity = r->p.identity;
	d.name = name;
	recording_done_cb(&d, recording_done_arg);
}
