/*
 * preamble.c: the listener's side of the resynchronisation preamble (see
 * preamble.h and proto/resync.h).
 *
 * Why peek: the session's first byte (a ClientHello, or HELLO's header)
 * may arrive in the same read as the preamble, and the bufferevent made
 * afterwards reads the socket itself.  What may start a preamble but is
 * not whole yet (fewer than 32 bytes) is consumed into a carry buffer
 * instead of left in the socket, so that a level-triggered read event
 * does not spin on it; such bytes can only be the magic's first bytes,
 * never a session's (the magic's first byte starts no TLS record and no
 * frame), so nothing of a session is ever consumed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "log.h"
#include "preamble.h"
#include "resync.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* One connection's scan. */
struct preamble {
	int			 fd;
	struct event		*ev;
	struct td_resync	 rs;
	uint8_t			 carry[TD_RESYNC_LEN];	/* consumed, undecided */
	size_t			 ncarry;
	preamble_done_cb	 done;
	void			*arg;
};

/* The scan is over: tell the owner (who may free p). */
static void
preamble_end(struct preamble *p, bool ok, const char *why)
{
	event_del(p->ev);
	p->done(p->arg, ok, why);
}

/* Consume n bytes already peeked at from the socket. */
static int
preamble_consume(struct preamble *p, size_t n)
{
	uint8_t junk[4096];
	ssize_t r;

	while (n > 0) {
		r = recv(p->fd, junk, n < sizeof junk ? n : sizeof junk, 0);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;	/* peeked bytes are there: cannot be */
		n -= (size_t)r;
	}
	return 0;
}

/* Answer the preamble just found; -1 when the peer does not read. */
static int
preamble_echo(struct preamble *p)
{
	uint8_t out[TD_RESYNC_LEN];
	ssize_t w;

	td_resync_pack(out, p->rs.nonce);
	while ((w = send(p->fd, out, sizeof out, MSG_NOSIGNAL)) == -1 &&
	    errno == EINTR)
		;
	return w == (ssize_t)sizeof out ? 0 : -1;
}

static void
preamble_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct preamble *p = arg;
	uint8_t buf[4096 + TD_RESYNC_LEN];
	enum td_resync_step step;
	size_t total, used;
	ssize_t n;
	char why[160];

	for (;;) {
		memcpy(buf, p->carry, p->ncarry);
		n = recv(p->fd, buf + p->ncarry, sizeof buf - p->ncarry,
		    MSG_PEEK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n == 0) {
			preamble_end(p, false, "connection closed before the "
			    "end of the recording");
			return;
		}
		if (n == -1) {
			snprintf(why, sizeof why, "connection error: %s",
			    strerror(errno));
			preamble_end(p, false, why);
			return;
		}
		total = p->ncarry + (size_t)n;
		step = td_resync_scan(&p->rs, buf, total, &used);
		if (p->rs.discarded > TD_RESYNC_DISCARD_MAX) {
			snprintf(why, sizeof why, "no resynchronisation "
			    "preamble in the first %u bytes",
			    TD_RESYNC_DISCARD_MAX);
			preamble_end(p, false, why);
			return;
		}
		if (step != TD_RESYNC_MORE && used < p->ncarry) {
			/* the magic's first bytes, then something else */
			preamble_end(p, false, "a broken resynchronisation "
			    "preamble");
			return;
		}
		if (step == TD_RESYNC_MORE) {
			/* all of it is consumed; what may start a
			   preamble waits in the carry */
			if (preamble_consume(p, (size_t)n) == -1) {
				preamble_end(p, false, "connection error");
				return;
			}
			p->ncarry = total - used;
			memmove(p->carry, buf + used, p->ncarry);
			return;
		}
		if (preamble_consume(p, used - p->ncarry) == -1) {
			preamble_end(p, false, "connection error");
			return;
		}
		p->ncarry = 0;
		if (step == TD_RESYNC_DONE) {
			preamble_end(p, true, NULL);
			return;
		}
		if (p->rs.preambles > TD_RESYNC_MAX_PREAMBLES) {
			snprintf(why, sizeof why, "more than %d "
			    "resynchronisation preambles",
			    TD_RESYNC_MAX_PREAMBLES);
			preamble_end(p, false, why);
			return;
		}
		if (preamble_echo(p) == -1) {
			preamble_end(p, false, "cannot answer the "
			    "resynchronisation preamble");
			return;
		}
	}
}

/* Scan fd's first bytes (preamble.h). */
struct preamble *
preamble_new(struct event_base *base, int fd, bool required,
    preamble_done_cb done, void *arg)
{
	struct preamble *p;

	p = xcalloc(1, sizeof *p);
	p->fd = fd;
	p->rs.optional = !required;
	p->done = done;
	p->arg = arg;
	p->ev = event_new(base, fd, EV_READ | EV_PERSIST, preamble_read_cb, p);
	if (p->ev == NULL || event_add(p->ev, NULL) == -1)
		fatalx("cannot watch a new connection");
	return p;
}

/* Stop and free (preamble.h). */
void
preamble_free(struct preamble *p)
{
	if (p == NULL)
		return;
	if (p->ev != NULL)
		event_free(p->ev);
	free(p);
}

/* Whether a preamble was found. */
bool
preamble_found(const struct preamble *p)
{
	return p->rs.found;
}

/* What the scan did, for a log line (preamble.h). */
void
preamble_describe(const struct preamble *p, char *buf, size_t len)
{
	if (!p->rs.found) {
		snprintf(buf, len, "no resynchronisation preamble (%llu bytes "
		    "discarded)", (unsigned long long)p->rs.discarded);
		return;
	}
	snprintf(buf, len, "resynchronised: %llu bytes discarded before the "
	    "preamble, %u preamble%s answered, %llu cop%s skipped",
	    (unsigned long long)p->rs.discarded, p->rs.preambles,
	    p->rs.preambles == 1 ? "" : "s",
	    (unsigned long long)p->rs.repeats,
	    p->rs.repeats == 1 ? "y" : "ies");
}

/*
 * The watch: a filter BIO between a TLS session and its socket that looks
 * for the magic in the raw bytes read.  Ciphertext holds it by chance with
 * a probability of 2^-128 per offset; a new agent's preamble holds it for
 * sure.  The magic's last 15 bytes seen are kept to find one cut between
 * two reads.
 */
struct preamble_watch {
	uint8_t		 tail[TD_RESYNC_MAGIC_LEN - 1];
	size_t		 ntail;
	bool		 seen;
};

static BIO_METHOD	*preamble_watch_method;
static int		 preamble_watch_type;

static int
preamble_watch_create(BIO *b)
{
	BIO_set_data(b, xcalloc(1, sizeof (struct preamble_watch)));
	BIO_set_init(b, 1);
	return 1;
}

static int
preamble_watch_destroy(BIO *b)
{
	free(BIO_get_data(b));
	BIO_set_data(b, NULL);
	return 1;
}

/* Look for the magic in what was just read (p, n bytes). */
static void
preamble_watch_scan(struct preamble_watch *w, const uint8_t *p, size_t n)
{
	uint8_t edge[2 * (TD_RESYNC_MAGIC_LEN - 1)];
	size_t k, e;

	if (w->seen || n == 0)
		return;
	/* across the last read and this one */
	k = n < TD_RESYNC_MAGIC_LEN - 1 ? n : TD_RESYNC_MAGIC_LEN - 1;
	memcpy(edge, w->tail, w->ntail);
	memcpy(edge + w->ntail, p, k);
	e = w->ntail + k;
	if (e >= TD_RESYNC_MAGIC_LEN && memmem(edge, e, td_resync_magic,
	    TD_RESYNC_MAGIC_LEN) != NULL)
		w->seen = true;
	if (memmem(p, n, td_resync_magic, TD_RESYNC_MAGIC_LEN) != NULL)
		w->seen = true;
	/* the last bytes of all, for the next read (when n is short, edge
	   holds all of p after the old tail) */
	if (n >= TD_RESYNC_MAGIC_LEN - 1) {
		memcpy(w->tail, p + n - (TD_RESYNC_MAGIC_LEN - 1),
		    TD_RESYNC_MAGIC_LEN - 1);
		w->ntail = TD_RESYNC_MAGIC_LEN - 1;
	} else {
		w->ntail = e < TD_RESYNC_MAGIC_LEN - 1 ? e :
		    TD_RESYNC_MAGIC_LEN - 1;
		memcpy(w->tail, edge + e - w->ntail, w->ntail);
	}
}

static int
preamble_watch_read(BIO *b, char *buf, size_t len, size_t *got)
{
	int r;

	BIO_clear_retry_flags(b);
	r = BIO_read_ex(BIO_next(b), buf, len, got);
	BIO_copy_next_retry(b);
	if (r == 1)
		preamble_watch_scan(BIO_get_data(b), (const uint8_t *)buf,
		    *got);
	return r;
}

static int
preamble_watch_write(BIO *b, const char *buf, size_t len, size_t *done)
{
	int r;

	BIO_clear_retry_flags(b);
	r = BIO_write_ex(BIO_next(b), buf, len, done);
	BIO_copy_next_retry(b);
	return r;
}

static long
preamble_watch_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	return BIO_next(b) != NULL ? BIO_ctrl(BIO_next(b), cmd, num, ptr) : 0;
}

/* Watch the raw bytes of a TLS session on fd (preamble.h). */
int
preamble_watch(SSL *ssl, int fd)
{
	BIO *sock, *w;
	int type;

	if (preamble_watch_method == NULL) {
		if ((type = BIO_get_new_index()) == -1 ||
		    (preamble_watch_method = BIO_meth_new(type |
		    BIO_TYPE_FILTER, "tracedock preamble watch")) == NULL)
			return -1;
		preamble_watch_type = type | BIO_TYPE_FILTER;
		BIO_meth_set_create(preamble_watch_method,
		    preamble_watch_create);
		BIO_meth_set_destroy(preamble_watch_method,
		    preamble_watch_destroy);
		BIO_meth_set_read_ex(preamble_watch_method,
		    preamble_watch_read);
		BIO_meth_set_write_ex(preamble_watch_method,
		    preamble_watch_write);
		BIO_meth_set_ctrl(preamble_watch_method, preamble_watch_ctrl);
	}
	if ((sock = BIO_new_socket(fd, BIO_NOCLOSE)) == NULL)
		return -1;
	if ((w = BIO_new(preamble_watch_method)) == NULL) {
		BIO_free(sock);
		return -1;
	}
	BIO_push(w, sock);
	SSL_set_bio(ssl, w, w);
	return 0;
}

/*
 * Whether the raw bytes of ssl held the magic (preamble.h): those read,
 * or, with the last ones read, those still in the socket.  OpenSSL reads
 * a record's 5-byte header first and fails on a preamble there: the
 * magic's other 11 bytes are still in the socket then.
 */
bool
preamble_seen(SSL *ssl)
{
	uint8_t buf[TD_RESYNC_MAGIC_LEN - 1 + 4096];
	struct preamble_watch *w = NULL;
	ssize_t n;
	BIO *b;
	int fd;

	if (ssl == NULL || preamble_watch_method == NULL)
		return false;
	for (b = SSL_get_rbio(ssl); b != NULL && w == NULL; b = BIO_next(b))
		if (BIO_method_type(b) == preamble_watch_type)
			w = BIO_get_data(b);
	if (w == NULL)
		return false;
	if (w->seen)
		return true;
	if ((fd = SSL_get_fd(ssl)) == -1)
		return false;
	memcpy(buf, w->tail, w->ntail);
	n = recv(fd, buf + w->ntail, sizeof buf - w->ntail,
	    MSG_PEEK | MSG_DONTWAIT);
	return n > 0 && memmem(buf, w->ntail + (size_t)n, td_resync_magic,
	    TD_RESYNC_MAGIC_LEN) != NULL;
}
