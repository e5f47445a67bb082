/*
 * agentconn.c: one agent's connection to tdlisten (see agentconn.h).
 *
 *	C_RESYNC	the resynchronisation preamble is looked for
 *			(preamble.c; required on a Unix socket, optional
 *			else), in a handshake slot (TLS) or a session slot
 *	C_HANDSHAKE	TLS handshake running, in a handshake slot (admit.c);
 *			a deadline covers the handshake and the HELLO
 *	C_OPEN		through TLS (plain: at once), in a session slot: the
 *			session reads and writes
 *	C_PAUSING	an ERROR (come back later) goes out; then the
 *			recording waits for the agent to resume
 *	C_CLOSING	an ERROR goes out; then the connection is freed (at
 *			most two seconds later)
 *
 * A TLS connection first holds a handshake slot, and a session slot
 * (--max-sessions) only once its certificate is checked, so that a crowd
 * of connections that never finish their handshake cannot take the slots
 * of agents.  A connection admit.c refuses is closed at once rather than
 * left in the listen queue: a queue that stops moving would keep everyone
 * out, the next agent from another address included.
 *
 * Back-pressure: a session that holds more than its memory budget pauses
 * (its agent comes back later, from the last checkpoint); one whose agent
 * does not read its replies (more than TD_MAX_UNSENT unsent) is not read
 * either until they go, and let go after the idle timeout.  A frame still
 * arriving counts at its full size once its header is in, and a PAGES_Z
 * frame at the pages it expands to before it is expanded: one frame cannot
 * take a session past its budget before the check.  A session gets
 * TD_SESSION_TURN bytes of work per turn of the loop, or TD_SESSION_TURN_MS
 * of its time on a slow listener, then the others go:
 * its next turn is a timer of no delay (agentconn_later), which runs only once
 * the loop has polled the sockets again and served those that are ready.
 * A deferred callback would not wait for them: libevent 2.1 runs it in the
 * same turn, up to 32 times, and the other sessions' sockets wait unread
 * (64 s under valgrind: honest agents lost the listener, e2e-budget).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "admit.h"
#include "buf.h"
#include "client.h"
#include "clock.h"
#include "agentconn.h"
#include "conn-tls.h"
#include "listener.h"
#include "log.h"
#include "output.h"
#include "preamble.h"
#include "registry.h"
#include "session.h"
#include "sockio.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "tls.h"
#include "xmalloc.h"
#include "banned.h"

enum agentconn_state {
	C_RESYNC,
	C_HANDSHAKE,
	C_OPEN,
	C_PAUSING,
	C_CLOSING,
};

/*
 * One accepted connection: the tdproto state machine in a client of the
 * client layer (client.h), which owns the socket, the bufferevent, the
 * deadline, the label before the session's, the list and the slot.
 */
struct agentconn {
	struct client		*cl;
	struct preamble		*pre;		/* in C_RESYNC */
	bool			 required;	/* the preamble (Unix) */
	struct bufferevent	*bev;		/* cl's, once made */
	struct session		*s;		/* NULL in the handshake */
	enum agentconn_state		 state;
	bool			 big;		/* sockio_big() said so */
	size_t			 rlow;		/* bev's read watermark now */
	bool			 out_blocked;	/* replies unread: no reads */
	bool			 rec_wait;	/* a cut copies: no reads */
	struct event		*later;		/* its next turn (agentconn_later) */
	bool			 eof;		/* the agent closed: read what came */
	char			 peer[128];
};

static struct event_base		*agentconn_base;
static const struct listener_config	*agentconn_cfg;
static SSL_CTX				*agentconn_ctx;

static void	agentconn_read_cb(struct bufferevent *, void *);
static void	agentconn_write_cb(struct bufferevent *, void *);
static void	agentconn_event_cb(struct bufferevent *, short, void *);
static void	agentconn_verdict(struct agentconn *, enum session_verdict);

static const char *
agentconn_label(const struct agentconn *c)
{
	return c->s != NULL ? session_label(c->s) : client_label(c->cl);
}

/*
 * The client layer's free hook: the preamble's scan, the handshake slot
 * and the session go (the client frees the socket and its session slot).
 */
static void
agentconn_free_cb(void *arg)
{
	struct agentconn *c = arg;

	preamble_free(c->pre);
	admit_release(c);
	session_free(c->s);
	event_free(c->later);
	free(c);
}

/* The one way a connection goes: its client with it. */
static void
agentconn_free(struct agentconn *c)
{
	client_free(c->cl);
}

/*
 * Whether all that was written went out.  A write callback does not say
 * so by itself: libevent runs it deferred after every drain of the output,
 * and one for an earlier frame may come after the last was queued.
 */
static bool
agentconn_sent_all(struct bufferevent *bev)
{
	return evbuffer_get_length(bufferevent_get_output(bev)) == 0;
}

/* Flush what is written, then free c (at most two seconds from now). */
static void
agentconn_closing(struct agentconn *c)
{
	c->state = C_CLOSING;
	client_close_after_drain(c->cl, 2);
}

/* Send the session's ERROR, then go. */
static void
agentconn_close_telling(struct agentconn *c)
{
	const struct td_buf *e = session_error(c->s);

	agentconn_closing(c);
	bufferevent_write(c->bev, e->data, e->len);
}

/*
 * Through TLS but no session for it: an ERROR RETRY says why (the agent
 * logs it and tries again, as it does for a full disk), then c goes.
 */
static void
agentconn_close_later(struct agentconn *c, const char *why)
{
	struct td_buf e;

	td_buf_init(&e, TD_MAX_ERROR_LEN + 64);
	td_msg_pack_error(&e, TD_ERR_RETRY, why);
	agentconn_closing(c);
	bufferevent_write(c->bev, e.data, e.len);
	td_buf_free(&e);
}

/* The connection went: the session lets its recording wait, or closes. */
static void
agentconn_lost(struct agentconn *c, const char *why)
{
	agentconn_verdict(c, session_lost(c->s, why));
}

/* The ERROR RETRY of a pause went out: now let go of the connection. */
static void
agentconn_pause_write_cb(struct bufferevent *bev, void *arg)
{
	if (agentconn_sent_all(bev))
		agentconn_lost(arg, NULL);
}

static void
agentconn_pause_event_cb(struct bufferevent *bev, short what, void *arg)
{
	agentconn_lost(arg, NULL);
}

/* Tell the agent to come back later, then let the recording wait. */
static void
agentconn_pause(struct agentconn *c)
{
	struct timeval tv = { 5, 0 };
	const struct td_buf *e = session_error(c->s);

	c->state = C_PAUSING;
	c->out_blocked = false;
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	bufferevent_disable(c->bev, EV_READ);
	client_setcb(c->cl, NULL, agentconn_pause_write_cb,
	    agentconn_pause_event_cb);
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	bufferevent_write(c->bev, e->data, e->len);
}

/* Act on what the session said. */
static void
agentconn_verdict(struct agentconn *c, enum session_verdict v)
{
	switch (v) {
	case SESSION_GO:
		break;
	case SESSION_CLOSE:
		agentconn_close_telling(c);
		break;
	case SESSION_QUIET:
		agentconn_free(c);
		break;
	case SESSION_PAUSE:
		agentconn_pause(c);
		break;
	}
}

/* Send what the session wrote; a time-sync reply at once. */
static void
agentconn_flush(struct agentconn *c)
{
	struct td_buf *out;
	bool urgent;

	out = session_output(c->s, &urgent);
	if (out->len == 0)
		return;
	if (urgent)
		sockio_send(c->bev, out->data, out->len);
	else
		bufferevent_write(c->bev, out->data, out->len);
	td_buf_reset(out);
}

/*
 * The session wrote on its own (a standby agent's START): send it.  Or
 * its recording's cut is over: read again, once the checkpoint that
 * follows it is taken (a cut that failed closes the session there).
 */
static void
agentconn_kick_cb(void *arg)
{
	struct agentconn *c = arg;
	enum session_verdict v;

	agentconn_flush(c);
	if (!c->rec_wait || c->state != C_OPEN || session_waits(c->s))
		return;
	c->rec_wait = false;
	if ((v = session_tick(c->s)) != SESSION_GO) {
		agentconn_verdict(c, v);	/* c may be gone */
		return;
	}
	agentconn_flush(c);
	bufferevent_enable(c->bev, EV_READ);
	bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS |
	    BEV_TRIG_DEFER_CALLBACKS);
}

/*
 * Read c again in a later turn of the loop, once every other session with
 * something to read had its turn.
 */
static void
agentconn_later(struct agentconn *c)
{
	static const struct timeval now = { 0, 0 };

	evtimer_add(c->later, &now);
}

/* c's turn came again (agentconn_later): read on, unless it stopped since. */
static void
agentconn_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agentconn *c = arg;

	if (c->state == C_OPEN && c->bev != NULL && (c->eof ||
	    (bufferevent_get_enabled(c->bev) & EV_READ)))
		agentconn_read_cb(c->bev, c);
}

/* Arm the idle timeout of a streaming session. */
static void
agentconn_idle(struct agentconn *c)
{
	struct timeval tv = { agentconn_cfg->idle_timeout, 0 };

	bufferevent_set_timeouts(c->bev, agentconn_cfg->idle_timeout > 0 ? &tv :
	    NULL, NULL);
}

/* What a connection holds besides its session's recording. */
static uint64_t
agentconn_held(const struct agentconn *c, size_t coming)
{
	return sizeof *c + coming +
	    evbuffer_get_length(bufferevent_get_output(c->bev)) +
	    evbuffer_get_length(bufferevent_get_input(c->bev));
}

/*
 * Whether a streaming session must stop for now: over a memory budget (it
 * is paused: its agent comes back later, from the last checkpoint, and
 * what it held is given back), or with more than TD_MAX_UNSENT of replies
 * its agent does not read (reading stops until they go; an agent that
 * never reads is let go after the idle timeout).  Nobody else notices.
 * coming: bytes of a frame on its way that the session waits for.
 */
static bool
agentconn_hold_back(struct agentconn *c, size_t coming)
{
	struct timeval tv = { agentconn_cfg->idle_timeout, 0 };
	enum session_verdict v;

	if (c->state != C_OPEN || session_phase(c->s) != SESSION_STREAM)
		return false;
	/* its recording cuts: read again when the copy is done */
	if (session_waits(c->s)) {
		c->rec_wait = true;
		bufferevent_disable(c->bev, EV_READ);
		return true;
	}
	if ((v = session_account(c->s,
	    agentconn_held(c, coming))) != SESSION_GO) {
		agentconn_verdict(c, v);
		return true;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) <=
	    TD_MAX_UNSENT)
		return false;
	if (!c->out_blocked) {
		log_debug("%s: %zu bytes of replies unread: not reading "
		    "(%zu bytes received wait)", agentconn_label(c),
		    evbuffer_get_length(bufferevent_get_output(c->bev)),
		    evbuffer_get_length(bufferevent_get_input(c->bev)));
		c->out_blocked = true;
		bufferevent_disable(c->bev, EV_READ);
		bufferevent_setwatermark(c->bev, EV_WRITE, TD_MAX_UNSENT / 2,
		    0);
		bufferevent_set_timeouts(c->bev, NULL,
		    agentconn_cfg->idle_timeout > 0 ? &tv : NULL);
	}
	return true;
}

/* HELLO is done: the deadline is over, an idle agent is a lost one. */
static void
agentconn_streaming(struct agentconn *c)
{
	agentconn_idle(c);
	client_deadline_clear(c->cl);
	client_done_waiting(c->cl);
}

/*
 * Wake the read callback once low bytes wait; set only when it changes
 * (libevent adds the read event again at each call: per page, that was
 * the listener's most frequent call).
 */
static void
agentconn_read_low(struct agentconn *c, size_t low)
{
	if (c->rlow == low)
		return;
	bufferevent_setwatermark(c->bev, EV_READ, low, 0);
	c->rlow = low;
}

static void
agentconn_read_cb(struct bufferevent *bev, void *arg)
{
	struct agentconn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	enum session_verdict v;
	enum session_phase was;
	uint64_t rx_ns, t0;
	size_t len, want, coming, n, k, turn = 0;
	ssize_t used;
	bool more, pumped = false;

	/* its turn is over: what came since waits for the next */
	if (c->s == NULL || evtimer_pending(c->later, NULL))
		return;
	/* the reference time of this read, for time-sync replies */
	rx_ns = timesync_now(CLOCK_MONOTONIC);
	t0 = td_clock_now_ms();
	if (agentconn_hold_back(c, 0))
		return;
	/* the rest of what waits, at once (unless enough waits already: a
	   session that stops for its replies must not gather input) */
	if (evbuffer_get_length(in) < TD_TLS_READ_AHEAD &&
	    sockio_pump(bev, c->big, agentconn_label(c)))
		agentconn_later(c);		/* more may wait: the next turn */
	for (;;) {
		len = evbuffer_get_length(in);
		want = session_want(c->s, &more);
		/* a frame still arriving counts at its full size, a whole
		   one at what it will expand to (PAGES_Z: its pages) too */
		coming = len < want ? want - len : more ? 0 :
		    session_expands(c->s, evbuffer_pullup(in, want), want);
		if (agentconn_hold_back(c, coming))
			return;		/* paused, or waits to write */
		if (turn >= TD_SESSION_TURN || (turn > 0 &&
		    td_clock_now_ms() - t0 >= TD_SESSION_TURN_MS)) {
			/* the others' turn: this session's next comes later */
			agentconn_later(c);
			return;
		}
		if (len < want || len == 0) {
			/*
			 * What OpenSSL read already is not waited for: a
			 * pump that stopped at its budget left records in
			 * OpenSSL, and with nothing more on the socket
			 * libevent never asks for them (the frame they end
			 * waited until the idle timeout: e2e-stream, a wire
			 * zstd agent and a listener under valgrind).
			 */
			if (!pumped && sockio_held(bev)) {
				pumped = true;
				if (sockio_pump(bev, c->big, agentconn_label(c)))
					agentconn_later(c);
				continue;
			}
			if (c->eof) {
				agentconn_lost(c, "connection closed before "
				    "the end of the recording");
				return;		/* c is gone */
			}
			/* wake up only when it is all in */
			agentconn_read_low(c, want);
			if (len == 0)
				sockio_rest(bev);	/* idle: no buffer */
			return;
		}
		agentconn_read_low(c, 0);
		n = want;
		if (more) {
			/* what is contiguous, so that nothing is copied */
			k = evbuffer_get_contiguous_space(in);
			n = k == 0 || k > len ? len : k < want ? want : k;
		}
		was = session_phase(c->s);
		/* the descriptors of every connection, handshakes too */
		used = session_input(c->s, evbuffer_pullup(in, n), n, rx_ns,
		    client_count(CLIENT_TDPROTO) + admit_handshakes(), &turn,
		    &v);
		agentconn_flush(c);
		if (used == -1) {
			agentconn_verdict(c, v);
			return;		/* c may be gone */
		}
		evbuffer_drain(in, (size_t)used);
		if (was == SESSION_HELLO &&
		    session_phase(c->s) != SESSION_HELLO)
			agentconn_streaming(c);
		if (session_phase(c->s) == SESSION_DONE)
			return;
	}
}

static void
agentconn_write_cb(struct bufferevent *bev, void *arg)
{
	struct agentconn *c = arg;

	/* the agent read its replies: read it again */
	if (c->out_blocked && evbuffer_get_length(bufferevent_get_output(bev))
	    <= TD_MAX_UNSENT / 2) {
		c->out_blocked = false;
		bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
		agentconn_idle(c);
		bufferevent_enable(bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(bev)) > 0 ||
		    sockio_held(bev))
			agentconn_read_cb(bev, c);
		return;
	}
	/* DONE is out: the agent closes, or we do */
	if (c->s != NULL && session_phase(c->s) == SESSION_DONE &&
	    agentconn_sent_all(bev))
		agentconn_lost(c, NULL);
}

/* A connection closed in its handshake: a refusal, counted. */
static void
agentconn_refuse(struct agentconn *c, const char *why)
{
	admit_refused(ADMIT_R_FAILED, "%s: closing: %s", agentconn_label(c),
	    why);
	agentconn_free(c);
}

/* A session's recording was taken over by a later one: c goes. */
static void
agentconn_gone_cb(void *arg)
{
	struct agentconn *c = arg;

	agentconn_free(c);
}

/* The identity of a plain (--insecure) connection: its address. */
static void
agentconn_plain_identity(const char *peer, char *identity, size_t len)
{
	snprintf(identity, len, "%.*s", (int)len - 1, peer);
	if (strrchr(identity, ':') != NULL)
		*strrchr(identity, ':') = '\0';
	output_sanitize(identity);
}

/*
 * Through TLS: the verified certificate names the agent; its handshake
 * slot goes to the next, it takes a session slot (when one is free, or
 * one kept for the resumes of its recordings, and its identity does not
 * hold too many waiting for their HELLO already).
 */
static void
agentconn_handshake_done(struct agentconn *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	char identity[TD_MAX_NAME_LEN + 1], label[TD_MAX_NAME_LEN + 160];
	enum client_verdict v;

	if (td_tls_peer_identity(ssl, identity, sizeof identity) == -1) {
		agentconn_refuse(c, "no verified client certificate, or its "
		    "name is longer than 64 bytes once escaped");
		return;
	}
	snprintf(label, sizeof label, "session %s (%s)", identity, c->peer);
	client_set_label(c->cl, label);
	v = client_admit(c->cl, identity);
	if (v == CLIENT_IDENTITY) {
		admit_refused(ADMIT_R_IDENTITY, "%s: closing: %d connections "
		    "of '%s' wait for their HELLO already "
		    "(--max-per-identity)", label,
		    agentconn_cfg->max_per_identity, identity);
		agentconn_close_later(c, "too many connections of this "
		    "identity wait for their HELLO (--max-per-identity): come "
		    "back later");
		return;
	}
	admit_release(c);
	if (v != CLIENT_YES && v != CLIENT_RESERVE) {
		/* the sessions of every kind: agents, trace-cmd, uftrace */
		admit_refused(ADMIT_R_SESSIONS, "%s: closing: %d sessions "
		    "already (--max-sessions)", label,
		    client_count(CLIENT_NKINDS));
		agentconn_close_later(c, SESSION_FULL);
		return;
	}
	log_debug("%s: TLS handshake done (%s)", label,
	    SSL_get_version(ssl));
	c->s = session_new(agentconn_cfg, identity, c->peer,
	    agentconn_gone_cb, c);
	session_set_kick(c->s, agentconn_kick_cb, c);
	if (v == CLIENT_RESERVE) {
		log_info("%s: over --max-sessions (%d): a slot kept for the "
		    "resume of its recordings", label,
		    client_count(CLIENT_NKINDS) - 1);
		session_set_resume_only(c->s);
	}
	session_set_socket(c->s, bufferevent_getfd(c->bev));
	c->state = C_OPEN;
}

static void
agentconn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct agentconn *c = arg;
	char msg[512];

	if (what & BEV_EVENT_CONNECTED) {
		agentconn_handshake_done(c);
		return;
	}
	if (c->s == NULL) {
		if (what & BEV_EVENT_TIMEOUT)
			agentconn_refuse(c, "handshake timed out");
		else if (what & BEV_EVENT_EOF)
			agentconn_refuse(c, "connection closed before the "
			    "end of the recording");
		else {
			conn_tls_error(c->bev, c->required,
			    c->state == C_HANDSHAKE, msg, sizeof msg);
			agentconn_refuse(c, msg);
		}
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if (session_phase(c->s) == SESSION_HELLO) {
			agentconn_verdict(c, session_close(c->s,
			    "no HELLO in time"));
			return;
		}
		if (session_phase(c->s) != SESSION_STREAM) {
			agentconn_lost(c, NULL);
			return;
		}
		if (what & BEV_EVENT_WRITING)
			snprintf(msg, sizeof msg, "the agent has not read the "
			    "listener's replies for %d s",
			    agentconn_cfg->idle_timeout);
		else
			snprintf(msg, sizeof msg, "no data for %d s",
			    agentconn_cfg->idle_timeout);
		agentconn_lost(c, msg);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/*
		 * What the agent sent before it closed is read first: with
		 * turns of their own (agentconn_later) the close can be seen
		 * while frames still wait in the input, and a recording whose
		 * agent never comes back must keep them.
		 */
		if (!c->eof && session_phase(c->s) == SESSION_STREAM &&
		    evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
			c->eof = true;
			if (!evtimer_pending(c->later, NULL))
				agentconn_later(c);
			return;
		}
		agentconn_lost(c, "connection closed before the end of the "
		    "recording");
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		conn_tls_error(c->bev, c->required,
			    c->state == C_HANDSHAKE, msg, sizeof msg);
		agentconn_lost(c, msg);
	}
}

/* Handshake and HELLO must be over within the timeout, however sent. */
static void
agentconn_deadline_cb(struct client *cl, void *arg)
{
	struct agentconn *c = arg;
	char scan[200], msg[300];

	if (c->state == C_RESYNC && c->required) {
		preamble_describe(c->pre, scan, sizeof scan);
		snprintf(msg, sizeof msg, "handshake timed out: %s", scan);
		agentconn_refuse(c, msg);
	} else if (c->state == C_RESYNC && agentconn_ctx == NULL)
		/* plain: as ever */
		agentconn_refuse(c, "no HELLO in time");
	else if (c->s == NULL)
		agentconn_refuse(c, "handshake timed out");
	else
		agentconn_verdict(c, session_close(c->s, "no HELLO in time"));
}

/*
 * The preamble is over (or there was none to scan): the connection's
 * bufferevent, TLS or plain, and its session when plain.
 */
static void
agentconn_begin(struct agentconn *c)
{
	char identity[TD_MAX_NAME_LEN + 1];
	const char *why = "out of memory";
	struct timeval tv;

	if (agentconn_ctx != NULL) {
		c->bev = conn_tls_new(agentconn_base, agentconn_ctx,
		    client_fd(c->cl), c->big, c->required, &why);
		c->state = C_HANDSHAKE;
		if (c->bev != NULL)
			client_set_bev(c->cl, c->bev);
	} else {
		if (client_set_plain(c->cl) == 0)
			c->bev = client_bev(c->cl);
		c->state = C_OPEN;
	}
	if (c->bev == NULL) {
		agentconn_refuse(c, why);
		return;
	}
	if (agentconn_ctx == NULL) {
		/* the address is the identity; its port is not part of it */
		agentconn_plain_identity(c->peer, identity, sizeof identity);
		c->s = session_new(agentconn_cfg, identity, c->peer,
		    agentconn_gone_cb, c);
		session_set_kick(c->s, agentconn_kick_cb, c);
		if (client_reserved(c->cl))
			session_set_resume_only(c->s);
		session_set_socket(c->s, bufferevent_getfd(c->bev));
	}
	client_setcb(c->cl, agentconn_read_cb, agentconn_write_cb,
	    agentconn_event_cb);
	tv.tv_sec = agentconn_cfg->handshake_timeout;
	tv.tv_usec = 0;
	bufferevent_set_timeouts(c->bev, &tv, NULL);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* The preamble's scan is over: log what it did, go on or refuse. */
static void
agentconn_preamble_cb(void *arg, bool ok, const char *why)
{
	struct agentconn *c = arg;
	char what[200], msg[400];

	preamble_describe(c->pre, what, sizeof what);
	if (!ok) {
		if (preamble_found(c->pre) || c->required)
			snprintf(msg, sizeof msg, "%s: %s", why, what);
		else
			snprintf(msg, sizeof msg, "%s", why);
		agentconn_refuse(c, msg);
		return;
	}
	if (preamble_found(c->pre))
		log_info("%s: %s", client_label(c->cl), what);
	preamble_free(c->pre);
	c->pre = NULL;
	agentconn_begin(c);
}

static void	agentconn_shutdown_cb(struct client *, void *);

/* What the client layer calls agentconn.c for. */
static const struct client_hooks agentconn_hooks = {
	.free = agentconn_free_cb,
	.deadline = agentconn_deadline_cb,
	.shutdown = agentconn_shutdown_cb,
};

/*
 * A connection on fd from peer: its client (and deadline), then its
 * preamble's scan (required on a byte pipe: a Unix socket), then its
 * bufferevent.
 */
static struct agentconn *
agentconn_new(int fd, const char *peer, bool required)
{
	char label[160];
	struct agentconn *c;

	c = xcalloc(1, sizeof *c);
	c->required = required;
	c->state = C_RESYNC;
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	snprintf(label, sizeof label, "session %s", peer);
	c->big = sockio_big(client_count(CLIENT_TDPROTO));
	c->cl = client_new(CLIENT_TDPROTO, fd, label, &agentconn_hooks, c);
	if ((c->later = evtimer_new(agentconn_base, agentconn_later_cb, c)) == NULL)
		fatalx("out of memory");
	/* a deadline for all of it: a peer trickling bytes cannot stretch
	   it */
	client_deadline(c->cl, agentconn_cfg->handshake_timeout * 1000L);
	c->pre = preamble_new(agentconn_base, fd, required,
	    agentconn_preamble_cb, c);
	return c;
}

void
agentconn_init(struct event_base *base, const struct listener_config *cfg,
    SSL_CTX *ctx)
{
	agentconn_base = base;
	agentconn_cfg = cfg;
	agentconn_set_ctx(ctx);
	admit_init(base, cfg->max_handshakes, cfg->max_handshakes_addr,
	    TD_ADMIT_MIN_AGE_MS);
}

void
agentconn_accept(int fd, const struct sockaddr *sa, const char *peer, void *arg)
{
	/* a byte pipe (QEMU's chardev) may hold an old session's bytes */
	bool required = sa->sa_family == AF_UNIX;
	char identity[TD_MAX_NAME_LEN + 1];
	enum client_verdict v;
	struct agentconn *c;
	void *victim;

	/*
	 * Plain: refused at once when every session slot is taken.  TLS:
	 * through the handshake first (its own budget, --max-handshakes), so
	 * that the agent learns why from an ERROR RETRY and comes back.
	 */
	if (agentconn_ctx == NULL) {
		/* plain: no handshake, a session slot at once (or one kept
		   for the resumes of its address's recordings) */
		agentconn_plain_identity(peer, identity, sizeof identity);
		v = client_may_open(CLIENT_TDPROTO, identity);
		if (v != CLIENT_YES && v != CLIENT_RESERVE) {
			admit_refused(ADMIT_R_SESSIONS, "refusing %s: %d "
			    "sessions already", peer,
			    client_count(CLIENT_NKINDS));
			close(fd);
			return;
		}
		c = agentconn_new(fd, peer, required);
		client_admit(c->cl, identity);
		return;
	}
	/* TLS: a handshake slot, one taken from a busier address, or none */
	switch (admit_check(fd, sa, &victim)) {
	case ADMIT_NO:
		admit_refused(ADMIT_R_ADDRESS, "refusing %s: its address has "
		    "%d connections in the handshake already "
		    "(--max-handshakes-per-address)", peer,
		    agentconn_cfg->max_handshakes_addr);
		close(fd);
		return;
	case ADMIT_FULL:
		admit_refused(ADMIT_R_FULL, "refusing %s: %d connections in "
		    "the handshake already, none from a busier address "
		    "(--max-handshakes)", peer, admit_handshakes());
		close(fd);
		return;
	case ADMIT_EVICT:
		admit_refused(ADMIT_R_EVICTED, "session %s: closing: its "
		    "handshake slot goes to %s, from a less busy address "
		    "(--max-handshakes %d)", ((struct agentconn *)victim)->peer,
		    peer, agentconn_cfg->max_handshakes);
		agentconn_free(victim);
		break;
	case ADMIT_YES:
		break;
	}
	c = agentconn_new(fd, peer, required);
	admit_add(fd, sa, c);
}

/*
 * An idle connection should cost little: OpenSSL may free its read and
 * write buffers whenever they are empty.  How large the read buffer is,
 * is sockio's choice (sockio_big(), per connection).
 */
void
agentconn_set_ctx(SSL_CTX *ctx)
{
	SSL_CTX *old = agentconn_ctx;

	agentconn_ctx = ctx;
	if (ctx != NULL)
		SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (old != NULL && old != ctx)
		SSL_CTX_free(old);	/* open connections keep theirs */
}

SSL_CTX *
agentconn_get_ctx(void)
{
	return agentconn_ctx;
}

int
agentconn_sessions(void)
{
	return client_count(CLIENT_TDPROTO);
}

void
agentconn_count(struct agentconn_counts *n)
{
	struct client *cl;
	struct agentconn *c;

	memset(n, 0, sizeof *n);
	for (cl = client_first(CLIENT_TDPROTO); cl != NULL;
	    cl = client_next(cl)) {
		c = client_arg(cl);
		if (c->state == C_RESYNC || c->state == C_HANDSHAKE)
			n->handshake++;
		else if (c->state == C_OPEN)
			n->open++;
		else if (c->state == C_PAUSING)
			n->pausing++;
		else
			n->closing++;
	}
}

void
agentconn_each(void (*fn)(const struct agentconn_info *, void *), void *arg)
{
	/* the preamble is counted with the handshake it comes before */
	static const char *const names[] = {
		[C_RESYNC] = "handshake", [C_HANDSHAKE] = "handshake",
		[C_OPEN] = "open", [C_PAUSING] = "pausing",
		[C_CLOSING] = "closing",
	};
	struct agentconn_info i;
	struct client *cl;
	struct agentconn *c;

	for (cl = client_first(CLIENT_TDPROTO); cl != NULL;
	    cl = client_next(cl)) {
		c = client_arg(cl);
		i.peer = c->peer;
		i.identity = c->s != NULL ? session_identity(c->s) : "";
		i.state = names[c->state];
		fn(&i, arg);
	}
}

void
agentconn_tick(void)
{
	struct client *cl, *next;
	enum session_verdict v;
	struct agentconn *c;

	for (cl = client_first(CLIENT_TDPROTO); cl != NULL; cl = next) {
		next = client_next(cl);
		c = client_arg(cl);
		if (c->state != C_OPEN || c->s == NULL ||
		    session_phase(c->s) != SESSION_STREAM)
			continue;
		v = session_tick(c->s);
		if (v == SESSION_GO)
			agentconn_flush(c);		/* the ACK */
		else
			agentconn_verdict(c, v);	/* c may be gone */
	}
}

/* tdlisten stops (the client layer's shutdown hook): c says so. */
static void
agentconn_shutdown_cb(struct client *cl, void *arg)
{
	struct agentconn *c = arg;
	enum session_verdict v;

	if (c->state == C_CLOSING)
		return;
	if (c->s == NULL) {
		agentconn_refuse(c, "tdlisten is shutting down");
		return;
	}
	v = session_shutdown(c->s);
	if (v == SESSION_CLOSE)
		agentconn_close_telling(c);
	else if (c->state == C_PAUSING)
		agentconn_closing(c);	/* its ERROR goes out */
	else
		agentconn_free(c);
}

void
agentconn_shutdown_all(void)
{
	client_shutdown(CLIENT_TDPROTO);
}

void
agentconn_free_all(void)
{
	client_free_all(CLIENT_TDPROTO);
}
