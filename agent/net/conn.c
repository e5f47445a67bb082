/*
 * conn.c: one connection of the agent to the listener, over TCP, vsock or
 * a character device, with TLS on top unless --insecure (see conn.h).
 *
 * Sockets are made blocking or not with SO_RCVTIMEO/SO_SNDTIMEO for the
 * timeouts; a character device has no such timeouts, so its descriptor
 * stays non-blocking and the blocking calls wait in poll() instead.  Over
 * a character device each connection begins with the resynchronisation
 * preamble (conn_resync(), proto/resync.h): the device is a byte pipe
 * that may still hold an older session's bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "buf.h"
#include "clock.h"
#include "conn.h"
#include "resync.h"
#include "tdlimits.h"
#include "tls.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * TLS records (16 KiB each) gather in a buffer BIO of this size and go to
 * the descriptor together: one write() per record cost as much of the
 * agent's CPU on loopback as the encryption (bench/README.md, "Streaming").
 * With kernel TLS there is no buffer: the kernel makes the records of
 * what one send() hands it.
 */
#define CONN_TLS_WBUF	(256u * 1024)
/* How often a device whose other side is away is looked at again. */
#define CONN_AWAY_POLL_MS	100
/* How often the resynchronisation preamble is written until answered. */
#define CONN_RESYNC_REPEAT_MS	1000

/* One connection: its descriptor, its TLS session and what it read. */
struct conn {
	enum conn_kind	 kind;
	int		 fd;
	SSL		*ssl;		/* NULL: no TLS */
	bool		 ktls;		/* the kernel encrypts what we send */
	struct td_buf	 in;		/* what the listener sent */
	bool		 refused;	/* a TLS alert: it will not take us */
	bool		 blocking;
	int		 ms;		/* the blocking calls' timeout */
	int		 away_ms;	/* waited for a device's other side */
	bool		 resynced;	/* a preamble was answered */
	uint64_t	 stale;		/* bytes discarded before the answer */
	unsigned	 preambles;	/* preambles written */
	bool		 heard;		/* a frame came */
	int		 user_ms;	/* TCP_USER_TIMEOUT now (TCP) */
};

/* "what: strerror(errno)" into err. */
static int
conn_err(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(errno));
	return -1;
}

/*
 * The client context of every connection (shared/tls.c), with this
 * agent's certificate valid now: one that expired is said here, with its
 * date, not by the listener's alert at every connection.
 */
SSL_CTX *
conn_ctx_new(const char *cert, const char *key, const char *ca, char *err,
    size_t errlen)
{
	SSL_CTX *ctx;

	if ((ctx = td_tls_client_ctx(cert, key, ca, err, errlen)) == NULL)
		return NULL;
	if (td_tls_check_dates(ctx, cert, err, errlen) == -1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* Free a context of conn_ctx_new(); NULL is fine. */
void
conn_ctx_free(SSL_CTX *ctx)
{
	if (ctx != NULL)
		SSL_CTX_free(ctx);
}

/* Blocking with timeouts of ms, or not (conn.h). */
void
conn_set_blocking(struct conn *c, bool on, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	int fl;

	c->blocking = on;
	c->ms = ms;
	c->away_ms = 0;
	if (c->kind == CONN_SERIAL)
		return;		/* stays non-blocking: conn_wait() waits */
	fl = fcntl(c->fd, F_GETFL);
	fcntl(c->fd, F_SETFL, on ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/*
 * A blocking call of a device found it not ready: wait for events up to
 * the timeout.  1 when it may go on (try the call again); 0 when it must
 * give up (not blocking, or the time is out: errno EAGAIN, or ENOTCONN
 * when the device's other side stayed away).
 *
 * A virtio-serial port whose host side is not connected (QEMU's chardev
 * not connected yet, or dropped) polls POLLHUP at once, never POLLOUT,
 * and its write(2) says EAGAIN: poll() cannot wait for the host, so the
 * call is tried again every CONN_AWAY_POLL_MS until the timeout.  Taken
 * as readiness, that POLLHUP made the TLS handshake spin on a whole CPU
 * with no end (a guest whose listener had dropped QEMU's idle
 * connection).  A device that fails for good (a pseudo-terminal whose
 * other side closed: EIO) still says so at the next try.
 */
static int
conn_wait(struct conn *c, short events)
{
	struct pollfd pfd = { c->fd, events, 0 };
	int r, ms;

	if (c->kind != CONN_SERIAL || !c->blocking) {
		errno = EAGAIN;
		return 0;
	}
	while ((r = poll(&pfd, 1, c->ms)) == -1 && errno == EINTR)
		;
	if (r == 1 && (pfd.revents & (events | POLLERR | POLLNVAL)) != 0) {
		c->away_ms = 0;
		return 1;
	}
	if (r == 1 && c->away_ms < c->ms) {
		/* POLLHUP alone: the other side is away */
		ms = c->ms - c->away_ms < CONN_AWAY_POLL_MS ?
		    c->ms - c->away_ms : CONN_AWAY_POLL_MS;
		poll(NULL, 0, ms);
		c->away_ms += ms;
		return 1;
	}
	errno = r == 1 ? ENOTCONN : EAGAIN;
	return 0;
}

/* Wait for the connection's descriptor (conn.h). */
int
conn_poll(struct conn *c, short events, int ms)
{
	struct pollfd pfd = { c->fd, events, 0 };
	int r;

	while ((r = poll(&pfd, 1, ms)) == -1 && errno == EINTR)
		;
	if (r <= 0)
		return r;
	return pfd.revents;
}

/* What an SSL call that failed with ret wants: POLLIN, POLLOUT or 0. */
static short
conn_ssl_want(struct conn *c, int ret)
{
	switch (SSL_get_error(c->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		return POLLIN;
	case SSL_ERROR_WANT_WRITE:
		return POLLOUT;
	default:
		return 0;
	}
}

/*
 * Put a write buffer between c's TLS records and its descriptor, once the
 * handshake is over (OpenSSL flushes the handshake's flights itself).
 */
static int
conn_wbuf(struct conn *c)
{
	BIO *sock = SSL_get_wbio(c->ssl), *buf;

	if ((buf = BIO_new(BIO_f_buffer())) == NULL)
		return -1;
	if (BIO_set_write_buffer_size(buf, CONN_TLS_WBUF) != 1 ||
	    !BIO_up_ref(sock)) {
		BIO_free(buf);
		return -1;
	}
	BIO_push(buf, sock);
	SSL_set0_wbio(c->ssl, buf);	/* drops the SSL's own reference */
	return 0;
}

/* The TLS handshake as a client of t's server name. */
static int
conn_tls(struct conn *c, const struct conn_target *t, SSL_CTX *ctx,
    bool *fatal, char *err, size_t errlen)
{
	BIO *bio;
	short want;
	int r, e;
	bool eof;

	if ((c->ssl = SSL_new(ctx)) == NULL) {
		td_tls_error(err, errlen, "cannot start TLS");
		return -1;
	}
	if (td_tls_client_prepare(c->ssl, t->server_name, err, errlen) == -1)
		return -1;
	if (c->kind == CONN_SERIAL) {
		/* a device: read(2) and write(2), not send(2) */
		if ((bio = BIO_new_fd(c->fd, BIO_NOCLOSE)) == NULL) {
			td_tls_error(err, errlen, "cannot start TLS");
			return -1;
		}
		SSL_set_bio(c->ssl, bio, bio);
	} else
		SSL_set_fd(c->ssl, c->fd);
	SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/*
	 * Kernel TLS where the kernel has it (the "tls" module): OpenSSL
	 * hands the keys over after the handshake and our records are made
	 * by the kernel; where it has not, setting it up fails quietly and
	 * OpenSSL encrypts as before.  A TCP socket only.
	 */
	if (c->kind == CONN_TCP)
		SSL_set_options(c->ssl, SSL_OP_ENABLE_KTLS);
	for (;;) {
		ERR_clear_error();
		if ((r = SSL_connect(c->ssl)) == 1)
			break;
		if ((want = conn_ssl_want(c, r)) != 0) {
			if (conn_wait(c, want))
				continue;
			snprintf(err, errlen, "TLS handshake with the listener "
			    "failed: %s", errno == ENOTCONN ? "nobody at the "
			    "other end of the device" : "timed out");
			if (errno != ENOTCONN)
				errno = ETIMEDOUT;	/* a busy listener */
			return -1;
		}
		e = SSL_get_error(c->ssl, r);
		eof = e == SSL_ERROR_SYSCALL || (e == SSL_ERROR_SSL &&
		    ERR_GET_REASON(ERR_peek_error()) ==
		    SSL_R_UNEXPECTED_EOF_WHILE_READING);
		td_tls_handshake_error(c->ssl, err, errlen,
		    "TLS handshake with the listener failed");
		/* a certificate refused stays refused */
		*fatal = SSL_get_verify_result(c->ssl) != X509_V_OK;
		/*
		 * Closed or reset with no alert: a listener too busy to
		 * finish the handshake in its time, over its handshake
		 * limit, or restarting; an alert (refused) is not this.
		 */
		if (!*fatal && eof) {
			snprintf(err, errlen, "TLS handshake with the "
			    "listener failed: it closed the connection");
			errno = ECONNABORTED;
		}
		return -1;
	}
	if (c->kind == CONN_TCP && BIO_get_ktls_send(SSL_get_wbio(c->ssl)))
		c->ktls = true;		/* application data: send() */
	else if (conn_wbuf(c) == -1) {
		td_tls_error(err, errlen, "cannot start TLS");
		return -1;
	}
	return 0;
}

/* A fresh nonce: random, or at worst different from the last one. */
static void
conn_nonce(uint8_t nonce[TD_RESYNC_NONCE_LEN])
{
	static uint64_t count;
	struct timespec ts;
	uint64_t v[2];

	if (getrandom(nonce, TD_RESYNC_NONCE_LEN, GRND_NONBLOCK) ==
	    TD_RESYNC_NONCE_LEN)
		return;
	/* a guest this early in its boot: no entropy yet */
	clock_gettime(CLOCK_REALTIME, &ts);
	v[0] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	v[1] = ((uint64_t)getpid() << 32) ^ ++count;
	memcpy(nonce, v, TD_RESYNC_NONCE_LEN);
}

/*
 * Before a session over a serial device (proto/resync.h): write the
 * preamble, again every CONN_RESYNC_REPEAT_MS until the listener answers
 * it, and discard what the device holds before the answer (the rest of an
 * old session: at most TD_RESYNC_DISCARD_MAX).  The repeats are for a
 * listener that is not there yet, or whose connection from QEMU drops
 * (its TLS broke on the first preamble: a guest rebooted in the middle of
 * a session still open); it skips the copies.  A copy being written when
 * the answer comes is written whole, so that the listener sees no broken
 * preamble before the session.  Reads and writes stay non-blocking; poll()
 * waits, as conn_wait() does, for a device whose other side is away.
 */
static int
conn_resync(struct conn *c, int ms, char *err, size_t errlen)
{
	uint8_t nonce[TD_RESYNC_NONCE_LEN], pre[TD_RESYNC_LEN], buf[4096];
	int64_t now, end, repeat;
	size_t off = 0, have = 0, used;
	struct pollfd pfd;
	ssize_t r;
	int wait;

	conn_nonce(nonce);
	td_resync_pack(pre, nonce);
	c->preambles = 1;
	now = (int64_t)td_clock_now_ms();
	end = now + ms;
	repeat = now + CONN_RESYNC_REPEAT_MS;
	for (;;) {
		if (off < sizeof pre) {
			r = write(c->fd, pre + off, sizeof pre - off);
			if (r > 0)
				off += (size_t)r;
			else if (r == -1 && errno != EAGAIN &&
			    errno != EINTR)
				return conn_err(err, errlen, "cannot write to "
				    "the device");
		}
		r = read(c->fd, buf + have, sizeof buf - have);
		if (r == -1 && errno != EAGAIN && errno != EINTR)
			return conn_err(err, errlen, "cannot read from the "
			    "device");
		if (r > 0) {
			have += (size_t)r;
			if (td_resync_find_echo(nonce, buf, have, &used)) {
				/* what follows it cannot be the session's
				   yet: we have not started it */
				c->stale += used - TD_RESYNC_LEN +
				    (have - used);
				break;
			}
			c->stale += used;
			memmove(buf, buf + used, have - used);
			have -= used;
			if (c->stale > TD_RESYNC_DISCARD_MAX) {
				snprintf(err, errlen, "no answer to the "
				    "resynchronisation preamble in %u bytes "
				    "from the device", TD_RESYNC_DISCARD_MAX);
				return -1;
			}
			continue;
		}
		if ((now = (int64_t)td_clock_now_ms()) >= end) {
			snprintf(err, errlen, "no answer to the "
			    "resynchronisation preamble within %d s (%u "
			    "written, %" PRIu64 " bytes discarded)", ms / 1000,
			    c->preambles, c->stale);
			errno = ETIMEDOUT;
			return -1;
		}
		if (now >= repeat) {
			if (off == sizeof pre) {
				off = 0;
				c->preambles++;
			}
			repeat = now + CONN_RESYNC_REPEAT_MS;
			continue;
		}
		wait = (int)((repeat < end ? repeat : end) - now);
		if (r == 0) {
			/* end of file: a virtio port whose host side is not
			   connected reads so (or a device that is no pipe,
			   /dev/null): wait, as for POLLHUP, not spin */
			poll(NULL, 0, wait < CONN_AWAY_POLL_MS ? wait :
			    CONN_AWAY_POLL_MS);
			continue;
		}
		pfd.fd = c->fd;
		pfd.events = POLLIN | (off < sizeof pre ? POLLOUT : 0);
		pfd.revents = 0;
		if (poll(&pfd, 1, wait) == 1 &&
		    (pfd.revents & (pfd.events | POLLERR | POLLNVAL)) == 0)
			/* POLLHUP alone: the other side is away */
			poll(NULL, 0, wait < CONN_AWAY_POLL_MS ? wait :
			    CONN_AWAY_POLL_MS);
	}
	c->resynced = true;
	/* a copy begun is finished */
	while (off > 0 && off < sizeof pre) {
		r = write(c->fd, pre + off, sizeof pre - off);
		if (r > 0)
			off += (size_t)r;
		else if (r == -1 && (errno == EINTR || (errno == EAGAIN &&
		    conn_wait(c, POLLOUT))))
			continue;
		else
			return conn_err(err, errlen, "cannot write to the "
			    "device");
	}
	return 0;
}

/* What the preamble found, for messages (conn.h). */
void
conn_resync_describe(const struct conn *c, char *buf, size_t len)
{
	if (!c->resynced) {
		snprintf(buf, len, "%s", "");
		return;
	}
	snprintf(buf, len, "resynchronised: %u preamble%s written, %" PRIu64
	    " stale byte%s discarded", c->preambles, c->preambles == 1 ? "" :
	    "s", c->stale, c->stale == 1 ? "" : "s");
}

/* Dial t's transport and authenticate (conn.h). */
struct conn *
conn_open(const struct conn_target *t, SSL_CTX *ctx, int timeout,
    int user_timeout_ms, bool *fatal, char *err, size_t errlen)
{
	struct conn *c;
	int saved;

	*fatal = false;
	c = xcalloc(1, sizeof *c);
	c->kind = t->kind;
	td_buf_init(&c->in, TD_MAX_HELLO * 4 + 64 * 1024);
	c->user_ms = user_timeout_ms;
	c->fd = conn_target_dial(t, timeout, user_timeout_ms, err, errlen);
	if (c->fd == -1) {
		td_buf_free(&c->in);
		free(c);
		return NULL;
	}
	conn_set_blocking(c, true, timeout * 1000);
	if (c->kind == CONN_SERIAL && conn_resync(c, timeout * 1000, err,
	    errlen) == -1) {
		saved = errno;
		conn_close(c, false);
		errno = saved;
		return NULL;
	}
	if (ctx != NULL && conn_tls(c, t, ctx, fatal, err, errlen) == -1) {
		saved = errno;
		conn_close(c, false);
		errno = saved;
		return NULL;
	}
	return c;
}

/* The descriptor to poll. */
int
conn_fd(const struct conn *c)
{
	return c->fd;
}

/*
 * Linux applies TCP_USER_TIMEOUT to a zero window too (window probes that
 * are answered with a closed window): a listener that reads slowly (valgrind,
 * a loaded box, on loopback its window opens only once 64 KiB are free)
 * was given up after 15 s and the agent resent what it had not acknowledged
 * to a listener busier still.  Window probes out with no data in flight:
 * the window is closed.
 */
void
conn_patience(struct conn *c, int user_ms, int window_ms)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	int want;

	if (c->kind != CONN_TCP ||
	    getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
		return;
	want = ti.tcpi_probes > 0 && ti.tcpi_unacked == 0 ? window_ms :
	    user_ms;
	if (want != c->user_ms && setsockopt(c->fd, IPPROTO_TCP,
	    TCP_USER_TIMEOUT, &want, sizeof want) == 0)
		c->user_ms = want;
}

/* The TLS session, for messages (conn.h). */
void
conn_tls_describe(const struct conn *c, char *buf, size_t len)
{
	if (c->ssl == NULL) {
		snprintf(buf, len, "%s", "");
		return;
	}
	snprintf(buf, len, "%s %s, records made by %s", SSL_get_version(c->ssl),
	    SSL_get_cipher_name(c->ssl), c->ktls ? "the kernel (kTLS)" :
	    "OpenSSL (no kernel TLS on this socket)");
}

/* Whether the listener refused this agent with a TLS alert. */
bool
conn_refused(const struct conn *c)
{
	return c->refused;
}

/* Bytes of TLS records gathered and not yet handed to the descriptor. */
size_t
conn_wpending(const struct conn *c)
{
	return c != NULL && c->ssl != NULL && !c->ktls ?
	    (size_t)BIO_wpending(SSL_get_wbio(c->ssl)) : 0;
}

/* Hand them over: 0 when all went, 1 when it would block, -1. */
int
conn_wflush(struct conn *c)
{
	BIO *b;

	if (conn_wpending(c) == 0)
		return 0;
	b = SSL_get_wbio(c->ssl);
	if (BIO_flush(b) == 1)
		return 0;
	return BIO_should_retry(b) ? 1 : -1;
}

/* Write what the connection takes now (conn.h). */
ssize_t
conn_write_some(struct conn *c, const void *p, size_t len)
{
	size_t done;
	ssize_t w;
	int r, e;

	if (c->ssl == NULL || c->ktls) {
		/* kernel TLS: what send() is given goes as application
		   data records, as SSL_write() would send it */
		if (c->kind == CONN_SERIAL)
			w = write(c->fd, p, len);
		else
			w = send(c->fd, p, len, MSG_NOSIGNAL);
		if (w == -1 && errno == EWOULDBLOCK)
			errno = EAGAIN;
		return w;
	}
	ERR_clear_error();
	if ((r = SSL_write_ex(c->ssl, p, len, &done)) == 1)
		return (ssize_t)done;
	e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
		errno = EAGAIN;
	else if (e != SSL_ERROR_SYSCALL || errno == 0)
		errno = EPIPE;
	return -1;
}

/* Write all of p, blocking (set-up, time sync and finish). */
int
conn_write_all(struct conn *c, const void *p, size_t len, uint64_t *sent)
{
	ssize_t w;
	int r;

	while (len != 0) {
		w = conn_write_some(c, p, len);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && errno == EAGAIN && conn_wait(c, POLLOUT))
			continue;
		if (w == -1) {
			/* a TLS write that failed: the connection is gone */
			if (c->ssl != NULL)
				errno = EPIPE;
			return -1;
		}
		p = (const uint8_t *)p + w;
		len -= w;
		if (sent != NULL)
			*sent += w;
	}
	while ((r = conn_wflush(c)) == 1 && conn_wait(c, POLLOUT))
		;
	if (r != 0) {
		errno = EPIPE;
		return -1;
	}
	return 0;
}

/* Read up to cap bytes; 0 on EOF, -1 on error (errno EAGAIN: none yet). */
static ssize_t
conn_read_some(struct conn *c, void *p, size_t cap)
{
	size_t got;
	ssize_t r;
	int e;

	if (c->ssl == NULL) {
		r = c->kind == CONN_SERIAL ? read(c->fd, p, cap) :
		    recv(c->fd, p, cap, 0);
		if (r == -1 && errno == EWOULDBLOCK)
			errno = EAGAIN;
		return r;
	}
	ERR_clear_error();
	if (SSL_read_ex(c->ssl, p, cap, &got) == 1)
		return (ssize_t)got;
	e = SSL_get_error(c->ssl, 0);
	if (e == SSL_ERROR_ZERO_RETURN)
		return 0;
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_SYSCALL && errno == 0)
		return 0;
	/* OpenSSL 3: the listener closed without close_notify (it let
	   the connection go: "Protocol error" said nothing) */
	if (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) ==
	    SSL_R_UNEXPECTED_EOF_WHILE_READING) {
		ERR_clear_error();
		return 0;
	}
	if (e == SSL_ERROR_SSL)
		errno = EPROTO;
	return -1;
}

/* Read what is there into the connection's input (conn.h). */
ssize_t
conn_fill(struct conn *c)
{
	uint8_t buf[4096];
	ssize_t r;

	r = conn_read_some(c, buf, sizeof buf);
	if (r <= 0)
		return r;
	if (td_buf_add(&c->in, buf, r) == -1) {
		errno = EMSGSIZE;
		return -1;
	}
	return r;
}

/* The first whole frame of the input, if there is one. */
int
conn_frame(struct conn *c, struct td_frame *f)
{
	static const uint8_t none[1];

	return td_frame_parse(c->in.data ? c->in.data : none, c->in.len, f);
}


/*
 * Words for a connection without TLS (--insecure) that a listener ended
 * before its first frame: a TLS listener resets such a connection (or
 * answers with a TLS record, 0x15 or 0x16 then 0x03).
 */
static const char *
conn_tls_hint(const struct conn *c)
{
	const uint8_t *d = c->in.data;

	if (c->ssl != NULL || c->heard)
		return "";
	if (c->in.len >= 2 && (d[0] == 0x15 || d[0] == 0x16) && d[1] == 0x03)
		return " (it speaks TLS: give --cert, --key and --ca, not "
		    "--insecure)";
	return " (does it want TLS? give --cert, --key and --ca, not "
	    "--insecure)";
}
/* Read one whole frame into the input, blocking. */
int
conn_read_frame(struct conn *c, struct td_frame *f, char *err,
    size_t errlen)
{
	ssize_t r;
	int pr;

	for (;;) {
		if ((pr = conn_frame(c, f)) == 1) {
			c->heard = true;
			return 0;
		}
		if (pr == -1) {
			snprintf(err, errlen, "the listener sent a bad frame%s",
			    conn_tls_hint(c));
			return -1;
		}
		r = conn_fill(c);
		if (r == 0) {
			snprintf(err, errlen, "the listener closed the "
			    "connection%s", conn_tls_hint(c));
			return -1;
		}
		if (r > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && conn_wait(c, POLLIN))
			continue;
		if (errno == EMSGSIZE) {
			snprintf(err, errlen, "the listener sent too much");
			return -1;
		}
		if (c->ssl != NULL && errno == EPROTO) {
			c->refused = true;
			td_tls_handshake_error(c->ssl, err, errlen,
			    "the listener refused this agent");
			return -1;
		}
		if (errno == EAGAIN) {
			/* the wait of conn_set_blocking() is over */
			snprintf(err, errlen, "no answer from the listener "
			    "in time");
			errno = ETIMEDOUT;
			return -1;
		}
		if (errno == ECONNRESET && conn_tls_hint(c)[0] != '\0') {
			snprintf(err, errlen, "cannot read from the listener: "
			    "%s%s", strerror(errno), conn_tls_hint(c));
			return -1;
		}
		return conn_err(err, errlen, "cannot read from the listener");
	}
}

/* Drop frame f from the front of the input. */
void
conn_consume(struct conn *c, const struct td_frame *f)
{
	memmove(c->in.data, c->in.data + f->total, c->in.len - f->total);
	c->in.len -= f->total;
}

/* Close (politely: TLS close_notify first) and free; NULL is fine. */
void
conn_close(struct conn *c, bool polite)
{
	if (c == NULL)
		return;
	if (c->ssl != NULL) {
		if (polite)
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	if (c->fd != -1)
		close(c->fd);
	td_buf_free(&c->in);
	free(c);
}

/* ERROR from the listener: its text, and whether it wants us back. */
int
conn_error_frame(const struct td_frame *f, bool *fatal, char *err,
    size_t errlen, const char *what)
{
	struct td_error e;

	if (td_msg_unpack_error(f, &e) == 0) {
		snprintf(err, errlen, "%s: %s", what, e.text);
		*fatal = e.code != TD_ERR_RETRY;
	} else {
		snprintf(err, errlen, "%s", what);
		*fatal = true;
	}
	return -1;
}
