/*
 * tdload.c: a load generator for tdlisten.  One process, one libevent loop,
 * N concurrent connections, each a whole recording over the real protocol
 * (TLS with a client certificate, or --insecure): HELLO, WELCOME, the
 * metadata sections, PAGES, CMDLINES, the options, END, and the wait for
 * DONE.  Every connection replays the same existing trace.dat, so every
 * file the listener writes must hold exactly its events.  It neither
 * resumes (a lost connection is a failure) nor answers time sync.
 *
 *	tdload -h HOST -p PORT (--cert F --key F --ca F | --insecure)
 *	    -n N [-i IDLE] [-t SECONDS] [-r KB | -T SECONDS] [--ramp M] [--together]
 *	    [--name PREFIX] [--timeout SECONDS] [-q] FILE
 *
 * Connections 0 .. IDLE-1 are idle agents: after WELCOME they send the
 * sections 16 to 20 (as tdagent does at its start), stay quiet for SECONDS
 * and then send their pages, CMDLINES, options and END at once.  The others
 * stream: their pages go out in batches every 100 ms at KB kB/s each (0: as
 * fast as the listener takes them; -T: at the rate that spreads them over
 * SECONDS), then the end.  Each connection's HELLO
 * carries the name PREFIX-NNNN, so that one certificate serves all and the
 * files stay apart (DIR/<identity>/<time>-PREFIX-NNNN.dat).
 *
 * The file is read once (tdload-file.c): sections, options and pages are
 * shared by every connection and handed to libevent by reference, so the
 * generator's memory does not grow with N beyond the TLS state.  Connections are opened with at
 * most M (--ramp, 64 by default) waiting for their WELCOME at a time.  With
 * --together no connection goes past its metadata before every one has its
 * WELCOME, so that all N are open at once whatever the timing (the idle
 * ones then wait SECONDS more).
 *
 * --standby SECONDS: every connection is a standby agent, as tdagent
 * --standby (docs/tdproto.md "Standby"): after TLS it sends STANDBY instead
 * of HELLO (host PREFIX-NNNN, the file's CPU count, this machine's kernel
 * release, the usual trace clocks), wants a WELCOME back (anything else
 * fails the connection), then sends KEEPALIVE every third of the WELCOME's
 * idle timeout, as tdagent does, and nothing more: a START, or any frame but
 * KEEPALIVE, fails it (a load generator records nothing).  Once all N have
 * their WELCOME they stay so SECONDS more (or until a SIGTERM), then close;
 * "ok" is a connection the listener kept open all that time.  This measures what an idle standby
 * agent costs the listener (bench/load.sh --mix standby, which counts them
 * in tdctl list meanwhile); no recording is made, so no file is written and
 * a listener needs one descriptor per connection.
 *
 * --armed (with --standby): every standby agent also plays tdagent
 * --standby --allow-arm's flight recorder (tests/tdload-flight.c): ARM,
 * DISARM and SNAPSHOT answered as tdagent does; a snapshot is a recording
 * of FILE on a connection of its own (tried again if closed before its
 * WELCOME), so every snapshot file holds exactly FILE's events.  Each prints
 * "snapshot I NAME SNAP PATH SIZE SECONDS DONE_NS" (DONE_NS: the
 * CLOCK_REALTIME at its DONE) or "not ok snapshot I NAME SNAP: REASON" as
 * it ends, and the summary how many there were.  --trigger K:SECONDS:
 * agent K sends TRIGGERED (its trigger fired) SECONDS after its first ARM,
 * and prints "triggered K NAME REAL_NS".
 *
 * --timeout SECONDS (default 600) gives up once the listener has sent
 * nothing on any connection for that long: a slow listener is waited for,
 * a stuck one is not.
 *
 * Output: one line per connection, "ok I NAME KIND PATH SIZE SECONDS" or
 * "not ok I NAME KIND: REASON", then a summary, including the most
 * connections that were open at once (--standby: and how many were
 * welcomed and KEEPALIVE frames sent).  Exit 0 when every connection got
 * its DONE, 1 otherwise, 2 for a usage or set-up error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>

#include "buf.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdload.h"
#include "tls.h"
#include "xmalloc.h"

/* Stop adding pages while this much waits in a connection's output. */
#define LOAD_HIGH	(1024 * 1024)
/* Pages of one CPU per PAGES frame, as tdagent batches at most. */
#define LOAD_BATCH	((TD_MAX_FRAME - 16) / load_f.page_size)
#define LOAD_TICK_MS	100
/* --standby: the clocks each STANDBY lists (x86 tracefs's) */
#define LOAD_CLOCKS	"local global counter uptime perf mono mono_raw " \
			"boot x86-tsc"

static struct event_base *load_base;
static SSL_CTX		*load_ctx;
static const char	*load_host;
static struct addrinfo	*load_ai;
static struct conn	*load_conns;
static int		 load_n, load_idle, load_ramp = 64;
static double		 load_quiet = 5, load_rate, load_timeout = 600;
static struct event	*load_deadline_ev;	/* --timeout of silence */
static const char	*load_prefix = "load";
static bool		 load_quiet_out, load_together;
static double		 load_standby = -1;	/* --standby SECONDS */
static bool		 load_armed;		/* --armed */
static int		 load_standing;		/* welcomed, standing by */
static struct event	*load_standby_ev;
static uint64_t		 load_keepalives;	/* KEEPALIVE frames sent */
static struct td_standby load_sb;		/* STANDBY, host aside */

static struct load_file	 load_f;	/* the recording replayed */

static int		 load_next;	/* next connection to start */
static int		 load_pending;	/* waiting for WELCOME */
static int		 load_open, load_peak;
static int		 load_left;	/* not finished */
static int		 load_welcomed;	/* got WELCOME, or failed before */
static uint64_t		 load_sent;

static double
load_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
}

static void load_start_more(void);
static void load_release(void);
static void load_progress(void);
static void conn_stand(struct conn *, const struct td_welcome *);
static void load_standby_arm(void);

/* A connection ends, well or not; start the next ones. */
static void
conn_end(struct conn *c, bool ok)
{
	bool early = c->state == C_CONNECTING;

	if (early && c->owner == NULL) {
		load_pending--;
		load_welcomed++;
	}
	c->secs = load_since(&c->start);
	c->state = ok ? C_OK : C_FAILED;
	if (c->timer != NULL)
		event_free(c->timer);
	c->timer = NULL;
	if (c->keep != NULL)
		event_free(c->keep);
	c->keep = NULL;
	if (c->bev != NULL) {
		SSL *ssl = bufferevent_openssl_get_ssl(c->bev);

		if (ssl != NULL)
			SSL_set_shutdown(ssl, SSL_RECEIVED_SHUTDOWN);
		bufferevent_free(c->bev);
	}
	if (c->connected)
		load_open--;
	c->connected = false;
	c->bev = NULL;
	free(c->next);
	c->next = NULL;
	if (c->owner != NULL) {
		/* a snapshot's recording: its agent answers for it */
		load_flight_end(c, ok, early);
		return;
	}
	if (c->fl != NULL)
		load_flight_gone(c);
	if (--load_left == 0)
		event_base_loopexit(load_base, NULL);
	load_start_more();
	load_release();
	load_standby_arm();
}

static void
conn_fail(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A connection failed: say why. */
static void
conn_fail(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->state == C_OK || c->state == C_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	conn_end(c, false);
}

void
load_conn_send(struct conn *c, const struct td_buf *b)
{
	if (c->bev == NULL)
		return;
	bufferevent_write(c->bev, b->data, b->len);
	load_sent += b->len;
}

void
load_conn_fail(struct conn *c, const char *why)
{
	conn_fail(c, "%s", why);
}

/*
 * Queue up to max pages, one PAGES frame per CPU at a time (round robin),
 * the pages by reference; returns how many went out.
 */
static uint64_t
conn_add_pages(struct conn *c, uint64_t max)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	uint8_t hdr[TD_FRAME_HEADER + 16];
	struct td_buf b;
	uint64_t sent = 0, k;
	bool more = true;
	int cpu;

	td_buf_init(&b, sizeof hdr);
	while (more && sent < max) {
		more = false;
		for (cpu = 0; cpu < load_f.ncpus && sent < max; cpu++) {
			k = load_f.npages[cpu] - c->next[cpu];
			if (k == 0)
				continue;
			if (k > LOAD_BATCH)
				k = LOAD_BATCH;
			if (k > max - sent)
				k = max - sent;
			td_buf_reset(&b);
			td_msg_pack_pages_head(&b, cpu, k, c->next[cpu],
			    load_f.page_size);
			evbuffer_add(out, b.data, b.len);
			evbuffer_add_reference(out, load_f.pages[cpu] +
			    c->next[cpu] * load_f.page_size,
			    k * load_f.page_size, NULL, NULL);
			load_sent += b.len + k * load_f.page_size;
			c->next[cpu] += k;
			sent += k;
			more = true;
		}
	}
	td_buf_free(&b);
	return sent;
}

static bool
conn_pages_left(const struct conn *c)
{
	int cpu;

	for (cpu = 0; cpu < load_f.ncpus; cpu++)
		if (c->next[cpu] < load_f.npages[cpu])
			return true;
	return false;
}

/* All pages are out: CMDLINES, options and END. */
static void
conn_finish(struct conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	evbuffer_add_reference(out, load_f.tail.data, load_f.tail.len, NULL,
	    NULL);
	load_sent += load_f.tail.len;
	c->state = C_FINISH;
	if (c->timer != NULL)
		event_del(c->timer);
}

/* Feed a streaming connection: by the rate on ticks, else when drained. */
static void
conn_feed(struct conn *c, bool tick)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	uint64_t want;

	if (c->state != C_STREAM)
		return;
	if (evbuffer_get_length(out) >= LOAD_HIGH)
		return;
	if (load_rate > 0 && !c->idle) {
		if (!tick)
			return;
		c->credit += load_rate * 1024 * LOAD_TICK_MS / 1000.0 /
		    load_f.page_size;
		want = (uint64_t)c->credit;
		c->credit -= conn_add_pages(c, want);
	} else
		conn_add_pages(c, (LOAD_HIGH + load_f.page_size - 1) /
		    load_f.page_size);
	if (!conn_pages_left(c))
		conn_finish(c);
}

static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->state == C_QUIET) {
		c->state = C_STREAM;
		conn_feed(c, false);
		return;
	}
	conn_feed(c, true);
}

static void
conn_write_cb(struct bufferevent *bev, void *arg)
{
	conn_feed(arg, false);
}

/* Past the metadata: an idle agent waits, the others stream. */
static void
conn_go(struct conn *c)
{
	struct timeval tv;

	if (c->idle) {
		c->state = C_QUIET;
		tv.tv_sec = (time_t)load_quiet;
		tv.tv_usec = (suseconds_t)((load_quiet - tv.tv_sec) * 1e6);
		c->timer = evtimer_new(load_base, conn_timer_cb, c);
		evtimer_add(c->timer, &tv);
		return;
	}
	c->state = C_STREAM;
	if (load_rate > 0) {
		/* ticks start at the WELCOME (or the release): spread */
		tv.tv_sec = 0;
		tv.tv_usec = LOAD_TICK_MS * 1000;
		c->timer = event_new(load_base, -1, EV_PERSIST, conn_timer_cb,
		    c);
		evtimer_add(c->timer, &tv);
	}
	conn_feed(c, true);
}

void
load_conn_go(struct conn *c)
{
	if (c->state == C_WAIT)
		conn_go(c);
}

/*
 * The listener takes an agent silent for its idle timeout as gone: one that
 * waits (--together, or idle) says it is there, as tdagent does, when a
 * third of it has passed.
 */
static void
conn_keep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct td_buf b;

	if (c->state != C_WAIT && c->state != C_QUIET &&
	    c->state != C_STANDBY)
		return;
	td_buf_init(&b, TD_FRAME_HEADER);
	td_msg_pack_keepalive(&b);
	bufferevent_write(c->bev, b.data, b.len);
	load_sent += b.len;
	load_keepalives++;
	td_buf_free(&b);
}

static void
conn_welcome(struct conn *c, const struct td_frame *f)
{
	struct td_welcome w;
	struct timeval tv;

	if (td_msg_unpack_welcome(f, &w) == -1) {
		conn_fail(c, "bad WELCOME");
		return;
	}
	if (load_standby >= 0 && c->owner == NULL) {
		conn_stand(c, &w);
		return;
	}
	if (w.idle_timeout > 0) {
		tv.tv_sec = w.idle_timeout / 3 > 0 ? w.idle_timeout / 3 : 1;
		tv.tv_usec = 0;
		c->keep = event_new(load_base, -1, EV_PERSIST, conn_keep_cb, c);
		evtimer_add(c->keep, &tv);
	}
	evbuffer_add_reference(bufferevent_get_output(c->bev), load_f.head.data,
	    load_f.head.len, NULL, NULL);
	load_sent += load_f.head.len;
	c->state = C_WAIT;
	if (c->owner != NULL) {
		/* a snapshot: set up, it waits for its GO */
		load_flight_ready(c);
		return;
	}
	load_pending--;
	load_welcomed++;
	load_start_more();
	if (!load_together)
		conn_go(c);
	else
		load_release();
}

/* --together: once every connection has its WELCOME, all go on. */
static void
load_release(void)
{
	int i;

	if (!load_together || load_welcomed < load_n)
		return;
	for (i = 0; i < load_n; i++)
		if (load_conns[i].state == C_WAIT)
			conn_go(&load_conns[i]);
}

static void
conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct td_frame f;
	struct td_done d;
	struct td_error e;
	const uint8_t *p;
	char why[TD_MAX_ERROR_LEN + 64];
	size_t len;
	int r;

	for (;;) {
		len = evbuffer_get_length(in);
		if (len < TD_FRAME_HEADER)
			return;
		p = evbuffer_pullup(in, TD_FRAME_HEADER);
		if (td_frame_parse(p, TD_FRAME_HEADER, &f) == -1) {
			conn_fail(c, "the listener sent a bad frame");
			return;
		}
		if (len < f.total)
			return;
		p = evbuffer_pullup(in, f.total);
		r = td_frame_parse(p, f.total, &f);
		if (r != 1) {
			conn_fail(c, "the listener sent a bad frame");
			return;
		}
		load_progress();
		switch (f.type) {
		case TD_MSG_WELCOME:
			if (c->state != C_CONNECTING) {
				conn_fail(c, "a second WELCOME");
				return;
			}
			conn_welcome(c, &f);
			if (c->state == C_FAILED)
				return;
			break;
		case TD_MSG_DONE:
			if (td_msg_unpack_done(&f, &d) == -1) {
				conn_fail(c, "bad DONE");
				return;
			}
			if (c->state != C_FINISH) {
				conn_fail(c, "DONE before END");
				return;
			}
			snprintf(c->path, sizeof c->path, "%s", d.path);
			c->file_size = d.file_size;
			conn_end(c, true);
			return;
		case TD_MSG_ERROR:
			if (td_msg_unpack_error(&f, &e) == -1)
				conn_fail(c, "bad ERROR");
			else
				conn_fail(c, "the listener refused: %s",
				    e.text);
			return;
		case TD_MSG_KEEPALIVE:
			/* tdagent --standby takes one; a recording does not */
			if (c->state != C_STANDBY) {
				conn_fail(c, "the listener sent KEEPALIVE");
				return;
			}
			break;
		default:
			/* --armed: the flight recorder's frames */
			if (c->fl != NULL && c->state == C_STANDBY &&
			    (r = load_flight_frame(c, &f, why,
			    sizeof why)) != 0) {
				if (r == -1) {
					conn_fail(c, "%s", why);
					return;
				}
				break;
			}
			/* acknowledgements: nothing is kept to resend; a
			   standby agent gets none (a START: it records
			   nothing, so that fails it too) */
			if ((load_standby >= 0 && c->owner == NULL) ||
			    (f.type != TD_MSG_TSYNC_REPLY &&
			    f.type != TD_MSG_ACK)) {
				conn_fail(c, "the listener sent %s",
				    td_msg_name(f.type));
				return;
			}
		}
		evbuffer_drain(in, f.total);
	}
}

static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	unsigned long e;
	char reason[256];

	if (what & BEV_EVENT_CONNECTED) {
		c->connected = true;
		load_open++;
		if (load_open > load_peak)
			load_peak = load_open;
		return;
	}
	/* a frame that came with the close */
	conn_read_cb(bev, c);
	if (c->state == C_OK || c->state == C_FAILED)
		return;
	if (what & BEV_EVENT_EOF) {
		conn_fail(c, "the listener closed the connection");
		return;
	}
	e = bufferevent_get_openssl_error(bev);
	if (e != 0) {
		ERR_error_string_n(e, reason, sizeof reason);
		conn_fail(c, "TLS: %s", reason);
	} else
		conn_fail(c, "connection: %s",
		    strerror(EVUTIL_SOCKET_ERROR()));
}

void
load_conn_start(struct conn *c)
{
	struct td_hello h = load_f.hello;
	struct td_buf b;
	char err[512];
	SSL *ssl;

	clock_gettime(CLOCK_MONOTONIC, &c->start);
	c->state = C_CONNECTING;
	if (c->owner == NULL)
		load_pending++;
	c->next = xcalloc(load_f.ncpus, sizeof *c->next);
	if (load_ctx != NULL) {
		if ((ssl = SSL_new(load_ctx)) == NULL ||
		    td_tls_client_prepare(ssl, load_host, err,
		    sizeof err) == -1) {
			conn_fail(c, "TLS set-up: %s", err);
			return;
		}
		c->bev = bufferevent_openssl_socket_new(load_base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (c->bev != NULL)
			bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	} else
		c->bev = bufferevent_socket_new(load_base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		conn_fail(c, "cannot make a bufferevent");
		return;
	}
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb,
	    c);
	bufferevent_setwatermark(c->bev, EV_WRITE, LOAD_HIGH / 2, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, load_ai->ai_addr,
	    (int)load_ai->ai_addrlen) == -1) {
		/* bufferevent counts it as open only once connected */
		conn_fail(c, "cannot connect: %s", strerror(errno));
		return;
	}
	if (load_standby >= 0 && c->owner == NULL) {
		/* STANDBY instead of HELLO, each its own host name */
		struct td_standby sb = load_sb;

		snprintf(sb.host, sizeof sb.host, "%s", c->name);
		td_buf_init(&b, TD_MAX_STANDBY_MSG + TD_FRAME_HEADER);
		if (td_msg_pack_standby(&b, &sb) == -1) {
			td_buf_free(&b);
			conn_fail(c, "cannot pack STANDBY");
			return;
		}
		load_conn_send(c, &b);
		td_buf_free(&b);
		return;
	}
	snprintf(h.name, sizeof h.name, "%s", c->name);
	h.recording_id = c->recording_id != 0 ? c->recording_id :
	    ((uint64_t)getpid() << 32) | (uint64_t)c->idx;
	td_buf_init(&b, TD_MAX_HELLO + TD_FRAME_HEADER);
	td_msg_pack_hello(&b, &h);
	load_conn_send(c, &b);
	td_buf_free(&b);
}

/* --standby: the time is up, every connection still standing is done. */
static void
load_standby_cb(evutil_socket_t fd, short what, void *arg)
{
	int i;

	for (i = 0; i < load_n; i++)
		if (load_conns[i].state == C_STANDBY)
			conn_end(&load_conns[i], true);
}

/*
 * --standby: c has its WELCOME; from now on it sends only KEEPALIVE, as
 * tdagent --standby does, every third of the idle timeout (60 s when the
 * listener has none, at least every 500 ms).  Once every connection is
 * there (or failed) they all stay --standby SECONDS more.
 */
static void
conn_stand(struct conn *c, const struct td_welcome *w)
{
	uint32_t ms;
	struct timeval tv;

	ms = w->idle_timeout > 0 ? w->idle_timeout * 1000 / 3 : 60 * 1000;
	if (ms < 500)
		ms = 500;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	c->keep = event_new(load_base, -1, EV_PERSIST, conn_keep_cb, c);
	evtimer_add(c->keep, &tv);
	load_pending--;
	load_welcomed++;
	c->state = C_STANDBY;
	load_standing++;
	if (load_armed)
		load_flight_stand(c);
	load_start_more();
	load_standby_arm();
}

/* --standby: what every STANDBY says but its host name. */
static void
load_standby_init(void)
{
	char words[TD_STANDBY_CLOCKS + 3], word[TD_MAX_NAME_LEN + 3];
	struct utsname u;

	memset(&load_sb, 0, sizeof load_sb);
	load_sb.version = TD_STANDBY_VERSION;
	load_sb.ncpus = (uint32_t)load_f.ncpus;
	snprintf(load_sb.kernel, sizeof load_sb.kernel, "%s",
	    uname(&u) == 0 ? u.release : "unknown");
	/* an x86 machine's trace clocks; the file's among them */
	snprintf(load_sb.clocks, sizeof load_sb.clocks, "%s", LOAD_CLOCKS);
	snprintf(words, sizeof words, " %s ", LOAD_CLOCKS);
	snprintf(word, sizeof word, " %s ", load_f.hello.clock);
	if (strstr(words, word) == NULL)
		snprintf(load_sb.clocks + strlen(load_sb.clocks),
		    sizeof load_sb.clocks - strlen(load_sb.clocks), " %s",
		    load_f.hello.clock);
}

/* --standby: once every connection is through TLS or failed, the wait. */
static void
load_standby_arm(void)
{
	struct timeval tv;

	if (load_standby < 0 || load_welcomed < load_n || load_left == 0 ||
	    load_standby_ev != NULL)
		return;
	tv.tv_sec = (time_t)load_standby;
	tv.tv_usec = (suseconds_t)((load_standby - tv.tv_sec) * 1e6);
	load_standby_ev = evtimer_new(load_base, load_standby_cb, NULL);
	evtimer_add(load_standby_ev, &tv);
	fprintf(stderr, "tdload: %d standby agents welcomed, standing by "
	    "for %.1f s\n", load_standing, load_standby);
}

/* Open connections while fewer than --ramp wait for their WELCOME. */
static void
load_start_more(void)
{
	while (load_next < load_n && load_pending < load_ramp)
		load_conn_start(&load_conns[load_next++]);
}

/*
 * --timeout SECONDS without a word from the listener on any connection:
 * every connection without its DONE fails.  A slow listener (valgrind, a
 * saturated machine) that goes on answering is waited for; a stuck one is
 * not.
 */
static void
load_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	int i;

	for (i = 0; i < load_n; i++) {
		if (load_conns[i].state == C_IDLE)
			load_conns[i].state = C_FAILED;
		if (load_conns[i].state != C_OK &&
		    load_conns[i].state != C_FAILED)
			conn_fail(&load_conns[i], "no DONE: nothing from the "
			    "listener for %.0f s", load_timeout);
	}
	event_base_loopexit(load_base, NULL);
}

/* The listener said something: the deadline starts again. */
static void
load_progress(void)
{
	struct timeval tv = { (time_t)load_timeout, 0 };

	if (load_deadline_ev != NULL)
		evtimer_add(load_deadline_ev, &tv);
}

static void
usage(FILE *fp)
{
	fprintf(fp,
"usage: tdload -h HOST -p PORT (--cert F --key F --ca F | --insecure)\n"
"              -n N [-i IDLE] [-t SECONDS] [-r KB | -T SECONDS] [--ramp M]\n"
"              [--together] [--standby SECONDS [--armed]\n"
"              [--trigger K:SECONDS]] [--name PREFIX] [--timeout SECONDS]\n"
"              [-q] FILE\n");
}

enum {
	OPT_CERT = 1000,
	OPT_KEY,
	OPT_CA,
	OPT_INSECURE,
	OPT_RAMP,
	OPT_NAME,
	OPT_TIMEOUT,
	OPT_TOGETHER,
	OPT_STANDBY,
	OPT_ARMED,
	OPT_TRIGGER,
};

static const struct option load_longopts[] = {
	{ "cert", required_argument, NULL, OPT_CERT },
	{ "key", required_argument, NULL, OPT_KEY },
	{ "ca", required_argument, NULL, OPT_CA },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
	{ "ramp", required_argument, NULL, OPT_RAMP },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "together", no_argument, NULL, OPT_TOGETHER },
	{ "standby", required_argument, NULL, OPT_STANDBY },
	{ "armed", no_argument, NULL, OPT_ARMED },
	{ "trigger", required_argument, NULL, OPT_TRIGGER },
	{ NULL, 0, NULL, 0 },
};

int
main(int argc, char **argv)
{
	const char *port = NULL, *cert = NULL, *key = NULL, *ca = NULL;
	struct addrinfo hints;
	struct event *deadline, *term = NULL;
	struct timespec t0;
	struct timeval tv;
	struct rlimit rl;
	bool insecure = false;
	char err[1024];
	int ch, i, ok = 0;
	uint64_t total_pages = 0;
	double spread = 0, trig_secs = 0;
	int trig_agent = -1;
	char *end;

	while ((ch = getopt_long(argc, argv, "h:p:n:i:t:r:T:q", load_longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'h':
			load_host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'n':
			load_n = atoi(optarg);
			break;
		case 'i':
			load_idle = atoi(optarg);
			break;
		case 't':
			load_quiet = atof(optarg);
			break;
		case 'r':
			load_rate = atof(optarg);
			break;
		case 'T':
			spread = atof(optarg);
			break;
		case 'q':
			load_quiet_out = true;
			break;
		case OPT_CERT:
			cert = optarg;
			break;
		case OPT_KEY:
			key = optarg;
			break;
		case OPT_CA:
			ca = optarg;
			break;
		case OPT_INSECURE:
			insecure = true;
			break;
		case OPT_RAMP:
			load_ramp = atoi(optarg);
			break;
		case OPT_NAME:
			load_prefix = optarg;
			break;
		case OPT_TIMEOUT:
			load_timeout = atof(optarg);
			break;
		case OPT_TOGETHER:
			load_together = true;
			break;
		case OPT_STANDBY:
			load_standby = atof(optarg);
			if (load_standby < 0) {
				usage(stderr);
				return 2;
			}
			break;
		case OPT_ARMED:
			load_armed = true;
			break;
		case OPT_TRIGGER:
			/* K:SECONDS */
			trig_agent = (int)strtol(optarg, &end, 10);
			if (end == optarg || *end != ':' || trig_agent < 0) {
				usage(stderr);
				return 2;
			}
			trig_secs = strtod(end + 1, &end);
			if (*end != '\0' || trig_secs < 0) {
				usage(stderr);
				return 2;
			}
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc || load_host == NULL || port == NULL ||
	    load_n < 1 || load_idle < 0 || load_idle > load_n ||
	    load_ramp < 1 || load_quiet < 0 || load_rate < 0 || spread < 0 ||
	    (spread > 0 && load_rate > 0) ||
	    load_timeout <= 0 || (load_armed && load_standby < 0) ||
	    (trig_agent >= 0 && (!load_armed || trig_agent >= load_n)) ||
	    (!insecure && (cert == NULL || key == NULL || ca == NULL)) ||
	    strlen(load_prefix) > TD_MAX_NAME_LEN - 8) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* two descriptors would do; the soft limit is often 1024 */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (load_file_read(argv[optind], &load_f) == -1) {
		fprintf(stderr, "tdload: cannot read '%s': %s\n", argv[optind],
		    strerror(errno));
		return 2;
	}
	load_standby_init();
	if (!insecure &&
	    (load_ctx = td_tls_client_ctx(cert, key, ca, err, sizeof err)) ==
	    NULL) {
		fprintf(stderr, "tdload: %s\n", err);
		return 2;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	if ((i = getaddrinfo(load_host[0] == '[' ? load_host + 1 : load_host,
	    port, &hints, &load_ai)) != 0) {
		fprintf(stderr, "tdload: cannot resolve '%s': %s\n", load_host,
		    gai_strerror(i));
		return 2;
	}
	if ((load_base = event_base_new()) == NULL)
		return 2;
	load_conns = xcalloc(load_n, sizeof *load_conns);
	for (i = 0; i < load_n; i++) {
		load_conns[i].idx = i;
		load_conns[i].idle = i < load_idle;
		snprintf(load_conns[i].name, sizeof load_conns[i].name,
		    "%s-%04d", load_prefix, i);
	}
	for (i = 0; i < load_f.ncpus; i++)
		total_pages += load_f.npages[i];
	if (spread > 0)
		load_rate = total_pages * load_f.page_size / 1024.0 / spread;
	if (load_standby < 0)
		fprintf(stderr, "tdload: %d connections (%d idle for %.1f s, "
		    "%d streaming at %.0f kB/s, 0: full speed), each %" PRIu64
		    " pages of %u CPUs and %.1f MB of metadata\n", load_n,
		    load_idle, load_quiet, load_n - load_idle, load_rate,
		    total_pages, load_f.ncpus,
		    (load_f.head.len + load_f.tail.len) / 1e6);
	if (load_armed)
		load_flight_init(load_base, trig_agent, trig_secs);
	load_left = load_n;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tv.tv_sec = (time_t)load_timeout;
	tv.tv_usec = 0;
	deadline = evtimer_new(load_base, load_deadline_cb, NULL);
	load_deadline_ev = deadline;
	evtimer_add(deadline, &tv);
	if (load_standby >= 0) {
		/* SIGTERM: the standing agents are done, as at their time */
		term = evsignal_new(load_base, SIGTERM, load_standby_cb, NULL);
		evsignal_add(term, NULL);
	}
	load_start_more();
	event_base_dispatch(load_base);
	for (i = 0; i < load_n; i++) {
		struct conn *c = &load_conns[i];

		if (c->state == C_OK) {
			ok++;
			if (!load_quiet_out)
				printf("ok %d %s %s %s %" PRIu64 " %.2f\n", i,
				    c->name, load_standby >= 0 ? "standby" :
				    c->idle ? "idle" : "stream", c->path,
				    c->file_size, c->secs);
		} else
			printf("not ok %d %s %s: %s\n", i, c->name,
			    load_standby >= 0 ? "standby" :
			    c->idle ? "idle" : "stream",
			    c->state == C_FAILED ? c->why : "not started");
	}
	printf("tdload: %d connections: %d done, %d failed; at most %d open "
	    "at once; %.1f MB sent in %.2f s", load_n, ok, load_n - ok,
	    load_peak, load_sent / 1e6, load_since(&t0));
	if (load_standby >= 0)
		printf("; %d standby agents welcomed, %" PRIu64 " KEEPALIVE "
		    "sent", load_standing, load_keepalives);
	printf("\n");
	if (load_armed && load_flight_summary(stdout) != 0)
		ok = -1;
	fflush(stdout);
	load_deadline_ev = NULL;
	event_free(deadline);
	if (load_standby_ev != NULL)
		event_free(load_standby_ev);
	if (term != NULL)
		event_free(term);
	event_base_free(load_base);
	if (load_ctx != NULL)
		SSL_CTX_free(load_ctx);
	freeaddrinfo(load_ai);
	load_file_free(&load_f);
	free(load_conns);
	return ok == load_n ? 0 : 1;
}
