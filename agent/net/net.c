/*
 * net.c: the agent side of the tracedock protocol over TLS (or plain TCP
 * with --insecure): the session with the listener (HELLO, resume, ACKs)
 * over one connection after another, to the collector that took the
 * recording (collectors.h); its time sync is net-tsync.c's.  The recording's bytes, kept until
 * the listener acknowledges them, are stream.c's (net-sink.c frames
 * them); one connection's bytes, and every socket and TLS call, are
 * conn.c's; the thread that dials again is reconnect.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "clock.h"
#include "collectors.h"
#include "conn.h"
#include "hstage.h"
#include "meta.h"
#include "net.h"
#include "net-local.h"
#include "reconnect.h"
#include "stream.h"
#include "tdlimits.h"
#include "tsync.h"
#include "tsyncudp.h"
#include "xmalloc.h"
#include "banned.h"

/* A stuck link is given up after this long without progress. */
#define NET_USER_TIMEOUT_MS	15000
/*
 * ... but a listener whose receive window stays closed this long: it is
 * slow (its kernel answers), and a connection given up is sent again from
 * the last acknowledged byte, to a listener busier still.  As long as the
 * "takes no data" bound of net_serve().
 */
#define NET_WINDOW_TIMEOUT_MS	(NET_USER_TIMEOUT_MS * 4)

/* "what: strerror(errno)" into err (net-local.h). */
int
net_err(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(errno));
	return -1;
}

static int	net_ack(struct net *, const struct td_frame *, char *, size_t);

/*
 * Wait for a frame of one type.  ACKs on the way are applied (when n is
 * given), late time-sync replies skipped; an ERROR ends the wait
 * (net-local.h).
 */
int
net_expect(struct net *n, struct conn *c, uint16_t type,
    struct td_frame *f, bool *fatal, char *err, size_t errlen)
{
	*fatal = false;
	for (;;) {
		if (conn_read_frame(c, f, err, errlen) == -1)
			return -1;
		if (f->type == TD_MSG_ACK && type != TD_MSG_ACK) {
			if (n != NULL && net_ack(n, f, err, errlen) == -1) {
				*fatal = true;
				return -1;
			}
			conn_consume(c, f);
			continue;
		}
		/* a time-sync reply that came after its round gave up */
		if (f->type != TD_MSG_TSYNC_REPLY || type == TD_MSG_TSYNC_REPLY)
			break;
		conn_consume(c, f);
	}
	if (f->type == TD_MSG_ERROR)
		return conn_error_frame(f, fatal, err, errlen,
		    "the listener refused");
	if (f->type != type) {
		snprintf(err, errlen, "the listener sent %s, not %s",
		    td_msg_name(f->type), td_msg_name(type));
		*fatal = true;
		return -1;
	}
	return 0;
}

/*
 * Dial, authenticate and say HELLO (resuming when asked); blocking.
 * Returns 0 with the connection and its WELCOME, else -1 with fatal set
 * when trying again cannot help.
 */
static int
net_open(struct net *n, bool resume, struct conn **cp,
    struct td_welcome *w, bool *fatal, char *err, size_t errlen)
{
	const struct conn_target *t;
	struct td_hello h = n->hello;
	struct td_frame f;
	struct td_buf b;
	struct conn *c;
	uint64_t t1, t4;

	*cp = NULL;
	t = collectors_target(n->cl, n->cur);
	if ((c = conn_open(t, n->ctx, n->np.timeout,
	    NET_USER_TIMEOUT_MS, fatal, err, errlen)) == NULL) {
		/* no answer in time: a serial device nobody answers yet (a
		   guest that boots before its host's listener, or QEMU
		   reconnecting), a listener too busy to finish a handshake
		   or take a connection (a full accept queue drops SYNs) */
		n->told_later = !*fatal && (errno == ETIMEDOUT ||
		    errno == ECONNABORTED);
		return -1;
	}
	if (resume)
		h.flags |= TD_HELLO_RESUME;
	t1 = td_clock_now_ns();
	td_buf_init(&b, TD_MAX_HELLO + TD_FRAME_HEADER);
	if (td_msg_pack_hello(&b, &h) == -1 ||
	    conn_write_all(c, b.data, b.len, NULL) == -1) {
		td_buf_free(&b);
		/* a refused TLS 1.3 client learns why from the alert */
		net_err(err, errlen, "cannot send to the listener");
		if (n->ctx != NULL && conn_read_frame(c, &f, err, errlen) == -1)
			*fatal = true;
		goto fail;
	}
	td_buf_free(&b);
	f.type = 0;
	errno = 0;
	if (net_expect(NULL, c, TD_MSG_WELCOME, &f, fatal, err, errlen) == -1) {
		if (conn_refused(c))
			*fatal = true;	/* e.g. a revoked certificate */
		/* "come back later": out of descriptors, disk, memory; or
		   no WELCOME in time (a listener that busy) */
		n->told_later = !*fatal && (f.type == TD_MSG_ERROR ||
		    errno == ETIMEDOUT);
		goto fail;
	}
	if (td_msg_unpack_welcome(&f, w) == -1) {
		snprintf(err, errlen, "the listener sent a bad WELCOME");
		*fatal = true;
		goto fail;
	}
	conn_consume(c, &f);
	/*
	 * A coarse network part (the first connection only: the reconnection
	 * thread must not touch n): the listener read its clock for WELCOME
	 * after HELLO left and before WELCOME came, so within half that.
	 */
	t4 = td_clock_now_ns();
	if (!resume && w->version >= 5 && w->ref_ns != 0)
		net_tsync_estimate(n,
		    (int64_t)(w->ref_ns - (t1 + (t4 - t1) / 2)),
		    (t4 - t1 + 1) / 2 + 1, t1 + (t4 - t1) / 2);
	if (resume != ((w->flags & TD_WELCOME_RESUMED) != 0)) {
		snprintf(err, errlen, "the listener %s the recording",
		    resume ? "did not resume" : "claims to resume");
		*fatal = true;
		goto fail;
	}
	*cp = c;
	return 0;
fail:
	conn_close(c, false);
	return -1;
}

/* What the reconnection thread calls: net_open() with RESUME. */
static int
net_dial_cb(void *arg, struct conn **c, struct td_welcome *w, bool *fatal,
    char *err, size_t errlen)
{
	return net_open(arg, true, c, w, fatal, err, errlen);
}

/*
 * The recording's stream, its TLS context (the key is read here, once)
 * and its spool file, opened now: all of it before the recorder drops
 * root, which may leave it unable to read the key or write the spool
 * directory.  Frames may be queued at once; net_start() connects.
 */
struct net *
net_new(const struct net_params *np, const struct td_hello *hello,
    char *err, size_t errlen)
{
	struct net *n;

	n = xcalloc(1, sizeof *n);
	n->np = *np;
	n->np.host = xstrdup(np->host);
	n->np.port = xstrdup(np->port);
	n->np.cert = np->cert ? xstrdup(np->cert) : NULL;
	n->np.key = np->key ? xstrdup(np->key) : NULL;
	n->np.ca = np->ca ? xstrdup(np->ca) : NULL;
	n->np.server_name = np->server_name ? xstrdup(np->server_name) : NULL;
	n->np.spool_dir = np->spool_dir ? xstrdup(np->spool_dir) : NULL;
	n->hello = *hello;
	if ((n->cl = collectors_parse(np->host, np->port, np->server_name,
	    !np->insecure, err, errlen)) == NULL ||
	    collectors_open(n->cl, err, errlen) == -1)
		goto fail;
	n->s = stream_new(hello->page_size, hello->ncpus, np->wire,
	    np->spool_dir, np->spool_max);
	if (n->s == NULL) {
		net_err(err, errlen, "cannot start the wire codec");
		goto fail;
	}
	if ((n->rc = reconnect_new(net_dial_cb, n, err, errlen)) == NULL)
		goto fail;
	if ((n->hs = hstage_new()) == NULL) {
		net_err(err, errlen, "cannot hold the header sections");
		goto fail;
	}
	if (!np->insecure) {
		n->ctx = conn_ctx_new(np->cert, np->key, np->ca, err, errlen);
		if (n->ctx == NULL)
			goto fail;
	}
	if (np->spool_max > 0 && np->spool_dir != NULL &&
	    stream_spool_open(n->s) == -1) {
		snprintf(err, errlen, "cannot spool in '%s': %s",
		    np->spool_dir, strerror(errno));
		goto fail;
	}
	return n;
fail:
	net_close(n);
	return NULL;
}

/*
 * The first connection, to collector i: connect, authenticate, introduce
 * the recording.  The collector that takes it keeps it (n->cur).
 */
int
net_start(struct net *n, int i, char *err, size_t errlen)
{
	struct td_welcome w;
	bool fatal;

	n->told_later = n->refused = false;
	n->cur = i;
	if (net_open(n, false, &n->c, &w, &fatal, err, errlen) == -1) {
		n->refused = fatal;
		return -1;
	}
	/* the sections held back: those the listener has by reference */
	if (n->hs != NULL && hstage_send(n->hs, n->c, w.version, n->s,
	    n->note, sizeof n->note, err, errlen) == -1) {
		conn_close(n->c, false);
		n->c = NULL;
		return -1;
	}
	hstage_free(n->hs);
	n->hs = NULL;
	snprintf(n->identity, sizeof n->identity, "%s", w.identity);
	n->version = w.version;
	n->tsync_interval = w.tsync_interval;
	net_tsync_welcome(n, &w);
	n->idle_timeout = w.idle_timeout;
	n->up_since_ms = td_clock_now_ms();
	conn_set_blocking(n->c, false, n->np.timeout * 1000);
	return 0;
}

/*
 * Whether net_start() is worth trying again: the listener said "come back
 * later", or a serial device's preamble got no answer yet.
 */
bool
net_later(const struct net *n)
{
	return n->told_later;
}

/* Whether the collector net_start() tried refused this agent for good. */
bool
net_refused(const struct net *n)
{
	return n->refused;
}

/* How many collectors -h gave. */
int
net_collectors(const struct net *n)
{
	return collectors_count(n->cl);
}

/* Where collector i is, for messages. */
const char *
net_collector(const struct net *n, int i)
{
	return collectors_where(n->cl, i);
}

/* Wait one backoff before net_start() tries again. */
void
net_pause(struct net *n)
{
	reconnect_pause(n->rc);
}

/* The listener's time-sync interval. */
uint32_t
net_tsync_interval(const struct net *n)
{
	return n->tsync_interval;
}

/* What the header cache saved at the first connection, "" if nothing. */
const char *
net_note(const struct net *n)
{
	return n->note;
}

/* The listener's name for this agent. */
const char *
net_identity(const struct net *n)
{
	return n->identity;
}

/* Where the listener is, for messages (conn_target_describe()). */
const char *
net_where(struct net *n)
{
	char rs[128];
	size_t l;

	snprintf(n->where, sizeof n->where, "%s",
	    collectors_where(n->cl, n->cur));
	if (n->c != NULL) {
		conn_resync_describe(n->c, rs, sizeof rs);
		l = strlen(n->where);
		if (rs[0] != '\0')
			snprintf(n->where + l, sizeof n->where - l, " (%s)",
			    rs);
	}
	return n->where;
}

/* The connection's TLS, for messages. */
void
net_tls(const struct net *n, char *buf, size_t len)
{
	if (n->c != NULL)
		conn_tls_describe(n->c, buf, len);
	else
		snprintf(buf, len, "%s", "");
}

/* Whether a connection is up. */
bool
net_up(const struct net *n)
{
	return n->c != NULL;
}

/* Whether the listener is lost for good. */
bool
net_fatal(const struct net *n)
{
	return n->fatal;
}

/* The connection's descriptor, for the recorder's epoll set; -1 down. */
int
net_fd(const struct net *n)
{
	return n->c != NULL ? conn_fd(n->c) : -1;
}

/* Readable when a reconnection attempt is over. */
int
net_event_fd(const struct net *n)
{
	return reconnect_fd(n->rc);
}

/* Connections resumed so far. */
unsigned int
net_reconnects(const struct net *n)
{
	return n->reconnects;
}

/* Whether there is something to send and a connection to send it. */
bool
net_want_write(const struct net *n)
{
	return net_up(n) && (stream_can_send(n->s) ||
	    conn_wpending(n->c) != 0);
}

/* Bytes not sent yet: the stream's and TLS records not handed over. */
size_t
net_pending(const struct net *n)
{
	return stream_pending(n->s) + conn_wpending(n->c);
}

/* Bytes the listener has not acknowledged. */
uint64_t
net_unacked(const struct net *n)
{
	return stream_unacked(n->s);
}

/* Whether the stream is full: the rings must wait. */
bool
net_congested(const struct net *n)
{
	return stream_congested(n->s);
}

/* Whether the stream is below its low watermark again. */
bool
net_relieved(const struct net *n)
{
	return stream_relieved(n->s);
}

/* Bytes handed to connections, resends included. */
uint64_t
net_sent(const struct net *n)
{
	return stream_total_sent(n->s);
}

/* Page bytes framed, before wire compression. */
uint64_t
net_raw(const struct net *n)
{
	return stream_raw(n->s);
}

/* Bytes of the frames that carried the pages. */
uint64_t
net_framed(const struct net *n)
{
	return stream_framed(n->s);
}

/* The listener has everything before offset ack on its disk. */
static int
net_ack(struct net *n, const struct td_frame *f, char *err, size_t errlen)
{
	uint64_t off;

	if (td_msg_unpack_ack(f, &off) == -1) {
		snprintf(err, errlen, "the listener sent a bad ACK");
		return -1;
	}
	if (stream_ack(n->s, off) == -1) {
		snprintf(err, errlen, "the listener acknowledged %" PRIu64
		    " bytes, more than were sent", off);
		return -1;
	}
	return 0;
}

/* Queue the command lines now (CMDLINES, version 6): part of the recording. */
int
net_cmdlines(struct net *n, const void *p, size_t len, char *err,
    size_t errlen)
{
	struct td_buf *q;

	if ((q = stream_frame(n->s)) == NULL ||
	    td_msg_pack_cmdlines(q, p, len) == -1) {
		snprintf(err, errlen, "cannot frame the command lines");
		return -1;
	}
	stream_added(n->s);
	return 0;
}

uint16_t
net_version(const struct net *n)
{
	return n->version;
}

/* ---- the connection --------------------------------------------------- */

/*
 * Send q until the socket would block.  The open PAGES batch is never sent
 * before it is closed (its header is not final yet).
 */
int
net_flush(struct net *n, char *err, size_t errlen)
{
	const uint8_t *p;
	size_t len;
	ssize_t w;

	if (!net_up(n)) {
		snprintf(err, errlen, "no connection");
		return -1;
	}
	for (;;) {
		if ((len = stream_sendable(n->s, &p)) == 0)
			break;
		w = conn_write_some(n->c, p, len);
		if (w == -1 && (errno == EAGAIN || errno == EINTR))
			break;
		if (w == -1)
			return net_err(err, errlen, "lost the listener");
		stream_sent(n->s, (size_t)w);
		n->last_send_ms = td_clock_now_ms();
	}
	if (conn_wflush(n->c) == -1) {
		snprintf(err, errlen, "lost the listener: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Flush down to limit bytes, waiting up to ms for the socket; past that
 * the link is merely slow (0, with more than limit still pending).
 */
int
net_flush_to(struct net *n, size_t limit, int ms, char *err, size_t errlen)
{
	uint64_t end = td_clock_now_ms() + (uint64_t)ms, now;
	int ev;

	while (net_pending(n) > limit) {
		if (net_flush(n, err, errlen) == -1)
			return -1;
		if (net_pending(n) <= limit || !net_want_write(n))
			break;
		if ((now = td_clock_now_ms()) >= end)
			break;
		if ((ev = conn_poll(n->c, POLLOUT | POLLIN,
		    (int)(end - now))) <= 0)
			break;
		if ((ev & POLLIN) && net_readable(n, err, errlen) == -1)
			return -1;
	}
	return 0;
}

/* Handle the frames in c->in: ACKs, ERROR, late replies. */
static int
net_frames(struct net *n, char *err, size_t errlen)
{
	struct td_frame f;
	int pr;

	while ((pr = conn_frame(n->c, &f)) == 1) {
		switch (f.type) {
		case TD_MSG_ACK:
			if (net_ack(n, &f, err, errlen) == -1) {
				n->fatal = true;
				return -1;
			}
			break;
		case TD_MSG_ERROR:
			conn_error_frame(&f, &n->fatal, err, errlen,
			    "the listener stopped the recording");
			n->retry_later = !n->fatal;
			return -1;
		case TD_MSG_DONE:
			if (td_msg_unpack_done(&f, &n->done_msg) == 0)
				n->done = true;
			break;
		case TD_MSG_TSYNC_REPLY:
			break;		/* a late one: its round is over */
		default:
			snprintf(err, errlen, "the listener sent %s",
			    td_msg_name(f.type));
			n->fatal = true;
			return -1;
		}
		conn_consume(n->c, &f);
	}
	if (pr == -1) {
		snprintf(err, errlen, "the listener sent a bad frame");
		n->fatal = true;
		return -1;
	}
	return 0;
}

/* The listener speaks during a recording: ACKs, or why it goes. */
int
net_readable(struct net *n, char *err, size_t errlen)
{
	ssize_t r;

	if (!net_up(n)) {
		snprintf(err, errlen, "no connection");
		return -1;
	}
	for (;;) {
		r = conn_fill(n->c);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r == 0) {
			snprintf(err, errlen, "the listener closed the "
			    "connection");
			return -1;
		}
		if (r < 0 && errno == EMSGSIZE) {
			snprintf(err, errlen, "the listener sent too much");
			n->fatal = true;
			return -1;
		}
		if (r < 0)
			return net_err(err, errlen, "lost the listener");
		if (net_frames(n, err, errlen) == -1)
			return -1;
		if (n->done)
			return 0;	/* the listener closes after DONE */
	}
	return net_frames(n, err, errlen);
}

/* A KEEPALIVE when the link has been quiet for a third of the timeout. */
int
net_keepalive(struct net *n, char *err, size_t errlen)
{
	struct td_buf b;
	int r;

	if (net_up(n))
		conn_patience(n->c, NET_USER_TIMEOUT_MS, NET_WINDOW_TIMEOUT_MS);
	if (!net_up(n) || n->idle_timeout == 0 || net_pending(n) != 0 ||
	    stream_batch_open(n->s) || td_clock_now_ms() - n->last_send_ms <
	    (uint64_t)n->idle_timeout * 1000 / 3)
		return 0;
	td_buf_init(&b, TD_FRAME_HEADER);
	td_msg_pack_keepalive(&b);
	conn_set_blocking(n->c, true, n->np.timeout * 1000);
	r = conn_write_all(n->c, b.data, b.len, NULL);
	conn_set_blocking(n->c, false, n->np.timeout * 1000);
	td_buf_free(&b);
	n->last_send_ms = td_clock_now_ms();
	if (r == -1)
		return net_err(err, errlen, "lost the listener");
	return 0;
}

/* ---- reconnecting ------------------------------------------------------ */

/* Start a reconnection attempt unless one runs or it is pointless. */
static void
net_reconnect(struct net *n)
{
	if (n->fatal || reconnect_running(n->rc))
		return;
	n->nerr[0] = '\0';
	if (reconnect_start(n->rc, n->retry_later, n->nerr,
	    sizeof n->nerr) == -1)
		n->fatal = true;
}

/* The connection broke: what was sent and not acknowledged goes again. */
void
net_down(struct net *n)
{
	/* a connection that lived a while starts the backoff afresh */
	if (td_clock_now_ms() - n->up_since_ms > 10000)
		reconnect_reset(n->rc);
	conn_close(n->c, false);
	n->c = NULL;
	stream_rewind(n->s);
	net_reconnect(n);
}

/* Take the result of a reconnection attempt (net.h). */
int
net_reconnected(struct net *n, char *err, size_t errlen)
{
	struct td_welcome w;
	struct conn *c;
	uint64_t lo, hi;

	if (!reconnect_running(n->rc)) {
		snprintf(err, errlen, "%s", n->nerr[0] ? n->nerr :
		    "not reconnecting");
		return -1;
	}
	if (!reconnect_over(n->rc))
		return -1;	/* not yet */
	if (reconnect_take(n->rc, &c, &w, err, errlen) == -1) {
		n->fatal = true;
		return -1;
	}
	if (stream_resume(n->s, w.resume_offset, &lo, &hi) == -1) {
		snprintf(err, errlen, "the listener wants the recording from "
		    "byte %" PRIu64 ", this agent holds %" PRIu64 " to %" PRIu64,
		    w.resume_offset, lo, hi);
		conn_close(c, false);
		n->fatal = true;
		return -1;
	}
	n->c = c;
	n->version = w.version;
	n->tsync_interval = w.tsync_interval;
	net_tsync_welcome(n, &w);
	n->idle_timeout = w.idle_timeout;
	n->reconnects++;
	n->retry_later = false;
	conn_set_blocking(n->c, false, n->np.timeout * 1000);
	n->last_send_ms = n->up_since_ms = td_clock_now_ms();
	/* a DONE may follow at once: the recording was finished already */
	return net_frames(n, err, errlen);
}

/* ---- the end ------------------------------------------------------------ */

/* A stopping signal pending (net.h). */
int
net_stop_signal(void)
{
	static const int stop[] = { SIGINT, SIGTERM, SIGHUP };
	sigset_t set;
	size_t i;

	if (sigpending(&set) == -1)
		return 0;
	for (i = 0; i < sizeof stop / sizeof *stop; i++)
		if (sigismember(&set, stop[i]) == 1)
			return stop[i];
	return 0;
}

/*
 * Send, read ACKs and reconnect as needed until DONE came (room false) or
 * the stream is below its low watermark again (room true), for up to wait
 * seconds without a connection; a listener that takes nothing for 4 user
 * timeouts is a lost one.  Given up already (a net_make_room() that
 * failed): err says why, as it did then.
 */
static int
net_serve(struct net *n, bool room, int wait, char *err, size_t errlen)
{
	uint64_t down_ms, last, now;
	int left, sig;

	if (n->fatal) {
		if (err[0] == '\0')
			snprintf(err, errlen, "the listener is lost");
		return -1;
	}
	err[0] = '\0';
	down_ms = 0;
	last = td_clock_now_ms();
	while (room ? !net_relieved(n) && !n->done : !n->done) {
		now = td_clock_now_ms();
		if (!net_up(n))
			down_ms += now - last;
		last = now;
		if (n->fatal)
			return -1;
		if (!net_up(n) && down_ms >= (uint64_t)wait * 1000) {
			if (err[0] == '\0')
				snprintf(err, errlen, room ? "the listener "
				    "is unreachable" : "no DONE from the "
				    "listener");
			n->fatal = true;
			return -1;
		}
		left = (int)((uint64_t)wait * 1000 - down_ms);
		/*
		 * A listener that stays away (down, or "come back later" while
		 * its disk or --quota is full) would keep a stopped agent for
		 * the whole wait: SIGINT or SIGTERM then gives it up.  Only
		 * after a second without a connection, so that the signal
		 * that stopped the recording does not end its delivery.
		 */
		if (!net_up(n) && down_ms >= 1000 && (sig = net_stop_signal())) {
			snprintf(err, errlen, "%s while the listener was "
			    "unreachable: gave up waiting for it", sig ==
			    SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" :
			    "SIGHUP");
			n->fatal = true;
			reconnect_stop(n->rc);
			return -1;
		}
		if (!net_up(n)) {
			net_reconnect(n);
			/* a second at most: the signals are looked at */
			if (reconnect_wait(n->rc, left < 1000 ? left : 1000) &&
			    net_reconnected(n, err, errlen) == -1 && !n->fatal)
				net_down(n);
			continue;
		}
		/* up: a listener that takes nothing for long is a lost one */
		conn_patience(n->c, NET_USER_TIMEOUT_MS, NET_WINDOW_TIMEOUT_MS);
		if (now - n->last_send_ms > (uint64_t)NET_WINDOW_TIMEOUT_MS &&
		    net_want_write(n)) {
			snprintf(err, errlen, "the listener takes no data");
			net_down(n);
			continue;
		}
		left = 1000;
		if (net_flush(n, err, errlen) == -1) {
			net_down(n);
			continue;
		}
		if (conn_poll(n->c, POLLIN | (net_want_write(n) ? POLLOUT : 0),
		    left) <= 0)
			continue;
		if (net_readable(n, err, errlen) == -1 && !n->done) {
			if (n->fatal)
				return -1;
			net_down(n);
		}
	}
	return 0;
}

/*
 * The end: the stream's memory and spool are full and the rings still
 * hold the last pages.  Wait for the listener to take enough (net_serve()).
 */
int
net_make_room(struct net *n, int wait, char *err, size_t errlen)
{
	if (stream_batch_end(n->s) == -1) {
		snprintf(err, errlen, "cannot frame the pages");
		return -1;
	}
	return net_serve(n, true, wait, err, errlen);
}

/* END, then everything sent until the listener's DONE (net.h). */
int
net_finish(struct net *n, const uint64_t *pages, int ncpus, int wait,
    char *path, size_t pathlen, char *err, size_t errlen)
{
	struct td_buf *q;
	struct td_end *e;
	int i;

	if ((q = stream_frame(n->s)) == NULL)
		return -1;
	e = xcalloc(1, sizeof *e);
	e->ncpus = ncpus;
	for (i = 0; i < ncpus; i++)
		e->pages[i] = pages[i];
	i = td_msg_pack_end(q, e);
	free(e);
	if (i == -1) {
		snprintf(err, errlen, "cannot frame END");
		return -1;
	}
	/* --reconnect-wait bounds the time without a connection */
	if (net_serve(n, false, wait, err, errlen) == -1)
		return -1;
	snprintf(path, pathlen, "%s", n->done_msg.path);
	return 0;
}

/* Tell a reconnection under way to stop, without waiting for it. */
void
net_stop(struct net *n)
{
	if (n != NULL)
		reconnect_stop(n->rc);
}

/* Close the connection and free everything. */
void
net_close(struct net *n)
{
	if (n == NULL)
		return;
	reconnect_free(n->rc);
	tsyncudp_free(n->udp);
	explicit_bzero(n->udp_key, sizeof n->udp_key);
	conn_close(n->c, true);
	collectors_free(n->cl);
	conn_ctx_free(n->ctx);
	stream_free(n->s);
	hstage_free(n->hs);
	free((char *)(uintptr_t)n->np.host);
	free((char *)(uintptr_t)n->np.port);
	free((char *)(uintptr_t)n->np.cert);
	free((char *)(uintptr_t)n->np.key);
	free((char *)(uintptr_t)n->np.ca);
	free((char *)(uintptr_t)n->np.server_name);
	free((char *)(uintptr_t)n->np.spool_dir);
	free(n);
}
