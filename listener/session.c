/*
 * session.c: one agent's connection and recording in tdlisten.
 *
 * A session owns its bufferevent (TLS or plain), its timers and its
 * trace.dat writer; session_close() is the only function that frees it.
 * The read callback cuts the input into frames and dispatches on the
 * session's state:
 *
 *	S_HANDSHAKE	TLS handshake running (plain: skipped)
 *	S_HELLO		waiting for HELLO; the handshake timeout still runs
 *	S_STREAM	sections, options and pages go to the writer
 *	S_DONE		END received, file complete, DONE sent; flushing
 *	S_CLOSING	closed for a reason, the ERROR is being flushed
 *
 * Anything a peer sends that does not fit (a bad frame, a message out of
 * order, a page of an undeclared CPU, a sequence gap) closes this session
 * with a logged reason and nothing else; what was received is kept as a
 * readable file marked ".incomplete" when enough of it came.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>

#include "buf.h"
#include "budget.h"
#include "compress.h"
#include "listener.h"
#include "session.h"
#include "log.h"
#include "page.h"
#include "tdfile.h"
#include "tdproto.h"
#include "tls.h"
#include "xmalloc.h"
#include "banned.h"

/* Checkpoint and acknowledge at least this often. */
#define SESSION_CK_BYTES	(4u * 1024 * 1024)
#define SESSION_CK_MS		250
static struct session *session_list;
static struct event *session_tick_ev;

static void	session_read_cb(struct bufferevent *, void *);
static void	session_write_cb(struct bufferevent *, void *);
static void	session_event_cb(struct bufferevent *, short, void *);
static void	session_detach(struct session *, const char *);

static double
session_elapsed(const struct session *s)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - s->start.tv_sec) +
	    (now.tv_nsec - s->start.tv_nsec) / 1e9;
}

static void
session_send(struct session *s)
{
	bufferevent_write(s->bev, s->out.data, s->out.len);
	td_buf_reset(&s->out);
}

static uint64_t
session_events(const struct session *s, uint64_t *marked)
{
	uint64_t n = 0;
	uint32_t i;

	*marked = 0;
	for (i = 0; s->cpu != NULL && i < s->hello.ncpus; i++) {
		n += s->cpu[i].events;
		*marked += s->cpu[i].missed_pages;
	}
	return n;
}

/*
 * Keep what a broken session delivered if it is a readable trace: every
 * section up to PRINTK is there.  It is finished (with empty command lines
 * if they never came) and renamed to NAME.incomplete.dat.
 */
static void
session_keep_partial(struct session *s)
{
	static const enum td_opt need[] = { TD_OPT_HEADER_INFO,
	    TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS, TD_OPT_KALLSYMS,
	    TD_OPT_PRINTK };
	char *inc, *dot;
	uint64_t zero = 0;
	size_t i;

	td_file_section_cancel(s->file);	/* fails if none is open */
	for (i = 0; i < sizeof need / sizeof *need; i++)
		if (!td_file_has_section(s->file, need[i]))
			goto drop;
	if (!td_file_has_section(s->file, TD_OPT_CMDLINES) &&
	    td_file_section_add(s->file, TD_OPT_CMDLINES, &zero,
	    sizeof zero) == -1)
		goto drop;
	if (td_file_finish(s->file) == -1)
		goto drop;
	xasprintf(&inc, "%s", s->path);
	dot = strrchr(inc, '.');
	if (dot != NULL)
		*dot = '\0';
	{
		char *final;

		xasprintf(&final, "%s.incomplete.dat", inc);
		if (rename(s->path, final) == 0)
			log_warnx("%s: kept what was received as '%s'",
			    s->label, final);
		free(final);
	}
	free(inc);
	return;
drop:
	td_file_abort(s->file);
	log_warnx("%s: too little was received to keep a file", s->label);
}

static void
session_free(struct session *s)
{
	if (s->timer != NULL)
		event_free(s->timer);
	if (s->wait != NULL)
		event_free(s->wait);
	if (s->bev != NULL)
		bufferevent_free(s->bev);
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		session_list = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	if (s->counted)
		server_session_closed(s);
	budget_close(s->acct);
	td_file_release(s->file);	/* only if still open: keep it */
	td_codec_free(s->wire);
	free(s->zbuf);
	td_buf_free(&s->out);
	free(s->samples);
	free(s->cpu);
	free(s->path);
	free(s->state_path);
	free(s);
}

/*
 * Whether all that was written went out.  A write callback does not say
 * so by itself: libevent runs it deferred after every drain of the output,
 * and one for an earlier frame may come after the last was queued.
 */
static bool
session_sent_all(struct bufferevent *bev)
{
	return evbuffer_get_length(bufferevent_get_output(bev)) == 0;
}

/* The ERROR went out (or could not): now the session can go. */
static void
session_closing_write_cb(struct bufferevent *bev, void *arg)
{
	if (session_sent_all(bev))
		session_free(arg);
}

static void
session_closing_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session_free(arg);
}

static void
session_closing_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	session_free(arg);
}

/*
 * What a session makes the listener hold: its writer's buffers and options,
 * decompressed pages, time-sync samples, what waits to be sent or handled.
 */
static uint64_t
session_held(const struct session *s)
{
	uint64_t n = sizeof *s + s->out.cap +
	    (uint64_t)s->hello.ncpus * sizeof *s->cpu +
	    (uint64_t)(s->nsamples + 63) / 64 * 64 * sizeof *s->samples;

	if (s->file != NULL)
		n += td_file_mem(s->file);
	if (s->zbuf != NULL)
		n += (uint64_t)TD_CHUNK_PAGES * s->hello.page_size;
	if (s->bev != NULL)
		n += evbuffer_get_length(bufferevent_get_output(s->bev)) +
		    evbuffer_get_length(bufferevent_get_input(s->bev));
	return n;
}

/* Bring s's memory account up to date; which cap it passes. */
static enum budget_over
session_account(struct session *s)
{
	if (s->acct == NULL)
		return BUDGET_OK;
	return budget_set(s->acct, session_held(s));
}

static void	session_pause(struct session *, const char *);

/*
 * Whether a streaming session must stop for now: over a memory budget (it
 * is paused: its agent comes back later, from the last checkpoint, and
 * what it held is given back), or with more than TD_MAX_UNSENT of replies
 * its agent does not read (reading stops until they go; an agent that
 * never reads is let go after the idle timeout).  Nobody else notices.
 */
static bool
session_hold_back(struct session *s)
{
	enum budget_over o;
	char why[160];

	if (s->state != S_STREAM)
		return false;
	if (s->file != NULL && (o = session_account(s)) != BUDGET_OK) {
		snprintf(why, sizeof why, "over %s", budget_over_name(o));
		errno = ENOMEM;
		session_pause(s, why);
		return true;
	}
	if (evbuffer_get_length(bufferevent_get_output(s->bev)) <=
	    TD_MAX_UNSENT)
		return false;
	if (!s->out_blocked) {
		struct timeval tv = { s->cfg->idle_timeout, 0 };

		log_debug("%s: %zu bytes of replies unread: not reading "
		    "(%zu bytes received wait)", s->label,
		    evbuffer_get_length(bufferevent_get_output(s->bev)),
		    evbuffer_get_length(bufferevent_get_input(s->bev)));
		s->out_blocked = true;
		bufferevent_disable(s->bev, EV_READ);
		bufferevent_setwatermark(s->bev, EV_WRITE, TD_MAX_UNSENT / 2,
		    0);
		bufferevent_set_timeouts(s->bev, NULL,
		    s->cfg->idle_timeout > 0 ? &tv : NULL);
	}
	return true;
}

/*
 * Close a session for a reason (NULL: normal end).  Its recording is
 * finished or kept as incomplete at once; when there is a reason the agent
 * can hear, an ERROR goes out first and the session is freed once it is
 * written (at most two seconds later), so callers must not touch s after
 * this call either way.
 */
static void	session_close_code(struct session *, uint32_t, const char *);

void
session_close(struct session *s, const char *why)
{
	session_close_code(s, TD_ERR_FATAL, why);
}

/* Close, telling the agent whether coming back can help (code). */
static void
session_close_code(struct session *s, uint32_t code, const char *why)
{
	struct timeval tv = { 2, 0 };
	uint64_t events, marked;
	bool tell;

	if (s->state == S_CLOSING)
		return;
	tell = why != NULL && s->bev != NULL && s->state != S_HANDSHAKE &&
	    s->state != S_DONE;
	if (why != NULL && s->state == S_HANDSHAKE)
		admit_refused(ADMIT_R_FAILED, "%s: closing: %s", s->label, why);
	else if (why != NULL)
		log_warnx("%s: closing: %s", s->label, why);
	if (s->restore && s->state == S_STREAM) {
		char err[512];

		/* what the checkpoint holds is what can be kept */
		if (checkpoint_read(s, s->state_path, err, sizeof err) == -1)
			log_warnx("%s: %s", s->label, err);
		s->restore = false;
	}
	if (s->file != NULL) {
		if (s->state != S_DONE)
			session_keep_partial(s);
		td_file_free(s->file);
		s->file = NULL;
	}
	if (s->state == S_STREAM)
		checkpoint_remove(s);
	if (s->state == S_STREAM || s->state == S_DONE) {
		events = session_events(s, &marked);
		log_info("%s: %s after %.2f s: %u CPUs, %" PRIu64 " pages, "
		    "%" PRIu64 " bytes, %" PRIu64 " events, %" PRIu64
		    " lost (%" PRIu64 " pages marked)", s->label,
		    s->state == S_DONE ? "done" : "ended early",
		    session_elapsed(s), s->hello.ncpus, s->pages, s->bytes,
		    events, s->lost, marked);
	}
	if (!tell) {
		session_free(s);
		return;
	}
	/* tell the agent why, then go */
	s->state = S_CLOSING;
	td_buf_reset(&s->out);
	td_msg_pack_error(&s->out, code, why);
	bufferevent_disable(s->bev, EV_READ);
	bufferevent_setcb(s->bev, NULL, session_closing_write_cb,
	    session_closing_event_cb, s);
	bufferevent_write(s->bev, s->out.data, s->out.len);
	if (s->timer != NULL)
		event_free(s->timer);
	s->timer = evtimer_new(bufferevent_get_base(s->bev),
	    session_closing_timer_cb, s);
	evtimer_add(s->timer, &tv);
}

/* Arm the idle timeout of a streaming session. */
static void
session_idle(struct session *s)
{
	struct timeval tv = { s->cfg->idle_timeout, 0 };

	bufferevent_set_timeouts(s->bev, s->cfg->idle_timeout > 0 ? &tv :
	    NULL, NULL);
}

static void
session_wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	session_close(s, "the agent did not come back to resume");
}

/* The ERROR RETRY went out: now let go of the connection. */
static void
session_detach_write_cb(struct bufferevent *bev, void *arg)
{
	if (session_sent_all(bev))
		session_detach(arg, NULL);
}

static void
session_detach_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session_detach(arg, NULL);
}

/*
 * The connection went in the middle of a SECTION_DATA or PAGES frame (see
 * session_bulk_begin()): the writer holds part of a frame the agent will
 * send again whole, so the recording goes back to its last checkpoint,
 * which never holds part of a frame.
 */
static void
session_bulk_cut(struct session *s)
{
	if (s->bulk_type == 0)
		return;
	s->bulk_type = 0;
	if (s->file != NULL) {
		td_file_release(s->file);
		s->file = NULL;
	}
	s->restore = true;
	s->rx_off = s->ack_off;
}

/*
 * The connection is gone but the recording is not: keep it (checkpointed,
 * unless a zlib section is open) for the agent to resume within
 * --resume-wait.
 */
static void
session_detach(struct session *s, const char *why)
{
	struct timeval tv = { s->cfg->resume_wait, 0 };

	if (s->cfg->resume_wait == 0) {
		session_close(s, why);
		return;
	}
	if (why != NULL)
		log_warnx("%s: %s; the recording waits %d s for the agent to "
		    "resume", s->label, why, s->cfg->resume_wait);
	if (s->bev != NULL) {
		bufferevent_free(s->bev);
		s->bev = NULL;
	}
	s->out_blocked = false;
	if (s->counted) {
		server_session_closed(s);
		s->counted = false;
	}
	session_bulk_cut(s);
	if (s->file != NULL && !s->restore && checkpoint_write(s) == 0)
		s->ack_off = s->rx_off;
	session_account(s);
	if (s->wait == NULL)
		s->wait = evtimer_new(s->base, session_wait_cb, s);
	evtimer_add(s->wait, &tv);
}

/*
 * The disk refused a write: what is in memory is no longer sure, the last
 * checkpoint is.  Drop the writer, tell the agent to come back later (it
 * keeps everything after the last ACK) and wait for it: its resume starts
 * again from the checkpoint, and succeeds once there is room.
 */
static void
session_pause(struct session *s, const char *what)
{
	struct timeval tv = { 5, 0 };
	char msg[300];
	/* "over the --quota ...", "over the memory budget ...": no strerror */
	bool quota = strncmp(what, "over ", 5) == 0;
	const char *tell;

	if (errno == EMFILE || errno == ENFILE)
		tell = "the listener is out of file descriptors: come back "
		    "later";
	else if (errno == ENOMEM)
		tell = "the listener's memory budget is spent: come back later";
	else if (errno == EDQUOT && quota)
		tell = "this identity is over the listener's quota: come back "
		    "later";
	else
		tell = "the listener's disk is full: come back later";

	if (s->cfg->resume_wait == 0) {
		/* nothing can wait for room: what is safe is kept */
		snprintf(msg, sizeof msg, "%s: %s", what, strerror(errno));
		td_file_release(s->file);
		s->file = NULL;
		s->restore = true;
		session_close(s, msg);
		return;
	}
	log_warnx("%s: %s%s%s; the recording pauses, the agent keeps its "
	    "data and resumes when there is room", s->label, what,
	    quota ? "" : ": ", quota ? "" : strerror(errno));
	td_file_release(s->file);
	s->file = NULL;
	s->restore = true;
	s->rx_off = s->ack_off;
	s->bulk_type = 0;
	free(s->zbuf);
	s->zbuf = NULL;
	if (s->bev == NULL) {
		session_detach(s, NULL);
		return;
	}
	td_buf_reset(&s->out);
	td_msg_pack_error(&s->out, TD_ERR_RETRY, tell);
	s->out_blocked = false;
	bufferevent_setwatermark(s->bev, EV_WRITE, 0, 0);
	bufferevent_disable(s->bev, EV_READ);
	bufferevent_setcb(s->bev, NULL, session_detach_write_cb,
	    session_detach_event_cb, s);
	bufferevent_set_timeouts(s->bev, NULL, &tv);
	bufferevent_write(s->bev, s->out.data, s->out.len);
	td_buf_reset(&s->out);
}

/*
 * Errors that a later try can get past: the disk or the quota is full, or
 * the process is out of descriptors (another agent's recording must not
 * end for it: this one pauses and its agent comes back).
 */
static bool
session_disk_full(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EFBIG || e == EMFILE ||
	    e == ENFILE;
}

/*
 * Checkpoint and acknowledge what arrived.  Returns -1 when the session
 * was paused or closed (the caller stops handling it).
 */
static int
session_checkpoint(struct session *s)
{
	char msg[600];

	if (s->file == NULL || s->state != S_STREAM || s->restore ||
	    s->rx_off == s->ack_off || s->bulk_type != 0)
		return 0;
	/* state writes stay within TD_CK_AMPLIFY x what arrived */
	if ((s->rx_off - s->ack_off) * TD_CK_AMPLIFY < s->ck_len)
		return 0;
	if (s->cfg->quota > 0 &&
	    output_usage(s->cfg->dir, s->identity) > s->cfg->quota) {
		errno = EDQUOT;
		session_pause(s, "over the --quota of this identity");
		return -1;
	}
	if (checkpoint_write(s) == -1) {
		if (errno == EBUSY)
			return 0;	/* a zlib section is open: later */
		if (session_disk_full(errno)) {
			session_pause(s, "cannot write the checkpoint");
			return -1;
		}
		snprintf(msg, sizeof msg, "cannot write '%s': %s",
		    s->state_path, strerror(errno));
		session_close(s, msg);
		return -1;
	}
	s->ack_off = s->rx_off;
	if (s->bev != NULL) {
		td_msg_pack_ack(&s->out, s->ack_off);
		session_send(s);
	}
	return 0;
}

/* Every SESSION_CK_MS: checkpoint whatever arrived since the last one. */
static void
session_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s, *next;

	for (s = session_list; s != NULL; s = next) {
		next = s->next;
		if (s->bev != NULL)
			session_checkpoint(s);
	}
}

static void
session_tick_start(struct event_base *base)
{
	struct timeval tv = { 0, SESSION_CK_MS * 1000 };

	if (session_tick_ev != NULL)
		return;
	session_tick_ev = event_new(base, -1, EV_PERSIST, session_tick_cb,
	    NULL);
	event_add(session_tick_ev, &tv);
}

/* A finished recording, for an agent that comes back for its DONE. */
static void
session_remember(const struct session *s, uint64_t size, const char *path)
{
	struct finished d;

	memset(&d, 0, sizeof d);
	snprintf(d.identity, sizeof d.identity, "%s", s->identity);
	d.recording_id = s->hello.recording_id;
	d.end_off = s->rx_off;
	d.size = size;
	snprintf(d.path, sizeof d.path, "%s", path);
	finished_add(&d);
}

static void
session_welcome(struct session *s, bool resumed)
{
	struct td_welcome w;

	memset(&w, 0, sizeof w);
	w.version = TD_PROTO_VERSION;
	w.flags = resumed ? TD_WELCOME_RESUMED : 0;
	w.tsync_interval = s->cfg->tsync_interval;
	w.session_id = s->session_id;
	w.resume_offset = s->rx_off;
	w.idle_timeout = (uint32_t)s->cfg->idle_timeout;
	snprintf(w.identity, sizeof w.identity, "%s", s->identity);
	td_msg_pack_welcome(&s->out, &w);
	session_send(s);
}

/*
 * HELLO with TD_HELLO_RESUME: the agent comes back for a recording of its
 * identity.  The recording takes this connection over (dropping a stale
 * one the listener had not noticed was dead) and goes on from its offset.
 * Returns -1: s is gone either way (freed, or closed).
 */
static int
session_resume(struct session *s, const struct td_frame *f)
{
	const struct finished *e;
	struct session *t;
	struct td_done d;
	char err[600];

	for (t = session_list; t != NULL; t = t->next)
		if (t != s && t->state == S_STREAM &&
		    t->hello.recording_id == s->hello.recording_id &&
		    strcmp(t->identity, s->identity) == 0)
			break;
	if (t == NULL) {
		if ((e = finished_find(s->identity,
		    s->hello.recording_id)) != NULL) {
			/* it is done: say so again */
			clock_gettime(CLOCK_MONOTONIC, &s->start);
			s->rx_off = e->end_off;
			session_welcome(s, true);
			memset(&d, 0, sizeof d);
			d.file_size = e->size;
			snprintf(d.path, sizeof d.path, "%s", e->path);
			td_msg_pack_done(&s->out, &d);
			session_send(s);
			s->state = S_DONE;
			log_info("%s: the agent came back for its DONE ('%s')",
			    s->label, e->path);
			return 0;
		}
		snprintf(err, sizeof err, "no recording %016" PRIx64 " to "
		    "resume (it ended, expired or was never here)",
		    s->hello.recording_id);
		session_close(s, err);
		return -1;
	}
	if (t->hello.ncpus != s->hello.ncpus ||
	    t->hello.page_size != s->hello.page_size ||
	    t->hello.commit_size != s->hello.commit_size ||
	    t->hello.long_size != s->hello.long_size ||
	    strcmp(t->hello.clock, s->hello.clock) != 0) {
		session_close(s, "the resumed recording does not match");
		return -1;
	}
	session_bulk_cut(t);
	if (t->restore) {
		if (checkpoint_read(t, t->state_path, err, sizeof err) == -1) {
			session_close(s, "the recording cannot be resumed");
			session_close(t, err);
			return -1;
		}
		t->restore = false;
	}
	if (t->bev != NULL) {
		log_warnx("%s: a new connection from %s takes over", t->label,
		    s->peer);
		bufferevent_free(t->bev);
		t->bev = NULL;
	}
	if (t->counted)
		server_session_closed(t);
	if (t->wait != NULL)
		evtimer_del(t->wait);
	/* the HELLO is handled: the rest of the input is t's */
	evbuffer_drain(bufferevent_get_input(s->bev), f->total);
	t->bev = s->bev;
	t->out_blocked = false;
	t->counted = s->counted;
	s->bev = NULL;
	s->counted = false;
	snprintf(t->peer, sizeof t->peer, "%s", s->peer);
	if (t->hello.name[0] != '\0') {
		char name[TD_MAX_NAME_LEN + 1];

		snprintf(name, sizeof name, "%s", t->hello.name);
		output_sanitize(name);
		snprintf(t->label, sizeof t->label, "session %s '%s' (%s)",
		    t->identity, name, t->peer);
	} else
		snprintf(t->label, sizeof t->label, "session %s (%s)",
		    t->identity, t->peer);
	bufferevent_setcb(t->bev, session_read_cb, session_write_cb,
	    session_event_cb, t);
	bufferevent_setwatermark(t->bev, EV_READ, 0, 0);
	session_idle(t);
	session_welcome(t, true);
	log_info("%s: resumed at offset %" PRIu64 " (%" PRIu64 " pages so "
	    "far)", t->label, t->rx_off, t->pages);
	session_free(s);
	if (evbuffer_get_length(bufferevent_get_input(t->bev)) > 0)
		session_read_cb(t->bev, t);
	return -1;
}

/* Recordings of an identity that are open or waiting to resume. */
static int
session_count(const char *identity)
{
	struct session *t;
	int n = 0;

	for (t = session_list; t != NULL; t = t->next)
		if (t->state == S_STREAM && strcmp(t->identity, identity) == 0)
			n++;
	return n;
}

/*
 * Connections of an identity through TLS and waiting for their HELLO:
 * each holds a --max-sessions slot, so one identity may hold only so many
 * (--max-per-identity) while it makes up its mind.
 */
static int
session_waiting(const char *identity)
{
	struct session *t;
	int n = 0;

	for (t = session_list; t != NULL; t = t->next)
		if (t->state == S_HELLO && strcmp(t->identity, identity) == 0)
			n++;
	return n;
}

static int
session_hello(struct session *s, const struct td_frame *f)
{
	struct td_file_params p;
	char *err = NULL;
	uint16_t one = 1;

	if (td_msg_unpack_hello(f, &s->hello) == -1) {
		session_close(s, "malformed HELLO");
		return -1;
	}
	if (s->hello.version_min > TD_PROTO_VERSION ||
	    s->hello.version_max < TD_PROTO_VERSION) {
		session_close(s, "no common protocol version");
		return -1;
	}
	if (s->hello.big_endian != (*(uint8_t *)&one == 1 ? 0 : 1)) {
		session_close(s, "agents of the other byte order are not "
		    "supported yet");
		return -1;
	}
	if (s->hello.flags & TD_HELLO_RESUME)
		return session_resume(s, f);
	if (session_count(s->identity) >= s->cfg->max_per_identity) {
		char msg[160];

		snprintf(msg, sizeof msg, "too many recordings open for "
		    "'%s' (--max-per-identity %d)", s->identity,
		    s->cfg->max_per_identity);
		session_close(s, msg);
		return -1;
	}
	if (s->hello.name[0] != '\0') {
		char name[TD_MAX_NAME_LEN + 1];

		snprintf(name, sizeof name, "%s", s->hello.name);
		output_sanitize(name);
		snprintf(s->label, sizeof s->label, "session %s '%s' (%s)",
		    s->identity, name, s->peer);
	}
	/* the writer's descriptors: its file, its spools, a checkpoint */
	s->acct = budget_open(s->identity);
	if (!budget_fds(s->acct, 2 + (s->hello.ncpus < TD_WRITER_SPOOL_FDS ?
	    (int)s->hello.ncpus : TD_WRITER_SPOOL_FDS), server_sessions())) {
		session_close_code(s, TD_ERR_RETRY, "the listener is out of "
		    "file descriptors: come back later");
		return -1;
	}
	if (output_path(s->cfg, s->identity, s->hello.name, &s->path,
	    &err) == -1) {
		session_close(s, err);
		free(err);
		return -1;
	}
	memset(&p, 0, sizeof p);
	p.version = s->cfg->file_version;
	p.codec = s->cfg->codec;
	p.page_size = s->hello.page_size;
	p.long_size = s->hello.long_size;
	p.ncpus = s->hello.ncpus;
	p.clock = s->hello.clock;
	p.codec_ctx = s->cfg->codec_ctx;
	p.mode = s->cfg->file_mode;
	p.chunk_mem = TD_WRITER_CHUNK_MEM;
	p.spool_fds = TD_WRITER_SPOOL_FDS;
	s->file = td_file_create(s->path, &p);
	if (s->file == NULL) {
		char msg[512], *part;
		int e = errno;

		snprintf(msg, sizeof msg, "cannot create '%s': %s", s->path,
		    strerror(e));
		xasprintf(&part, "%s.part", s->path);
		unlink(part);		/* output_path()'s placeholder */
		free(part);
		session_close_code(s, session_disk_full(e) ? TD_ERR_RETRY :
		    TD_ERR_FATAL, msg);
		return -1;
	}
	s->cpu = xcalloc(s->hello.ncpus, sizeof *s->cpu);
	clock_gettime(CLOCK_MONOTONIC, &s->start);
	if (getrandom(&s->session_id, sizeof s->session_id, 0) == -1)
		s->session_id = (uint64_t)time(NULL);
	s->state = S_STREAM;
	/* the first checkpoint: from now on the recording survives us */
	xasprintf(&s->state_path, "%s.state", s->path);
	if (checkpoint_write(s) == -1) {
		char msg[600];
		int e = errno;

		snprintf(msg, sizeof msg, "cannot write '%s': %s",
		    s->state_path, strerror(e));
		session_close_code(s, session_disk_full(e) ? TD_ERR_RETRY :
		    TD_ERR_FATAL, msg);
		return -1;
	}
	session_welcome(s, false);
	/* the handshake timeout is over; now an idle agent is a lost one */
	session_idle(s);
	event_free(s->timer);
	s->timer = NULL;
	session_tick_start(s->base);
	log_info("%s: recording %u CPUs, %u-byte pages, clock %s, into '%s'",
	    s->label, s->hello.ncpus, s->hello.page_size, s->hello.clock,
	    s->path);
	return 0;
}

static int	session_write_failed(struct session *, const char *,
		    const char *);
static int	session_section_write(struct session *, const void *,
		    size_t, const char *);

/* Pages could not be written: pause on a full disk, else close. */
static int
session_pages_failed(struct session *s)
{
	char msg[600];

	snprintf(msg, sizeof msg, "cannot write '%s': %s", s->path,
	    strerror(errno));
	return session_write_failed(s, "cannot write pages", msg);
}

/* Count what a page holds and hand it to the writer (unless stored). */
static int
session_page(struct session *s, struct session_cpu *c, uint32_t cpu,
    const uint8_t *page, bool write)
{
	struct td_page_info info;

	if (td_page_parse(page, s->hello.page_size, s->hello.commit_size,
	    &info) == 0) {
		c->events += info.events;
		if (info.missed)
			c->missed_pages++;
	}
	if (write && td_file_cpu_page(s->file, (int)cpu, page,
	    s->hello.page_size) == -1)
		return session_pages_failed(s);
	return 0;
}

/*
 * SECTION_DATA and PAGES frames may be 1 MiB each.  Waiting for whole ones
 * would hold up to that much per session (plus a contiguous copy): a
 * thousand agents sending their kallsyms at once would need gigabytes.  So
 * their payload goes to the writer as it arrives, PAGES page by page, and
 * a session holds little more than what one read brought.  This starts one
 * when its header (and PAGES' first 16 bytes) are in; -1 when the session
 * was closed.  No checkpoint is taken until the frame is whole.
 */
static int
session_bulk_begin(struct session *s, const uint8_t *p,
    const struct td_frame *f)
{
	struct td_pages pg;
	char msg[160];

	s->bytes += f->total;
	s->bulk_type = f->type;
	s->bulk_left = f->len;
	s->bulk_total = f->total;
	if (f->type == TD_MSG_SECTION_DATA)
		return 0;
	if (td_msg_unpack_pages_head(p + TD_FRAME_HEADER, f->len,
	    s->hello.page_size, &pg) == -1) {
		session_close(s, "malformed PAGES");
		return -1;
	}
	if (pg.cpu >= s->hello.ncpus) {
		snprintf(msg, sizeof msg, "pages for CPU %u, but %u CPUs "
		    "were declared", pg.cpu, s->hello.ncpus);
		session_close(s, msg);
		return -1;
	}
	if (pg.first_seq != s->cpu[pg.cpu].next_seq) {
		snprintf(msg, sizeof msg, "CPU %u: page %" PRIu64 " where %"
		    PRIu64 " was due", pg.cpu, pg.first_seq,
		    s->cpu[pg.cpu].next_seq);
		session_close(s, msg);
		return -1;
	}
	s->bulk_cpu = pg.cpu;
	s->bulk_left = pg.len;
	return 0;
}

/*
 * Take in what has arrived of a bulk frame; -1 when the session was closed
 * or paused.  A whole frame counts in the stream like any other.
 */
static int
session_bulk(struct session *s, struct evbuffer *in)
{
	struct session_cpu *c;
	size_t k, n;

	while (s->bulk_left > 0) {
		n = evbuffer_get_length(in);
		if (s->bulk_type == TD_MSG_PAGES) {
			k = s->hello.page_size;
			if (n < k) {
				bufferevent_setwatermark(s->bev, EV_READ, k, 0);
				return 0;
			}
			c = &s->cpu[s->bulk_cpu];
			if (session_page(s, c, s->bulk_cpu,
			    evbuffer_pullup(in, k), true) == -1)
				return -1;
			c->next_seq++;
			s->pages++;
		} else {
			if (n == 0)
				return 0;
			/* what is contiguous, so that nothing is copied */
			k = evbuffer_get_contiguous_space(in);
			if (k == 0 || k > n)
				k = n;
			if (k > s->bulk_left)
				k = s->bulk_left;
			if (session_section_write(s, evbuffer_pullup(in, k),
			    k, "SECTION_DATA outside a section") == -1)
				return -1;
		}
		evbuffer_drain(in, k);
		s->bulk_left -= k;
	}
	bufferevent_setwatermark(s->bev, EV_READ, 0, 0);
	s->bulk_type = 0;
	s->rx_off += s->bulk_total;
	if (s->rx_off - s->ack_off >= SESSION_CK_BYTES)
		return session_checkpoint(s);
	return 0;
}

/*
 * PAGES_Z: one chunk of pages compressed by the agent.  It is decompressed
 * to check it and count its events; a file of the same codec stores the
 * block as it came, any other gets the pages.
 */
static int
session_pages_z(struct session *s, const struct td_frame *f)
{
	struct td_pages_z pz;
	struct session_cpu *c;
	enum td_codec_id id;
	size_t want;
	uint32_t i;
	bool same;
	char msg[600];

	if (td_msg_unpack_pages_z(f, &pz) == -1) {
		session_close(s, "malformed PAGES_Z");
		return -1;
	}
	if (pz.cpu >= s->hello.ncpus) {
		snprintf(msg, sizeof msg, "pages for CPU %u, but %u CPUs "
		    "were declared", pz.cpu, s->hello.ncpus);
		session_close(s, msg);
		return -1;
	}
	c = &s->cpu[pz.cpu];
	if (pz.first_seq != c->next_seq) {
		snprintf(msg, sizeof msg, "CPU %u: page %" PRIu64 " where %"
		    PRIu64 " was due", pz.cpu, pz.first_seq, c->next_seq);
		session_close(s, msg);
		return -1;
	}
	id = pz.codec == TD_WIRE_ZSTD ? TD_CODEC_ZSTD : TD_CODEC_ZLIB;
	if (s->wire != NULL && td_codec_id(s->wire) != id) {
		td_codec_free(s->wire);
		s->wire = NULL;
	}
	if (s->wire == NULL && (s->wire = td_codec_new(id, 0)) == NULL) {
		session_close(s, "cannot start a decompressor");
		return -1;
	}
	if (s->zbuf == NULL)
		s->zbuf = xmalloc((size_t)TD_CHUNK_PAGES * s->hello.page_size);
	want = (size_t)pz.count * s->hello.page_size;
	if (td_codec_decompress(s->wire, pz.data, pz.len, s->zbuf,
	    want) != (ssize_t)want) {
		session_close(s, "PAGES_Z does not decompress to its pages");
		return -1;
	}
	same = td_file_chunk_codec(s->file) == id;
	for (i = 0; i < pz.count; i++)
		if (session_page(s, c, pz.cpu, s->zbuf +
		    (size_t)i * s->hello.page_size, !same) == -1)
			return -1;
	if (same && td_file_cpu_chunk(s->file, (int)pz.cpu, pz.data, pz.len,
	    pz.count) == -1)
		return session_pages_failed(s);
	c->next_seq += pz.count;
	s->pages += pz.count;
	return 0;
}

static int
session_end(struct session *s, const struct td_frame *f)
{
	struct td_end *e;
	struct td_done d;
	char msg[256];
	uint32_t i;

	e = xmalloc(sizeof *e);
	if (td_msg_unpack_end(f, e) == -1 || e->ncpus != s->hello.ncpus) {
		free(e);
		session_close(s, "malformed END");
		return -1;
	}
	for (i = 0; i < e->ncpus; i++) {
		if (e->pages[i] != s->cpu[i].next_seq) {
			snprintf(msg, sizeof msg, "CPU %u: the agent sent %"
			    PRIu64 " pages, %" PRIu64 " arrived", i,
			    e->pages[i], s->cpu[i].next_seq);
			free(e);
			session_close(s, msg);
			return -1;
		}
	}
	free(e);
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++) {
		if (!td_file_has_section(s->file, i)) {
			snprintf(msg, sizeof msg, "END before section %u", i);
			session_close(s, msg);
			return -1;
		}
	}
	if (timesync_options(s) == -1) {
		session_close(s, "cannot write the time-sync options");
		return -1;
	}
	if (td_file_finish(s->file) == -1) {
		if (session_disk_full(errno)) {
			session_pause(s, "cannot finish the file");
			return -1;
		}
		snprintf(msg, sizeof msg, "cannot finish '%s': %s", s->path,
		    strerror(errno));
		session_close(s, msg);
		return -1;
	}
	checkpoint_remove(s);
	s->rx_off += f->total;
	s->state = S_DONE;
	memset(&d, 0, sizeof d);
	d.file_size = td_file_size(s->file);
	snprintf(d.path, sizeof d.path, "%s", s->path + strlen(s->cfg->dir) +
	    (s->path[strlen(s->cfg->dir)] == '/'));
	if (td_msg_pack_done(&s->out, &d) == -1) {
		session_close(s, "cannot frame DONE");
		return -1;
	}
	session_send(s);
	session_remember(s, d.file_size, d.path);
	log_info("%s: wrote '%s' (%" PRIu64 " bytes)", s->label, s->path,
	    d.file_size);
	return 0;
}

/* The number after key in a CPUSTAT text (bounded, not NUL-trusting). */
static uint64_t
session_stat(const uint8_t *p, size_t n, const char *key)
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

/* Handle one frame; -1 when the session was closed. */
static int session_stream_frame(struct session *, const struct td_frame *);

static int
session_frame(struct session *s, const struct td_frame *f)
{
	s->bytes += f->total;
	if (s->state == S_HELLO) {
		if (f->type != TD_MSG_HELLO) {
			session_close(s, "expected HELLO first");
			return -1;
		}
		return session_hello(s, f);
	}
	if (s->state != S_STREAM) {
		session_close(s, "data after END");
		return -1;
	}
	if (f->type == TD_MSG_KEEPALIVE)
		return 0;
	if (session_stream_frame(s, f) == -1)
		return -1;
	if (s->state == S_STREAM && TD_MSG_IN_STREAM(f->type)) {
		s->rx_off += f->total;
		if (s->rx_off - s->ack_off >= SESSION_CK_BYTES)
			return session_checkpoint(s);
	}
	return 0;
}

/* A disk-full error pauses the session; anything else closes it. */
static int
session_write_failed(struct session *s, const char *what, const char *why)
{
	if (session_disk_full(errno))
		session_pause(s, what);
	else
		session_close(s, why);
	return -1;
}

/*
 * Bytes of the open section (SECTION_DATA's or SECTION_DATA_Z's) to the
 * writer; -1 when the session was closed (outside: the reason when no
 * section is open) or paused.
 */
static int
session_section_write(struct session *s, const void *p, size_t n,
    const char *outside)
{
	if (td_file_section_write(s->file, p, n) == 0)
		return 0;
	if (errno == EFBIG)	/* the cap, not a disk */
		session_close(s, "section too big");
	else
		session_write_failed(s, "cannot write a section", outside);
	return -1;
}

/*
 * SECTION_DATA_Z: a piece of the open section, decompressed to exactly the
 * length it claims (at most TD_SECTION_Z_RAW).  One decompressor per codec
 * and one buffer serve every session (one thread): a thousand agents
 * sending their headers at once cost no more than one.
 */
static int
session_section_z(struct session *s, const struct td_frame *f)
{
	static struct td_codec *dz[3];
	static uint8_t *raw;
	struct td_section_z sz;

	if (td_msg_unpack_section_z(f, &sz) == -1) {
		session_close(s, "malformed SECTION_DATA_Z");
		return -1;
	}
	if (dz[sz.codec] == NULL && (dz[sz.codec] = td_codec_new(
	    sz.codec == TD_WIRE_ZSTD ? TD_CODEC_ZSTD : TD_CODEC_ZLIB, 0)) ==
	    NULL) {
		session_close(s, "cannot start a decompressor");
		return -1;
	}
	if (raw == NULL)
		raw = xmalloc(TD_SECTION_Z_RAW);
	if (td_codec_decompress(dz[sz.codec], sz.data, sz.len, raw,
	    sz.raw_len) != (ssize_t)sz.raw_len) {
		session_close(s, "SECTION_DATA_Z does not decompress to its "
		    "length");
		return -1;
	}
	return session_section_write(s, raw, sz.raw_len,
	    "SECTION_DATA_Z outside a section");
}

/* One frame of a streaming session; -1 when it was closed or paused. */
static int
session_stream_frame(struct session *s, const struct td_frame *f)
{
	const uint8_t *p;
	uint16_t id;
	size_t n;

	switch (f->type) {
	case TD_MSG_PAGES_Z:
		return session_pages_z(s, f);
	case TD_MSG_SECTION_DATA_Z:
		return session_section_z(s, f);
	case TD_MSG_SECTION:
		if (td_msg_unpack_section(f, &id) == -1) {
			session_close(s, "bad or repeated SECTION");
			return -1;
		}
		if (td_file_section_begin(s->file, id) == -1)
			return session_write_failed(s, "cannot write a section",
			    "bad or repeated SECTION");
		return 0;
	case TD_MSG_SECTION_END:
		if (td_file_section_end(s->file) == -1)
			return session_write_failed(s, "cannot write a section",
			    "SECTION_END outside a section");
		return 0;
	case TD_MSG_OPTION:
		if (td_msg_unpack_option(f, &id, &p, &n) == 0 &&
		    (id == TD_OPT_TIME_SHIFT || id == TD_OPT_DATE ||
		    id == TD_OPT_TD_TSYNC)) {
			log_debug("%s: dropped option %u from the agent: the "
			    "listener writes it", s->label, (unsigned)id);
			return 0;
		}
		if (td_msg_unpack_option(f, &id, &p, &n) == -1) {
			session_close(s, "bad OPTION");
			return -1;
		}
		if (td_file_add_option(s->file, id, p, n) == -1) {
			session_close(s, errno == EFBIG ? "options over the "
			    "listener's limit (TD_MAX_OPTIONS_TOTAL)" :
			    "bad OPTION");
			return -1;
		}
		if (id == TD_OPT_CPUSTAT)
			s->lost += session_stat(p, n, "overrun: ") +
			    session_stat(p, n, "dropped events: ");
		if (id == TD_OPT_TSC2NSEC && n >= 8)
			timesync_tsc2nsec(s, p);
		return 0;

	case TD_MSG_END:
		return session_end(s, f);
	case TD_MSG_TSYNC_PROBE:
		return timesync_probe(s, f);
	case TD_MSG_TSYNC_SAMPLE:
		return timesync_sample(s, f);
	case TD_MSG_ERROR: {
		struct td_error e;
		char msg[TD_MAX_ERROR_LEN + 32];

		if (td_msg_unpack_error(f, &e) == -1)
			snprintf(msg, sizeof msg, "malformed ERROR");
		else
			snprintf(msg, sizeof msg, "agent error %u: %s",
			    e.code, e.text);
		session_close(s, msg);
		return -1;
	}
	default:
		session_close(s, "unexpected message");
		return -1;
	}
}

static void
session_read_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct td_frame f;
	const uint8_t *p;
	uint64_t pages;
	size_t len, turn = 0;
	char msg[128];
	int r;

	s->rx_ns = timesync_now(CLOCK_MONOTONIC);
	if (session_hold_back(s))
		return;
	/* the rest of what waits, at once (unless enough waits already: a
	   session that stops for its replies must not gather input) */
	if (evbuffer_get_length(in) < TD_TLS_READ_AHEAD)
		reader_pump(bev, s->big_reads, s->label);
	for (;;) {
		if (session_hold_back(s))
			return;		/* s is paused or waits to write */
		if (turn >= TD_SESSION_TURN) {
			/* the others' turn: this session's next comes later */
			bufferevent_trigger(bev, EV_READ,
			    BEV_TRIG_IGNORE_WATERMARKS |
			    BEV_TRIG_DEFER_CALLBACKS);
			return;
		}
		if (s->bulk_type != 0) {
			if (session_bulk(s, in) == -1)
				return;		/* s is gone or paused */
			if (s->bulk_type != 0)
				return;		/* more to come */
		}
		len = evbuffer_get_length(in);
		if (len < TD_FRAME_HEADER)
			return;
		p = evbuffer_pullup(in, TD_FRAME_HEADER);
		r = td_frame_parse(p, TD_FRAME_HEADER, &f);
		if (r == -1) {
			snprintf(msg, sizeof msg, "bad frame header (type %u)",
			    (unsigned)(p[4] << 8 | p[5]));
			session_close(s, msg);
			return;
		}
		/* not a HELLO: refused now, not once up to 1 MiB is in */
		if (s->state == S_HELLO && f.type != TD_MSG_HELLO) {
			s->bytes += TD_FRAME_HEADER;
			session_close(s, "expected HELLO first");
			return;
		}
		if (s->state == S_STREAM && (f.type == TD_MSG_PAGES ||
		    f.type == TD_MSG_SECTION_DATA)) {
			size_t head = TD_FRAME_HEADER +
			    (f.type == TD_MSG_PAGES ? TD_PAGES_HEAD : 0);

			if (len < head) {
				bufferevent_setwatermark(bev, EV_READ, head, 0);
				return;
			}
			if (session_bulk_begin(s, evbuffer_pullup(in, head),
			    &f) == -1)
				return;		/* s is gone */
			evbuffer_drain(in, head);
			continue;
		}
		if (len < f.total) {
			/* wake up only when the whole frame is in */
			bufferevent_setwatermark(bev, EV_READ, f.total, 0);
			return;
		}
		bufferevent_setwatermark(bev, EV_READ, 0, 0);
		p = evbuffer_pullup(in, f.total);
		if (td_frame_parse(p, f.total, &f) != 1) {
			session_close(s, "bad frame");
			return;
		}
		pages = s->pages;
		if (session_frame(s, &f) == -1)
			return;		/* s is gone */
		/* what it cost: PAGES_Z may expand 1 KB to 10 pages */
		turn += f.total + (size_t)(s->pages - pages) *
		    s->hello.page_size;
		evbuffer_drain(in, f.total);
		if (s->state == S_DONE)
			return;
	}
}

static void
session_write_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	/* the agent read its replies: read it again */
	if (s->out_blocked && evbuffer_get_length(bufferevent_get_output(bev))
	    <= TD_MAX_UNSENT / 2) {
		s->out_blocked = false;
		bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
		session_idle(s);
		bufferevent_enable(bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
			session_read_cb(bev, s);
		return;
	}

	/* DONE is out: the agent closes, or we do */
	if (s->state == S_DONE && session_sent_all(bev))
		session_close(s, NULL);
}

static void
session_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;
	char msg[512];
	unsigned long e;

	if (what & BEV_EVENT_CONNECTED) {
		SSL *ssl = bufferevent_openssl_get_ssl(bev);

		if (ssl != NULL && td_tls_peer_identity(ssl, s->identity,
		    sizeof s->identity) == -1) {
			session_close(s, "no verified client certificate, or "
			    "its name is longer than 64 bytes once escaped");
			return;
		}
		snprintf(s->label, sizeof s->label, "session %s (%s)",
		    s->identity, s->peer);
		if (session_waiting(s->identity) >= s->cfg->max_per_identity) {
			admit_refused(ADMIT_R_IDENTITY, "%s: closing: %d "
			    "connections of '%s' wait for their HELLO already "
			    "(--max-per-identity)", s->label,
			    s->cfg->max_per_identity, s->identity);
			session_close(s, NULL);
			return;
		}
		if (server_handshake_done(s, s->label) == -1) {
			s->counted = false;
			session_close(s, NULL);	/* the server said why */
			return;
		}
		log_debug("%s: TLS handshake done (%s)", s->label,
		    ssl ? SSL_get_version(ssl) : "plain");
		s->state = S_HELLO;
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if (s->state == S_STREAM && (what & BEV_EVENT_WRITING)) {
			snprintf(msg, sizeof msg, "the agent has not read the "
			    "listener's replies for %d s",
			    s->cfg->idle_timeout);
			session_detach(s, msg);
			return;
		}
		if (s->state == S_STREAM) {
			snprintf(msg, sizeof msg, "no data for %d s",
			    s->cfg->idle_timeout);
			session_detach(s, msg);
			return;
		}
		session_close(s, s->state == S_HANDSHAKE ?
		    "handshake timed out" : "no HELLO in time");
		return;
	}
	if (what & BEV_EVENT_EOF) {
		if (s->state == S_STREAM) {
			session_detach(s, "connection closed before the end "
			    "of the recording");
			return;
		}
		session_close(s, s->state == S_DONE ? NULL :
		    "connection closed before the end of the recording");
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		e = bufferevent_get_openssl_error(bev);
		if (s->state == S_HANDSHAKE &&
		    bufferevent_openssl_get_ssl(bev) != NULL &&
		    SSL_get_verify_result(bufferevent_openssl_get_ssl(bev)) !=
		    X509_V_OK)
			td_tls_handshake_error(bufferevent_openssl_get_ssl(bev),
			    msg, sizeof msg, "TLS handshake refused");
		else if (e != 0) {
			char reason[256];

			ERR_error_string_n(e, reason, sizeof reason);
			snprintf(msg, sizeof msg, "%s: %s",
			    s->state == S_HANDSHAKE ? "TLS handshake refused" :
			    "TLS error", reason);
		} else
			snprintf(msg, sizeof msg, "connection error: %s",
			    strerror(EVUTIL_SOCKET_ERROR()));
		if (s->state == S_STREAM)
			session_detach(s, msg);
		else
			session_close(s, s->state == S_DONE ? NULL : msg);
	}
}

/* Handshake and HELLO must be over within the timeout, however sent. */
static void
session_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	session_close(s, s->state == S_HANDSHAKE ? "handshake timed out" :
	    "no HELLO in time");
}

/* The address and port s came from. */
const char *
session_peer(const struct session *s)
{
	return s->peer;
}

/* Start a session on an accepted socket. */
struct session *
session_new(struct event_base *base, struct listener_config *cfg, int fd,
    SSL_CTX *ctx, const char *peer)
{
	struct session *s;
	struct timeval tv;
	SSL *ssl;

	s = xcalloc(1, sizeof *s);
	s->cfg = cfg;
	s->base = base;
	s->counted = true;
	snprintf(s->peer, sizeof s->peer, "%s", peer);
	snprintf(s->label, sizeof s->label, "session %s", peer);
	td_buf_init(&s->out, TD_MAX_HELLO + TD_MAX_ERROR_LEN + 4096);
	s->big_reads = reader_big();
	if (ctx != NULL) {
		if ((ssl = SSL_new(ctx)) == NULL) {
			close(fd);
			free(s);
			return NULL;
		}
		SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		if (s->big_reads)
			reader_tls(ssl);
		s->bev = bufferevent_openssl_socket_new(base, fd, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
		if (s->bev != NULL)
			bufferevent_openssl_set_allow_dirty_shutdown(s->bev, 1);
		s->state = S_HANDSHAKE;
	} else {
		s->bev = bufferevent_socket_new(base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
		snprintf(s->identity, sizeof s->identity, "%s", peer);
		/* the port is not part of a host's identity */
		if (strrchr(s->identity, ':') != NULL)
			*strrchr(s->identity, ':') = '\0';
		output_sanitize(s->identity);
		s->state = S_HELLO;
	}
	if (s->bev == NULL) {
		close(fd);
		free(s);
		return NULL;
	}
	s->next = session_list;
	if (session_list != NULL)
		session_list->prev = s;
	session_list = s;
	bufferevent_setcb(s->bev, session_read_cb, session_write_cb,
	    session_event_cb, s);
	tv.tv_sec = cfg->handshake_timeout;
	tv.tv_usec = 0;
	bufferevent_set_timeouts(s->bev, &tv, NULL);
	/* and a deadline: a peer trickling bytes cannot stretch it */
	s->timer = evtimer_new(base, session_deadline_cb, s);
	evtimer_add(s->timer, &tv);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
	return s;
}

/*
 * Shutdown: recordings in progress are checkpointed and left on disk for
 * the next tdlisten; every agent still connected is told to come back
 * later (ERROR RETRY), which goes out while the loop runs its last second
 * (the caller's loopexit); session_free_all() then frees what is left.
 */
void
session_shutdown_all(void)
{
	struct session *s, *next;

	if (session_tick_ev != NULL) {
		event_free(session_tick_ev);
		session_tick_ev = NULL;
	}
	for (s = session_list; s != NULL; s = next) {
		next = s->next;
		if (s->state == S_CLOSING)
			continue;
		if (s->state != S_STREAM || s->cfg->resume_wait == 0) {
			session_close_code(s, TD_ERR_RETRY,
			    "tdlisten is shutting down");
			continue;
		}
		/* mid-frame, the writer holds part of a frame: the last
		   checkpoint is what the next tdlisten takes up */
		if (s->file != NULL && !s->restore && s->bulk_type == 0 &&
		    checkpoint_write(s) == -1 && errno != EBUSY)
			log_warnx("%s: cannot write '%s': %s", s->label,
			    s->state_path, strerror(errno));
		log_info("%s: left '%s' to be resumed", s->label, s->path);
		if (s->bev == NULL) {
			session_free(s);	/* keeps the files */
			continue;
		}
		s->state = S_CLOSING;
		bufferevent_disable(s->bev, EV_READ);
		bufferevent_setcb(s->bev, NULL, session_closing_write_cb,
		    session_closing_event_cb, s);
		/* a paused one has its ERROR (retry) on the way already */
		if (s->restore)
			continue;
		td_buf_reset(&s->out);
		td_msg_pack_error(&s->out, TD_ERR_RETRY,
		    "tdlisten is shutting down: come back later");
		bufferevent_write(s->bev, s->out.data, s->out.len);
	}
}

/* After the loop: whatever did not go in time goes now. */
void
session_free_all(void)
{
	while (session_list != NULL)
		session_free(session_list);
}

/* Take up one recording left by an earlier tdlisten. */
static void
session_recover(struct event_base *base, struct listener_config *cfg,
    const char *identity, const char *statepath)
{
	struct timeval tv = { cfg->resume_wait, 0 };
	struct session *s;
	char err[600];

	s = xcalloc(1, sizeof *s);
	s->cfg = cfg;
	s->base = base;
	s->state = S_STREAM;
	snprintf(s->identity, sizeof s->identity, "%s", identity);
	snprintf(s->peer, sizeof s->peer, "recovered");
	td_buf_init(&s->out, TD_MAX_HELLO + TD_MAX_ERROR_LEN + 4096);
	if (checkpoint_read(s, statepath, err, sizeof err) == -1) {
		log_warnx("cannot recover a recording: %s; its files stay",
		    err);
		td_buf_free(&s->out);
		free(s->cpu);
		free(s->samples);
		free(s->path);
		free(s->state_path);
		free(s);
		return;
	}
	if (s->hello.name[0] != '\0') {
		char name[TD_MAX_NAME_LEN + 1];

		snprintf(name, sizeof name, "%s", s->hello.name);
		output_sanitize(name);
		snprintf(s->label, sizeof s->label, "session %s '%s'",
		    s->identity, name);
	} else
		snprintf(s->label, sizeof s->label, "session %s", s->identity);
	s->acct = budget_open(s->identity);
	/* it exists already: recovered even past the budget (uncounted) */
	if (!budget_fds(s->acct, 2 + (s->hello.ncpus < TD_WRITER_SPOOL_FDS ?
	    (int)s->hello.ncpus : TD_WRITER_SPOOL_FDS), 0))
		log_warnx("%s: recovered beyond the descriptor budget",
		    s->label);
	session_account(s);
	s->next = session_list;
	if (session_list != NULL)
		session_list->prev = s;
	session_list = s;
	s->wait = evtimer_new(base, session_wait_cb, s);
	evtimer_add(s->wait, &tv);
	log_info("%s: recovered '%s' at offset %" PRIu64 " (%" PRIu64
	    " pages); waiting %d s for the agent to resume", s->label, s->path,
	    s->rx_off, s->pages, cfg->resume_wait);
	session_tick_start(base);
}

/*
 * At start: every DIR/IDENTITY/NAME.dat.state is a recording an earlier
 * tdlisten had not finished.  Each is restored to its checkpoint and waits
 * for its agent; if the agent does not come, it is kept as incomplete.
 */
void
session_recover_all(struct event_base *base, struct listener_config *cfg)
{
	DIR *top, *host;
	struct dirent *d, *e;
	char *hostdir, *path;
	size_t n;

	if ((top = opendir(cfg->dir)) == NULL)
		return;
	while ((d = readdir(top)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		xasprintf(&hostdir, "%s/%s", cfg->dir, d->d_name);
		if ((host = opendir(hostdir)) == NULL) {
			free(hostdir);
			continue;
		}
		while ((e = readdir(host)) != NULL) {
			n = strlen(e->d_name);
			xasprintf(&path, "%s/%s", hostdir, e->d_name);
			if (n > 14 && strcmp(e->d_name + n - 14,
			    ".dat.state.tmp") == 0)
				unlink(path);	/* a checkpoint cut short */
			else if (n > 10 && strcmp(e->d_name + n - 10,
			    ".dat.state") == 0) {
				if (cfg->resume_wait > 0)
					session_recover(base, cfg, d->d_name,
					    path);
				else
					log_warnx("'%s': not recovered "
					    "(--resume-wait 0)", path);
			}
			free(path);
		}
		closedir(host);
		free(hostdir);
	}
	closedir(top);
}
