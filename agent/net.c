/*
 * net.c: the agent side of the tracedock protocol over TLS (or plain TCP
 * with --insecure).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "buf.h"
#include "meta.h"
#include "net.h"
#include "tdlimits.h"
#include "tls.h"
#include "tsync.h"
#include "xmalloc.h"
#include "banned.h"

/* Longest a time-sync round may hold up the recording loop. */
#define NET_TSYNC_MAX_MS	200

/* Cap of the send queue (the recording loop pauses far below it). */
#define NET_QUEUE_MAX	(256u * 1024 * 1024)

struct net {
	int		 fd;
	SSL_CTX		*ctx;
	SSL		*ssl;
	size_t		 page_size;
	struct td_buf	 q;		/* framed bytes to send */
	size_t		 qoff;		/* bytes of q already sent */
	uint64_t	 sent;
	uint64_t	*seq;		/* next page number of each CPU */
	uint32_t	 ncpus;
	/* the PAGES frame being filled */
	int		 bcpu;
	uint32_t	 bcount;
	size_t		 bhead;		/* offset of its header in q */
	uint32_t	 bmax;
	char		 identity[TD_MAX_NAME_LEN + 1];
	uint32_t	 tsync_interval;
	int		 timeout;
	struct td_buf	 in;		/* what the listener sent */
};

/* "what: strerror(errno)" into err. */
static int
net_err(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(errno));
	return -1;
}

static int
net_dial(const struct net_params *np, char *err, size_t errlen)
{
	struct addrinfo hints, *res, *ai;
	struct pollfd pfd;
	socklen_t sl;
	int fd = -1, e, soerr, one = 1;

	char host[256];
	size_t hl = strlen(np->host);

	/* "[::1]" is how an IPv6 literal is written next to a port */
	if (hl > 2 && np->host[0] == '[' && np->host[hl - 1] == ']')
		snprintf(host, sizeof host, "%.*s", (int)(hl - 2), np->host + 1);
	else
		snprintf(host, sizeof host, "%s", np->host);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((e = getaddrinfo(host, np->port, &hints, &res)) != 0) {
		snprintf(err, errlen, "cannot resolve '%s': %s", np->host,
		    gai_strerror(e));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
		    errno == EINPROGRESS) {
			pfd.fd = fd;
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, np->timeout * 1000) == 1) {
				sl = sizeof soerr;
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
				errno = soerr;
			} else
				errno = ETIMEDOUT;
		} else
			errno = 0;
		if (errno == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	freeaddrinfo(res);
	if (fd == -1) {
		snprintf(err, errlen, "cannot connect to '%s' port %s: %s",
		    np->host, np->port, strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static void
net_blocking(int fd, bool on, int timeout)
{
	struct timeval tv = { timeout, 0 };
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Write all of p, blocking (set-up and finish only). */
static int
net_write_all(struct net *n, const void *p, size_t len)
{
	ssize_t w;
	size_t done;
	int r;

	while (len != 0) {
		if (n->ssl != NULL) {
			r = SSL_write_ex(n->ssl, p, len, &done);
			if (r <= 0) {
				errno = EPIPE;
				return -1;
			}
			w = (ssize_t)done;
		} else {
			w = send(n->fd, p, len, MSG_NOSIGNAL);
			if (w == -1 && errno == EINTR)
				continue;
			if (w == -1)
				return -1;
		}
		p = (const uint8_t *)p + w;
		len -= w;
		n->sent += w;
	}
	return 0;
}

/* Read up to cap bytes; 0 on EOF, -1 on error (errno EAGAIN: none yet). */
static ssize_t
net_read_some(struct net *n, void *p, size_t cap)
{
	size_t got;
	ssize_t r;
	int e;

	if (n->ssl == NULL) {
		r = recv(n->fd, p, cap, 0);
		return r;
	}
	ERR_clear_error();
	if (SSL_read_ex(n->ssl, p, cap, &got) == 1)
		return (ssize_t)got;
	e = SSL_get_error(n->ssl, 0);
	if (e == SSL_ERROR_ZERO_RETURN)
		return 0;
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_SYSCALL && errno == 0)
		return 0;
	if (e == SSL_ERROR_SSL)
		errno = EPROTO;
	return -1;
}

/* Read one whole frame into n->in, blocking (set-up and finish). */
static int
net_read_frame(struct net *n, struct td_frame *f, char *err, size_t errlen)
{
	uint8_t buf[4096];
	ssize_t r;
	int pr;

	for (;;) {
		pr = td_frame_parse(n->in.data ? n->in.data : buf, n->in.len,
		    f);
		if (pr == 1)
			return 0;
		if (pr == -1) {
			snprintf(err, errlen, "the listener sent a bad frame");
			return -1;
		}
		r = net_read_some(n, buf, sizeof buf);
		if (r == 0) {
			snprintf(err, errlen, "the listener closed the "
			    "connection");
			return -1;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (n->ssl != NULL && errno == EPROTO) {
				td_tls_handshake_error(n->ssl, err, errlen,
				    "the listener refused this agent");
				return -1;
			}
			return net_err(err, errlen, errno == EAGAIN ?
			    "no answer from the listener" :
			    "cannot read from the listener");
		}
		if (td_buf_add(&n->in, buf, r) == -1) {
			snprintf(err, errlen, "the listener sent too much");
			return -1;
		}
	}
}

static void
net_consume(struct net *n, const struct td_frame *f)
{
	memmove(n->in.data, n->in.data + f->total, n->in.len - f->total);
	n->in.len -= f->total;
}

static int
net_expect(struct net *n, uint16_t type, struct td_frame *f, char *err,
    size_t errlen)
{
	struct td_error e;

	for (;;) {
		if (net_read_frame(n, f, err, errlen) == -1)
			return -1;
		/* a time-sync reply that came after its round gave up */
		if (f->type != TD_MSG_TSYNC_REPLY || type == TD_MSG_TSYNC_REPLY)
			break;
		net_consume(n, f);
	}
	if (f->type == TD_MSG_ERROR) {
		if (td_msg_unpack_error(f, &e) == 0)
			snprintf(err, errlen, "the listener refused: %s",
			    e.text);
		else
			snprintf(err, errlen, "the listener refused");
		return -1;
	}
	if (f->type != type) {
		snprintf(err, errlen, "the listener sent %s, not %s",
		    td_msg_name(f->type), td_msg_name(type));
		return -1;
	}
	return 0;
}

/* Connect, authenticate, introduce the recording. */
struct net *
net_connect(const struct net_params *np, const struct td_hello *hello,
    char *err, size_t errlen)
{
	struct td_welcome w;
	struct td_frame f;
	struct net *n;

	n = xcalloc(1, sizeof *n);
	n->fd = -1;
	n->bcpu = -1;
	n->page_size = hello->page_size;
	n->ncpus = hello->ncpus;
	n->seq = xcalloc(hello->ncpus, sizeof *n->seq);
	n->bmax = (TD_MAX_FRAME - 16) / hello->page_size;
	td_buf_init(&n->q, NET_QUEUE_MAX + TD_MAX_FRAME * 2);
	td_buf_init(&n->in, TD_MAX_HELLO * 4);
	if ((n->fd = net_dial(np, err, errlen)) == -1)
		goto fail;
	net_blocking(n->fd, true, np->timeout);
	if (!np->insecure) {
		n->ctx = td_tls_client_ctx(np->cert, np->key, np->ca, err,
		    errlen);
		if (n->ctx == NULL)
			goto fail;
		if ((n->ssl = SSL_new(n->ctx)) == NULL) {
			td_tls_error(err, errlen, "cannot start TLS");
			goto fail;
		}
		if (td_tls_client_prepare(n->ssl, np->host, err,
		    errlen) == -1)
			goto fail;
		SSL_set_fd(n->ssl, n->fd);
		SSL_set_mode(n->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
		    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		if (SSL_connect(n->ssl) != 1) {
			td_tls_handshake_error(n->ssl, err, errlen,
			    "TLS handshake with the listener failed");
			goto fail;
		}
	}
	if (td_msg_pack_hello(&n->q, hello) == -1 ||
	    net_write_all(n, n->q.data, n->q.len) == -1) {
		/* a refused TLS 1.3 client learns why from the alert */
		net_err(err, errlen, "cannot send to the listener");
		if (n->ssl != NULL)
			net_read_frame(n, &f, err, errlen);
		goto fail;
	}
	td_buf_reset(&n->q);
	if (net_expect(n, TD_MSG_WELCOME, &f, err, errlen) == -1)
		goto fail;
	if (td_msg_unpack_welcome(&f, &w) == -1) {
		snprintf(err, errlen, "the listener sent a bad WELCOME");
		goto fail;
	}
	net_consume(n, &f);
	snprintf(n->identity, sizeof n->identity, "%s", w.identity);
	n->tsync_interval = w.tsync_interval;
	n->timeout = np->timeout;
	net_blocking(n->fd, false, np->timeout);
	return n;
fail:
	net_close(n);
	return NULL;
}

static uint64_t
net_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The listener's time-sync interval. */
uint32_t
net_tsync_interval(const struct net *n)
{
	return n->tsync_interval;
}

/*
 * Probes go out on an empty queue, one at a time, so nothing waits in front
 * of them: marker 's' in the trace clock, PROBE, the listener stamps its
 * reference clock on receipt and answers, marker 'r'.  The probe with the
 * shortest round trip gives the sample: the listener's stamp lies within
 * half that round trip of the markers' midpoint.
 */
int
net_tsync_round(struct net *n, struct tsync *t, uint32_t round,
    uint32_t nprobes, struct td_tsync_sample *sample, char *err,
    size_t errlen)
{
	struct td_tsync_probe p, q;
	struct td_frame f;
	struct td_buf b;
	uint64_t *ref, *ts_s, *ts_r, best = UINT64_MAX, mid, rtt;
	uint32_t i, got = 0, bi = 0, bad = 0;
	uint64_t start_ms;
	int ret = -1;

	if (net_batch_end(n) == -1 ||
	    net_flush_to(n, 0, err, errlen) == -1)
		return -1;
	start_ms = net_now_ms();
	ref = xcalloc(nprobes, sizeof *ref);
	ts_s = xcalloc(nprobes, sizeof *ts_s);
	ts_r = xcalloc(nprobes, sizeof *ts_r);
	td_buf_init(&b, 64);
	net_blocking(n->fd, true, 1);
	for (i = 0; i < nprobes; i++) {
		p.round = round;
		p.seq = i;
		td_buf_reset(&b);
		td_msg_pack_tsync_probe(&b, &p);
		if (tsync_mark(t, round, i, 's') == -1) {
			snprintf(err, errlen, "cannot write a sync marker: %s",
			    strerror(errno));
			goto out;
		}
		if (net_write_all(n, b.data, b.len) == -1) {
			net_err(err, errlen, "lost the listener");
			goto out;
		}
		/* replies of earlier probes that timed out are skipped */
		for (;;) {
			if (net_expect(n, TD_MSG_TSYNC_REPLY, &f, err,
			    errlen) == -1)
				goto out;
			if (td_msg_unpack_tsync_reply(&f, &q) == 0 &&
			    q.round == round && q.seq == i)
				break;
			bad++;		/* dropped and counted */
			net_consume(n, &f);
		}
		tsync_mark(t, round, i, 'r');
		ref[i] = q.ref_ns;
		net_consume(n, &f);
		/* a slow link gets fewer probes, not a long pause */
		if (net_now_ms() - start_ms > NET_TSYNC_MAX_MS) {
			nprobes = i + 1;
			break;
		}
	}
	if (tsync_collect(t, round, ts_s, ts_r, nprobes) == -1) {
		snprintf(err, errlen, "cannot read the sync markers back");
		goto out;
	}
	for (i = 0; i < nprobes; i++) {
		if (ref[i] == 0 || ts_s[i] == 0 || ts_r[i] < ts_s[i])
			continue;
		got++;
		if (ts_r[i] - ts_s[i] < best) {
			best = ts_r[i] - ts_s[i];
			bi = i;
		}
	}
	if (got == 0) {
		snprintf(err, errlen, "no usable probe in round %u (%u bad "
		    "replies)", round, bad);
		goto out;
	}
	mid = ts_s[bi] + best / 2;
	rtt = tsync_to_ns(t, best);
	memset(sample, 0, sizeof *sample);
	sample->round = round;
	sample->probes = got;
	sample->ts = mid;
	sample->offset = (int64_t)(tsync_from_ns(t, ref[bi]) - mid);
	sample->scaling = 1;
	sample->frac = 0;
	sample->rtt = rtt;
	sample->bound = rtt / 2 + 1;
	if (td_msg_pack_tsync_sample(&n->q, sample) == -1) {
		snprintf(err, errlen, "cannot frame a sync sample");
		goto out;
	}
	ret = 0;
out:
	net_blocking(n->fd, false, n->timeout);
	td_buf_free(&b);
	free(ref);
	free(ts_s);
	free(ts_r);
	return ret;
}

/* The listener's name for this agent. */
const char *
net_identity(const struct net *n)
{
	return n->identity;
}

static int
net_sink_begin(void *arg, enum td_opt id)
{
	struct net *n = arg;

	if (net_batch_end(n) == -1)
		return -1;
	return td_msg_pack_section(&n->q, id);
}

static int
net_sink_write(void *arg, const void *p, size_t len)
{
	struct net *n = arg;
	size_t k;

	while (len != 0) {
		k = len > TD_MAX_FRAME ? TD_MAX_FRAME : len;
		if (td_msg_pack_section_data(&n->q, p, k) == -1)
			return -1;
		p = (const uint8_t *)p + k;
		len -= k;
	}
	return 0;
}

static int
net_sink_end(void *arg)
{
	return td_msg_pack_section_end(&((struct net *)arg)->q);
}

static int
net_sink_option(void *arg, enum td_opt id, const void *p, size_t len)
{
	struct net *n = arg;

	if (net_batch_end(n) == -1)
		return -1;
	return td_msg_pack_option(&n->q, id, p, len);
}

/* Frame metadata into the queue. */
void
net_meta_sink(struct net *n, struct meta_sink *s)
{
	s->begin = net_sink_begin;
	s->write = net_sink_write;
	s->end = net_sink_end;
	s->option = net_sink_option;
	s->arg = n;
}

/* Patch the page count of the open batch and close it. */
int
net_batch_end(struct net *n)
{
	struct td_buf h;

	if (n->bcpu == -1)
		return 0;
	td_buf_init(&h, TD_FRAME_HEADER + 16);
	if (td_msg_pack_pages_head(&h, n->bcpu, n->bcount,
	    n->seq[n->bcpu] - n->bcount, n->page_size) == -1) {
		td_buf_free(&h);
		return -1;
	}
	memcpy(n->q.data + n->bhead, h.data, h.len);
	td_buf_free(&h);
	n->bcpu = -1;
	return 0;
}

/* Queue one page. */
int
net_page(struct net *n, int cpu, const void *page, size_t len)
{
	if ((uint32_t)cpu >= n->ncpus || len > n->page_size) {
		errno = EINVAL;
		return -1;
	}
	if (n->bcpu != cpu || n->bcount == n->bmax) {
		if (net_batch_end(n) == -1)
			return -1;
		n->bhead = n->q.len;
		if (td_buf_add_zero(&n->q, TD_FRAME_HEADER + 16) == -1)
			return -1;
		n->bcpu = cpu;
		n->bcount = 0;
	}
	if (td_buf_add(&n->q, page, len) == -1 ||
	    td_buf_add_zero(&n->q, n->page_size - len) == -1)
		return -1;
	n->bcount++;
	n->seq[cpu]++;
	return 0;
}

/* The socket to poll. */
int
net_fd(const struct net *n)
{
	return n->fd;
}

/* Whether closed frames wait to be sent. */
bool
net_want_write(const struct net *n)
{
	return n->q.len > n->qoff;
}

/* Bytes queued. */
size_t
net_pending(const struct net *n)
{
	return n->q.len - n->qoff;
}

/* Bytes sent. */
uint64_t
net_sent(const struct net *n)
{
	return n->sent;
}

/*
 * Send queued bytes until the socket would block.  The open PAGES batch is
 * never sent before it is closed (its header is not final yet).
 */
int
net_flush(struct net *n, char *err, size_t errlen)
{
	size_t limit = n->bcpu == -1 ? n->q.len : n->bhead, done;
	ssize_t w;
	int e;

	while (n->qoff < limit) {
		if (n->ssl != NULL) {
			ERR_clear_error();
			if (SSL_write_ex(n->ssl, n->q.data + n->qoff,
			    limit - n->qoff, &done) == 1)
				w = (ssize_t)done;
			else {
				e = SSL_get_error(n->ssl, 0);
				if (e == SSL_ERROR_WANT_WRITE ||
				    e == SSL_ERROR_WANT_READ)
					break;
				snprintf(err, errlen, "lost the listener: %s",
				    e == SSL_ERROR_SYSCALL ? strerror(errno) :
				    "TLS error");
				return -1;
			}
		} else {
			w = send(n->fd, n->q.data + n->qoff, limit - n->qoff,
			    MSG_NOSIGNAL);
			if (w == -1 && (errno == EAGAIN || errno == EINTR))
				break;
			if (w == -1)
				return net_err(err, errlen,
				    "lost the listener");
		}
		n->qoff += w;
		n->sent += w;
	}
	/* compact once most of the queue went out */
	if (n->qoff > 0 && (n->qoff == n->q.len || n->qoff > 4 * 1024 * 1024)) {
		memmove(n->q.data, n->q.data + n->qoff, n->q.len - n->qoff);
		n->q.len -= n->qoff;
		if (n->bcpu != -1)
			n->bhead -= n->qoff;
		n->qoff = 0;
	}
	return 0;
}

/* Flush down to limit bytes, waiting up to a minute for the socket. */
int
net_flush_to(struct net *n, size_t limit, char *err, size_t errlen)
{
	struct pollfd pfd;

	while (net_pending(n) > limit) {
		if (net_flush(n, err, errlen) == -1)
			return -1;
		if (net_pending(n) <= limit)
			break;
		pfd.fd = n->fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, 60000) == 0) {
			snprintf(err, errlen, "the listener takes no data");
			return -1;
		}
	}
	return 0;
}

/* The listener does not speak during a recording unless to say goodbye. */
int
net_readable(struct net *n, char *err, size_t errlen)
{
	struct td_error e;
	struct td_frame f;
	uint8_t buf[2048];
	ssize_t r;

	r = net_read_some(n, buf, sizeof buf);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r == 0) {
		snprintf(err, errlen, "the listener closed the connection");
		return -1;
	}
	if (r < 0)
		return net_err(err, errlen, "lost the listener");
	if (td_buf_add(&n->in, buf, r) == -1) {
		snprintf(err, errlen, "the listener sent too much");
		return -1;
	}
	while (td_frame_parse(n->in.data, n->in.len, &f) == 1) {
		if (f.type == TD_MSG_ERROR) {
			if (td_msg_unpack_error(&f, &e) == 0)
				snprintf(err, errlen, "the listener stopped "
				    "the recording: %s", e.text);
			else
				snprintf(err, errlen, "the listener stopped "
				    "the recording");
			return -1;
		}
		/* a late time-sync reply: its round is over */
		net_consume(n, &f);
	}
	return 0;
}

/* Finish the recording on the listener's side. */
int
net_finish(struct net *n, const uint64_t *pages, int ncpus, char *path,
    size_t pathlen, char *err, size_t errlen)
{
	struct td_end *e;
	struct td_done d;
	struct td_frame f;
	int i;

	if (net_batch_end(n) == -1)
		return -1;
	e = xcalloc(1, sizeof *e);
	e->ncpus = ncpus;
	for (i = 0; i < ncpus; i++)
		e->pages[i] = pages[i];
	i = td_msg_pack_end(&n->q, e);
	free(e);
	if (i == -1) {
		snprintf(err, errlen, "cannot frame END");
		return -1;
	}
	net_blocking(n->fd, true, 60);
	if (net_write_all(n, n->q.data + n->qoff, n->q.len - n->qoff) == -1)
		return net_err(err, errlen, "lost the listener");
	n->qoff = n->q.len = 0;
	if (net_expect(n, TD_MSG_DONE, &f, err, errlen) == -1)
		return -1;
	if (td_msg_unpack_done(&f, &d) == -1) {
		snprintf(err, errlen, "the listener sent a bad DONE");
		return -1;
	}
	net_consume(n, &f);
	snprintf(path, pathlen, "%s", d.path);
	return 0;
}

/* Close the connection and free everything. */
void
net_close(struct net *n)
{
	if (n == NULL)
		return;
	if (n->ssl != NULL) {
		SSL_shutdown(n->ssl);
		SSL_free(n->ssl);
	}
	if (n->ctx != NULL)
		SSL_CTX_free(n->ctx);
	if (n->fd != -1)
		close(n->fd);
	td_buf_free(&n->q);
	td_buf_free(&n->in);
	free(n->seq);
	free(n);
}
