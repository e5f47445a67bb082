/*
 * recording.c: one recording on the collection box (see recording.h).
 *
 * The life of a recording: recording_open() claims its file name, opens
 * the writer and writes the first checkpoint (from then on it survives a
 * crash of tdlisten); sections, options, pages and samples come in; a
 * checkpoint (PATH.state, checkpoint.c) is taken every few MB or 250 ms
 * and acknowledged by the producer; recording_finish() writes the
 * time-sync options and puts the file in place.  Disk, quota, descriptor
 * or memory trouble rewinds it to its last checkpoint (the writer is
 * dropped; the producer comes back later and resends from there); a lost
 * producer leaves it waiting --resume-wait seconds; a recording nobody
 * finishes is kept as NAME.incomplete.dat when enough of it arrived to be
 * read.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "checkpoint.h"
#include "clock.h"
#include "compress.h"
#include "finished.h"
#include "guests.h"
#include "hcache.h"
#include "listener.h"
#include "log.h"
#include "output.h"
#include "page.h"
#include "recording.h"
#include "recording-local.h"
#include "recording-piece.h"
#include "reclock.h"
#include "registry.h"
#include "tally.h"
#include "tdfile.h"
#include "tdproto.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

static uint64_t
recording_now_ms(void)
{
	return td_clock_now_ms();
}

/* Fail an action: -1, with whose fault and why. */
static int
recording_fail(struct recording *r, enum recording_fault fault,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
recording_fail(struct recording *r, enum recording_fault fault,
    const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	r->fault = fault;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof r->why, fmt, ap);
	va_end(ap);
	errno = e;
	return -1;
}

/*
 * Errors that a later try can get past: the disk or the quota is full, or
 * the process is out of descriptors (another recording must not end for
 * it: this one pauses and its producer comes back).
 */
static bool
recording_no_room(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EFBIG || e == EMFILE ||
	    e == ENFILE;
}

/*
 * A write failed: no room (room, with errno's reason kept) pauses, any
 * other reason (input) closes.
 */
static int
recording_write_failed(struct recording *r, const char *room,
    const char *input)
{
	if (recording_no_room(errno))
		return recording_fail(r, REC_ROOM, "%s", room);
	return recording_fail(r, REC_INPUT, "%s", input);
}

/*
 * The writer's descriptors: its file, its spools, a checkpoint, and the
 * lock that says this listener owns the recording (reclock.h).
 */
static int
recording_fds(const struct recording_params *p)
{
	return 3 + (p->ncpus < TD_WRITER_SPOOL_FDS ? (int)p->ncpus :
	    TD_WRITER_SPOOL_FDS);
}

static struct recording *
recording_alloc(const struct listener_config *cfg, const char *label)
{
	struct recording *r = xcalloc(1, sizeof *r);

	r->cfg = cfg;
	r->lockfd = -1;
	r->ts = timesync_new();
	r->producer = "tdproto";
	snprintf(r->label, sizeof r->label, "%s", label);
	return r;
}

/* Free r, keeping whatever its files hold on disk. */
static void
recording_free(struct recording *r)
{
	registry_remove(r->reg);
	budget_close(r->acct);
	td_file_release(r->file);
	td_codec_free(r->wire);
	free(r->zbuf);
	timesync_free(r->ts);
	guests_free(r->guests);
	recording_piece_free(r);
	free(r->cpu);
	free(r->path);
	free(r->state_path);
	reclock_release(r->lockfd);
	free(r);
}

/*
 * Lock r's PATH.part: from now on no other listener sharing the output
 * directory takes the recording over (reclock.h).  A filesystem without
 * locks is said once, and the recording goes on without.  -1 with errno.
 */
static int
recording_lock(struct recording *r)
{
	static bool told;
	char *part;
	int e;

	xasprintf(&part, "%s.part", r->path);
	r->lockfd = reclock_take(part);
	e = errno;
	free(part);
	if (r->lockfd != -1)
		return 0;
	if (e != ENOLCK && e != EOPNOTSUPP) {
		errno = e;
		return -1;
	}
	if (!told)
		log_warnx("'%s': no file locks here (%s): listeners that share "
		    "this directory are not kept from taking over each "
		    "other's recordings", r->cfg->dir, strerror(e));
	told = true;
	return 0;
}

/*
 * Take r back to its checkpoint at statepath: parameters (the identity
 * stays), counters, samples and the writer; its pairings too when it has
 * none (recovered), else they stay as they are (a recording rewound:
 * what its agent declared comes again, its pairings are with recordings
 * open now, and samples a host gave it are not in its stream).  -1 with
 * err.
 */
static int
recording_read_state(struct recording *r, const char *statepath, char *err,
    size_t errlen)
{
	struct checkpoint ck;
	uint64_t s;

	memset(&ck, 0, sizeof ck);
	ck.ts = timesync_new();
	if (r->guests == NULL)
		ck.guests = guests_new(r->p.identity, 0, "", r->label);
	if (checkpoint_read(statepath, &ck, r->cfg != NULL ?
	    r->cfg->codec_ctx : NULL, err, errlen) == -1) {
		timesync_free(ck.ts);
		guests_free(ck.guests);
		return -1;
	}
	if (ck.guests != NULL) {
		guests_describe(ck.guests, r->p.identity,
		    ck.params.file_trace_id, ck.params.clock);
		r->guests = ck.guests;
	}
	snprintf(ck.params.identity, sizeof ck.params.identity, "%s",
	    r->p.identity);
	r->p = ck.params;
	r->trace_id = ck.trace_id;
	r->position = r->acked = ck.position;
	r->bytes = ck.bytes;
	r->pages = ck.pages;
	r->lost = ck.lost;
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	s = ck.elapsed_ns / 1000000000;
	if (s < (uint64_t)r->start.tv_sec)
		r->start.tv_sec -= (time_t)s;
	free(r->cpu);
	r->cpu = ck.cpu;
	timesync_free(r->ts);
	r->ts = ck.ts;
	td_file_release(r->file);
	r->file = ck.file;
	if (r->path == NULL) {
		r->path = xstrdup(statepath);
		r->path[strlen(r->path) - 6] = '\0';	/* ".state" */
	}
	if (r->state_path == NULL)
		r->state_path = xstrdup(statepath);
	return 0;
}

struct recording *
recording_open(const struct listener_config *cfg,
    const struct recording_params *p, const char *label,
    void (*taken)(void *), void *arg, int conns, char *err, size_t errlen,
    enum recording_fault *fault)
{
	struct td_file_params fp;
	struct recording *r;
	char *msg = NULL, *part;
	int e;

	r = recording_alloc(cfg, label);
	r->p = *p;
	r->guests = guests_new(p->identity, p->file_trace_id, p->clock,
	    label);
	r->acct = budget_open(p->identity);
	switch (budget_fds(r->acct, recording_fds(p), conns)) {
	case BUDGET_OK:
		break;
	case BUDGET_IDENTITY:
		snprintf(err, errlen, "'%s' holds its share of the listener's "
		    "file descriptors: come back later", p->identity);
		*fault = REC_ROOM;
		goto out_free;
	default:
		snprintf(err, errlen, "the listener is out of file "
		    "descriptors: come back later");
		*fault = REC_ROOM;
		goto out_free;
	}
	if (output_path(cfg, p->identity, p->name, p->pieces != 0, &r->path,
	    &msg) == -1) {
		*fault = recording_no_room(errno) ? REC_ROOM : REC_FAIL;
		snprintf(err, errlen, "%s", msg);
		free(msg);
		goto out_free;
	}
	memset(&fp, 0, sizeof fp);
	fp.version = cfg->file_version;
	fp.codec = cfg->codec;
	fp.page_size = p->page_size;
	fp.long_size = p->long_size;
	fp.ncpus = (int)p->ncpus;
	fp.clock = p->clock;
	fp.codec_ctx = cfg->codec_ctx;
	fp.mode = cfg->file_mode;
	fp.chunk_mem = TD_WRITER_CHUNK_MEM;
	fp.spool_fds = TD_WRITER_SPOOL_FDS;
	r->file = td_file_create(r->path, &fp);
	if (r->file == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot create '%s': %s", r->path,
		    strerror(e));
		xasprintf(&part, "%s.part", r->path);
		unlink(part);		/* output_path()'s placeholder */
		free(part);
		*fault = recording_no_room(e) ? REC_ROOM : REC_FAIL;
		goto out_free;
	}
	r->cpu = xcalloc(p->ncpus, sizeof *r->cpu);
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	if (getrandom(&r->trace_id, sizeof r->trace_id, 0) == -1)
		r->trace_id = (uint64_t)time(NULL);
	/* the first checkpoint: from now on the recording survives us */
	xasprintf(&r->state_path, "%s.state", r->path);
	if (recording_lock(r) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot lock '%s.part': %s", r->path,
		    strerror(e));
		*fault = recording_no_room(e) ? REC_ROOM : REC_FAIL;
		td_file_abort(r->file);
		r->file = NULL;
		goto out_free;
	}
	if (recording_write_state(r) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot write '%s': %s", r->state_path,
		    strerror(e));
		*fault = recording_no_room(e) ? REC_ROOM : REC_FAIL;
		td_file_abort(r->file);
		r->file = NULL;
		checkpoint_remove(r->state_path);
		goto out_free;
	}
	r->reg = registry_add(r, p->identity, p->recording_id, r->trace_id);
	r->taken = taken;
	r->owner = arg;
	log_info("%s: recording %u CPUs, %u-byte pages, clock %s, into '%s'",
	    r->label, p->ncpus, p->page_size, p->clock, r->path);
	guests_start(r->guests);
	return r;
out_free:
	recording_free(r);
	return NULL;
}

int
recording_attach(struct recording *r, const char *label,
    void (*taken)(void *), void *arg, char *err, size_t errlen)
{
	if (r->owner != NULL && r->taken != NULL)
		r->taken(r->owner);	/* it lets go; it may rewind r */
	r->owner = NULL;
	r->ready = NULL;
	if (recording_cut_broken(r) != NULL) {
		snprintf(err, errlen, "%s", recording_cut_broken(r));
		log_warnx("%s: closing: %s", r->label, err);
		recording_close(r);
		return -1;
	}
	/* paused by a full disk or the quota: not back before there is room */
	if (r->rewound && (r->paused_errno == ENOSPC ||
	    r->paused_errno == EDQUOT || r->paused_errno == EFBIG) &&
	    !output_room(r->cfg, r->p.identity, TD_RESUME_ROOM)) {
		registry_set_deadline(r->reg, recording_now_ms() +
		    (uint64_t)r->cfg->resume_wait * 1000);
		return 1;
	}
	if (r->rewound) {
		if (recording_read_state(r, r->state_path, err,
		    errlen) == -1) {
			if (recording_no_room(errno) || errno == ENOMEM) {
				/* out of descriptors: it waits on */
				registry_set_deadline(r->reg,
				    recording_now_ms() +
				    (uint64_t)r->cfg->resume_wait * 1000);
				return 1;
			}
			log_warnx("%s: closing: %s", r->label, err);
			recording_close(r);
			return -1;
		}
		r->rewound = false;
	}
	registry_set_deadline(r->reg, 0);
	tally_resume();
	r->taken = taken;
	r->owner = arg;
	snprintf(r->label, sizeof r->label, "%s", label);
	guests_set_label(r->guests, label);
	return 0;
}

void
recording_detach(struct recording *r, const char *why)
{
	char acct[160];

	r->owner = NULL;
	r->taken = NULL;
	r->ready = NULL;
	if (why != NULL)
		log_warnx("%s: %s; the recording waits %d s for the agent to "
		    "resume", r->label, why, r->cfg->resume_wait);
	/* a cut copying writes the next piece's state when it is done */
	if (r->file != NULL && !r->rewound && !recording_busy(r) &&
	    recording_write_state(r) == 0)
		r->acked = r->position;
	recording_account(r, 0, acct, sizeof acct);
	registry_set_deadline(r->reg, recording_now_ms() +
	    (uint64_t)r->cfg->resume_wait * 1000);
}

void
recording_advance(struct recording *r, uint64_t n)
{
	r->position += n;
}

void
recording_received(struct recording *r, uint64_t n)
{
	r->bytes += n;
	tally_bytes(n);
}

int
recording_section_begin(struct recording *r, uint16_t id)
{
	if (td_file_section_begin(r->file, id) == -1)
		return recording_write_failed(r, "cannot write a section",
		    "bad or repeated SECTION");
	return 0;
}

int
recording_section_write(struct recording *r, const void *p, size_t n)
{
	if (td_file_section_write(r->file, p, n) == 0)
		return 0;
	if (errno == EFBIG)	/* the cap, not a disk */
		return recording_fail(r, REC_INPUT, "section too big");
	return recording_write_failed(r, "cannot write a section",
	    "section data outside a section");
}

/*
 * One decompressor per codec and one buffer serve every recording (one
 * thread): a thousand agents sending their headers at once cost no more
 * than one.
 */
int
recording_section_z(struct recording *r, uint8_t codec, const void *p,
    size_t n, size_t raw_len, const uint8_t **rawp)
{
	static struct td_codec *dz[3];
	static uint8_t *raw;

	if (codec >= 3 || raw_len > TD_SECTION_Z_RAW)
		return recording_fail(r, REC_INPUT, "bad compressed section");
	if (dz[codec] == NULL && (dz[codec] = td_codec_new(
	    codec == TD_WIRE_ZSTD ? TD_CODEC_ZSTD : TD_CODEC_ZLIB, 0)) == NULL)
		return recording_fail(r, REC_FAIL, "cannot start a "
		    "decompressor");
	if (raw == NULL)
		raw = xmalloc(TD_SECTION_Z_RAW);
	if (td_codec_decompress(dz[codec], p, n, raw, raw_len) !=
	    (ssize_t)raw_len)
		return recording_fail(r, REC_INPUT, "SECTION_DATA_Z does not "
		    "decompress to its length");
	*rawp = raw;
	return recording_section_write(r, raw, raw_len);
}

int
recording_section_end(struct recording *r)
{
	if (td_file_section_end(r->file) == -1)
		return recording_write_failed(r, "cannot write a section",
		    "SECTION_END outside a section");
	return 0;
}

int
recording_option(struct recording *r, uint16_t id, const void *p, size_t n)
{
	if (id == TD_OPT_TD_GUEST) {
		if (guests_declare(r->guests, p, n) == 0)
			return 0;
		if (errno == E2BIG)
			return recording_fail(r, REC_INPUT, "more than %d "
			    "guests declared", TD_MAX_GUESTS);
		return recording_fail(r, REC_INPUT, "malformed guest "
		    "declaration (OPTION 0x%x)", TD_OPT_TD_GUEST);
	}
	/* the listener writes them (TRACEID: when it knows the agent's;
	   DATE: unless the producer has no time sync, and its own counts) */
	if (id == TD_OPT_TIME_SHIFT || (id == TD_OPT_DATE && !r->no_tsync) ||
	    id == TD_OPT_TD_TSYNC || id == TD_OPT_GUEST ||
	    (id == TD_OPT_TRACEID && r->p.file_trace_id != 0)) {
		uint64_t v = 0;

		/* an agent's TRACEID is its HELLO's (every tdagent sends it,
		   for older listeners): nothing is dropped, nothing said */
		if (n == sizeof v)
			memcpy(&v, p, n);
		if (id != TD_OPT_TRACEID || (r->p.big_endian ? be64toh(v) :
		    le64toh(v)) != r->p.file_trace_id)
			log_debug("%s: dropped option %u from the agent: the "
			    "listener writes it", r->label, (unsigned)id);
		return 0;
	}
	if (td_file_add_option(r->file, id, p, n) == -1)
		return recording_fail(r, REC_INPUT, errno == EFBIG ?
		    "options over the listener's limit (TD_MAX_OPTIONS_TOTAL)" :
		    "bad OPTION");
	if (id == TD_OPT_CPUSTAT)
		r->lost += tally_cpustat(p, n);
	if (id == TD_OPT_TSC2NSEC && n >= 8)
		timesync_tsc2nsec(r->ts, p, r->p.big_endian);
	return 0;
}

/* cpu is declared and first_seq is its next page. */
static int
recording_check_seq(struct recording *r, uint32_t cpu, uint64_t first_seq)
{
	if (cpu >= r->p.ncpus)
		return recording_fail(r, REC_INPUT, "pages for CPU %u, but %u "
		    "CPUs were declared", cpu, r->p.ncpus);
	if (first_seq != r->cpu[cpu].next_seq)
		return recording_fail(r, REC_INPUT, "CPU %u: page %" PRIu64
		    " where %" PRIu64 " was due", cpu, first_seq,
		    r->cpu[cpu].next_seq);
	return 0;
}

int
recording_pages_begin(struct recording *r, uint32_t cpu, uint64_t first_seq)
{
	return recording_check_seq(r, cpu, first_seq);
}

/* Pages could not be written: pause on a full disk, else close. */
static int
recording_pages_failed(struct recording *r)
{
	char msg[600];

	snprintf(msg, sizeof msg, "cannot write '%s': %s", r->path,
	    strerror(errno));
	return recording_write_failed(r, "cannot write pages", msg);
}

/* Count what a page holds and hand it to the writer (unless stored). */
static int
recording_count(struct recording *r, uint32_t cpu, const uint8_t *page,
    bool write)
{
	struct recording_cpu *c = &r->cpu[cpu];
	struct td_page_info info;

	if (td_page_parse(page, r->p.page_size, r->p.commit_size,
	    &info) == 0) {
		c->events += info.events;
		if (info.missed)
			c->missed_pages++;
		tally_events(info.events, info.missed);
	}
	if (write && td_file_cpu_page(r->file, (int)cpu, page,
	    r->p.page_size) == -1)
		return recording_pages_failed(r);
	return 0;
}

int
recording_page(struct recording *r, uint32_t cpu, const void *page)
{
	if (cpu >= r->p.ncpus)
		return recording_fail(r, REC_INPUT, "pages for CPU %u, but %u "
		    "CPUs were declared", cpu, r->p.ncpus);
	if (recording_count(r, cpu, page, true) == -1)
		return -1;
	r->cpu[cpu].next_seq++;
	r->pages++;
	return 0;
}

int
recording_chunk(struct recording *r, uint32_t cpu, uint64_t first_seq,
    uint8_t codec, const void *p, size_t n, uint32_t count)
{
	enum td_codec_id id;
	size_t want;
	uint32_t i;
	bool same;

	if (recording_check_seq(r, cpu, first_seq) == -1)
		return -1;
	if (count == 0 || count > TD_CHUNK_PAGES)
		return recording_fail(r, REC_INPUT, "bad compressed pages");
	id = codec == TD_WIRE_ZSTD ? TD_CODEC_ZSTD : TD_CODEC_ZLIB;
	if (r->wire != NULL && td_codec_id(r->wire) != id) {
		td_codec_free(r->wire);
		r->wire = NULL;
	}
	if (r->wire == NULL && (r->wire = td_codec_new(id, 0)) == NULL)
		return recording_fail(r, REC_FAIL, "cannot start a "
		    "decompressor");
	if (r->zbuf == NULL)
		r->zbuf = xmalloc((size_t)TD_CHUNK_PAGES * r->p.page_size);
	want = (size_t)count * r->p.page_size;
	if (td_codec_decompress(r->wire, p, n, r->zbuf, want) !=
	    (ssize_t)want)
		return recording_fail(r, REC_INPUT, "PAGES_Z does not "
		    "decompress to its pages");
	same = td_file_chunk_codec(r->file) == id;
	for (i = 0; i < count; i++)
		if (recording_count(r, cpu, r->zbuf +
		    (size_t)i * r->p.page_size, !same) == -1)
			return -1;
	if (same && td_file_cpu_chunk(r->file, (int)cpu, p, n, count) == -1)
		return recording_pages_failed(r);
	r->cpu[cpu].next_seq += count;
	r->pages += count;
	return 0;
}

void
recording_lost_pages(struct recording *r, uint64_t n)
{
	r->lost_pages += n;
}

void
recording_no_tsync(struct recording *r)
{
	r->no_tsync = true;
}

void
recording_sample(struct recording *r, const struct td_tsync_sample *s)
{
	if (!timesync_add(r->ts, s))
		return;
	guests_host_sample(r->guests, s);
	log_debug("%s: time sync round %u: offset %" PRId64 " at %" PRIu64
	    ", +-%" PRIu64 " ns, %u probes", r->label, s->round, s->offset,
	    s->ts, s->bound, s->probes);
}

int
recording_finish(struct recording *r, const uint64_t *pages, uint32_t ncpus,
    struct finished *d)
{
	size_t dl = strlen(r->cfg->dir);
	uint32_t i;

	recording_cut_settle(r);	/* its owner waits for a cut: not here */
	if (recording_cut_broken(r) != NULL)
		return recording_fail(r, REC_FAIL, "%s", recording_cut_broken(r));
	for (i = 0; i < ncpus && i < r->p.ncpus; i++)
		if (pages[i] != r->cpu[i].next_seq)
			return recording_fail(r, REC_INPUT, "CPU %u: the agent "
			    "sent %" PRIu64 " pages, %" PRIu64 " arrived", i,
			    pages[i], r->cpu[i].next_seq);
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		if (!td_file_has_section(r->file, i))
			return recording_fail(r, REC_INPUT, "END before "
			    "section %u", i);
	/* the listener's options, and the file in place (a piece's too) */
	if (recording_seal(r) == -1) {
		if (recording_no_room(errno))
			return recording_fail(r, REC_ROOM, "cannot finish the "
			    "file");
		return recording_fail(r, REC_FAIL, "cannot finish '%s': %s",
		    r->path, strerror(errno));
	}
	checkpoint_remove(r->state_path);
	r->finished = true;
	guests_finish(r->guests);
	memset(d, 0, sizeof *d);
	snprintf(d->identity, sizeof d->identity, "%s", r->p.identity);
	d->recording_id = r->p.recording_id;
	d->end_off = r->position;
	d->size = td_file_size(r->file);
	snprintf(d->path, sizeof d->path, "%s", r->path + dl +
	    (r->path[dl] == '/'));
	/* done: nobody resumes it now, a late producer is told DONE */
	registry_remove(r->reg);
	r->reg = NULL;
	registry_finished(d);
	log_info("%s: wrote '%s' (%" PRIu64 " bytes)", r->label, r->path,
	    d->size);
	recording_done(r, r->path, true);
	if (recording_policy != NULL)
		recording_policy->last(r);
	return 0;
}

int
recording_checkpoint(struct recording *r, uint64_t *acked)
{
	char msg[600];
	bool sealed;

	*acked = r->acked;
	if (recording_cut_broken(r) != NULL) {
		errno = EIO;
		return recording_fail(r, REC_FAIL, "%s", recording_cut_broken(r));
	}
	/* a cut copying: its own first checkpoint comes when it is done */
	if (r->file == NULL || r->finished || r->rewound || recording_busy(r) ||
	    r->position == r->acked)
		return 0;
	/* state writes stay within TD_CK_AMPLIFY x what arrived */
	if ((r->position - r->acked) * TD_CK_AMPLIFY < r->ck_len)
		return 0;
	/* its own header cache entries count too (issue 28) */
	if (r->cfg->quota > 0 && output_usage(r->cfg->dir, r->p.identity) +
	    hcache_usage(r->cfg->hcache, r->p.identity) > r->cfg->quota) {
		errno = EDQUOT;
		return recording_fail(r, REC_ROOM, "over the --quota of this "
		    "identity");
	}
	/* --rotate: a cut here writes the next piece's first checkpoint */
	if (recording_policy != NULL &&
	    recording_policy->check(r, &sealed, msg, sizeof msg) == -1)
		return recording_fail(r, !sealed && recording_no_room(errno) ?
		    REC_ROOM : REC_FAIL, "%s", msg);
	*acked = r->acked;
	if (r->acked == r->position)
		return 0;
	if (recording_write_state(r) == -1) {
		if (errno == EBUSY)
			return 0;	/* a zlib section is open: later */
		if (recording_no_room(errno))
			return recording_fail(r, REC_ROOM, "cannot write the "
			    "checkpoint");
		snprintf(msg, sizeof msg, "cannot write '%s': %s",
		    r->state_path, strerror(errno));
		return recording_fail(r, REC_FAIL, "%s", msg);
	}
	r->acked = r->position;
	r->paused_why[0] = '\0';	/* going on: no longer paused */
	r->paused_errno = 0;
	*acked = r->acked;
	return 0;
}

void
recording_rewind(struct recording *r, const char *what, int errnum)
{
	/* "over the --quota ...", "over the memory budget ...": no strerror */
	bool over = what != NULL && strncmp(what, "over ", 5) == 0;

	/* the checkpoint to go back to is the next piece's: done first */
	recording_cut_settle(r);
	if (what != NULL) {
		log_warnx("%s: %s%s%s; the recording pauses, the agent keeps "
		    "its data and resumes when there is room", r->label, what,
		    over ? "" : ": ", over ? "" : strerror(errnum));
		snprintf(r->paused_why, sizeof r->paused_why, "%s%s%s", what,
		    over ? "" : ": ", over ? "" : strerror(errnum));
		r->paused_errno = errnum;
	}
	td_file_release(r->file);
	r->file = NULL;
	r->rewound = true;
	r->position = r->acked;
	free(r->zbuf);
	r->zbuf = NULL;
}

/*
 * What a recording makes the listener hold: its writer's buffers and
 * options, decompressed pages, time-sync samples.
 */
static uint64_t
recording_held(const struct recording *r)
{
	uint64_t n = sizeof *r + (uint64_t)r->p.ncpus * sizeof *r->cpu +
	    timesync_mem(r->ts) + guests_mem(r->guests);

	if (r->file != NULL)
		n += td_file_mem(r->file);
	if (r->zbuf != NULL)
		n += (uint64_t)TD_CHUNK_PAGES * r->p.page_size;
	return n + recording_piece_mem(r);
}

int
recording_account(struct recording *r, uint64_t extra, char *why,
    size_t whylen)
{
	enum budget_over o;

	if (r->acct == NULL)
		return 0;
	o = budget_set(r->acct, recording_held(r) + extra);
	if (o == BUDGET_OK)
		return 0;
	snprintf(why, whylen, "over %s", budget_over_name(o));
	return -1;
}

/*
 * Keep what a broken recording delivered as NAME.incomplete.dat when it is
 * a readable trace (output_keep_partial()), and say so.
 */
static void
recording_keep_partial(struct recording *r)
{
	char *final;

	if (output_keep_partial(r->file, r->path, &final) == -1) {
		log_warnx("%s: too little was received to keep a file",
		    r->label);
		return;
	}
	log_warnx("%s: kept what was received as '%s'", r->label, final);
	recording_done(r, final, false);
	free(final);
}

void
recording_close(struct recording *r)
{
	struct tally_rec t;
	uint64_t events, marked;
	char err[600];

	recording_cut_stop(r, false);	/* the piece in place is what is kept */
	if (r->rewound && !r->finished) {
		/* what the checkpoint holds is what can be kept */
		if (recording_read_state(r, r->state_path, err,
		    sizeof err) == -1)
			log_warnx("%s: %s", r->label, err);
		r->rewound = false;
	}
	if (r->file != NULL) {
		if (!r->finished)
			recording_keep_partial(r);
		td_file_free(r->file);
		r->file = NULL;
	}
	if (!r->finished)
		checkpoint_remove(r->state_path);
	recording_info(r, &t);
	t.state = r->finished ? "done" : "ended early";
	tally_ended(&t);
	events = recording_events(r, &marked);
	if (r->lost_pages > 0)
		snprintf(err, sizeof err, ", %" PRIu64 " pages lost on the way",
		    r->lost_pages);
	else
		err[0] = '\0';
	log_info("%s: %s after %.2f s: %u CPUs, %" PRIu64 " pages, %" PRIu64
	    " bytes, %" PRIu64 " events, %" PRIu64 " lost (%" PRIu64
	    " pages marked%s)", r->label, r->finished ? "done" :
	    "ended early", recording_elapsed(r), r->p.ncpus, r->pages,
	    r->bytes, events, r->lost, marked, err);
	recording_free(r);
}

void
recording_leave(struct recording *r)
{
	recording_cut_stop(r, true);	/* the cut begins again at the next start */
	if (r->file != NULL && !r->rewound && !r->finished &&
	    recording_write_state(r) == -1 && errno != EBUSY)
		log_warnx("%s: cannot write '%s': %s", r->label,
		    r->state_path, strerror(errno));
	if (!r->finished)
		log_info("%s: left '%s' to be resumed", r->label, r->path);
	recording_free(r);
}

void
recording_expire(void)
{
	struct recording *r;

	while ((r = registry_expired(recording_now_ms())) != NULL) {
		log_warnx("%s: closing: the agent did not come back to resume",
		    r->label);
		recording_close(r);
	}
}

void
recording_leave_all(void)
{
	struct recording *r;

	while ((r = registry_any()) != NULL)
		recording_leave(r);
	if (recording_policy != NULL)
		recording_policy->cleanup();
}

/*
 * Before recovering the recording of statepath: take its lock, unless
 * another listener sharing the directory holds it (-1: it is that
 * listener's, leave it alone), or the recording ended meanwhile (-1).  A
 * .part that is not there, or a filesystem without locks, leaves it to
 * recovery as before (0).
 */
static int
recording_claim(struct recording *r, const char *statepath)
{
	char *part;
	int e;

	xasprintf(&part, "%.*s.part", (int)strlen(statepath) - 6, statepath);
	r->lockfd = reclock_take(part);
	e = errno;
	free(part);
	if (r->lockfd == -1 && e == EAGAIN) {
		log_warnx("'%s': another tdlisten holds this recording (its "
		    ".part is locked): not recovered", statepath);
		return -1;
	}
	if ((r->lockfd == -1 && e == ESTALE) ||
	    (r->lockfd != -1 && access(statepath, F_OK) == -1)) {
		log_debug("'%s': ended by another tdlisten meanwhile",
		    statepath);
		return -1;
	}
	return 0;
}

/* recording_recover() of statepath: the recording, or NULL (logged). */
static struct recording *
recording_recover_state(const struct listener_config *cfg,
    const char *identity, const char *statepath)
{
	struct recording *r;
	char err[600], name[TD_MAX_NAME_LEN + 1];

	r = recording_alloc(cfg, "recovered");
	snprintf(r->p.identity, sizeof r->p.identity, "%s", identity);
	if (recording_claim(r, statepath) == -1) {
		recording_free(r);
		return NULL;
	}
	if (recording_read_state(r, statepath, err, sizeof err) == -1) {
		log_warnx("cannot recover a recording: %s; its files stay",
		    err);
		recording_free(r);
		return NULL;
	}
	if (r->p.name[0] != '\0') {
		snprintf(name, sizeof name, "%s", r->p.name);
		output_sanitize(name);
		snprintf(r->label, sizeof r->label, "session %s '%s'",
		    identity, name);
	} else
		snprintf(r->label, sizeof r->label, "session %s", identity);
	/*
	 * The checkpoint does not say who produced it: trace-cmd clients'
	 * recordings are the ones under tracecmd-<address> (tracecmd.c).
	 */
	if (strncmp(identity, "tracecmd-", 9) == 0)
		r->producer = "tracecmd";
	r->acct = budget_open(identity);
	/* it exists already: recovered even past the budget (uncounted) */
	if (budget_fds(r->acct, recording_fds(&r->p), 0) != BUDGET_OK)
		log_warnx("%s: recovered beyond the descriptor budget",
		    r->label);
	recording_account(r, 0, err, sizeof err);
	r->reg = registry_add(r, identity, r->p.recording_id, r->trace_id);
	registry_set_deadline(r->reg, recording_now_ms() +
	    (uint64_t)cfg->resume_wait * 1000);
	guests_set_label(r->guests, r->label);
	guests_start(r->guests);
	log_info("%s: recovered '%s' at offset %" PRIu64 " (%" PRIu64
	    " pages); waiting %d s for the agent to resume", r->label, r->path,
	    r->position, r->pages, cfg->resume_wait);
	return r;
}

void
recording_recover(const struct listener_config *cfg, const char *identity,
    const char *statepath)
{
	struct recording *r;
	char *next, *done;

	if (cfg->resume_wait == 0) {
		log_warnx("'%s': not recovered (--resume-wait 0)", statepath);
		return;
	}
	if (recording_policy != NULL && recording_policy->recovered(statepath))
		return;
	/* stopped in a cut (rotate.h): the next piece's state instead */
	next = NULL;
	done = NULL;
	if (recording_policy != NULL)
		next = recording_policy->recover(cfg, identity, statepath,
		    &done);
	r = recording_recover_state(cfg, identity, next != NULL ? next :
	    statepath);
	if (r != NULL && done != NULL)
		recording_done(r, done, true);
	free(done);
	free(next);
}

/*
 * At start: every DIR/IDENTITY/NAME.dat.state is a recording an earlier
 * tdlisten had not finished.  Each is restored to its checkpoint and waits
 * for its producer; if none comes, it is kept as incomplete.
 */
void
recording_recover_all(const struct listener_config *cfg)
{
	output_states(cfg, recording_recover);
}
