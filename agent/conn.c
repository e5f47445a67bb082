/*
 * conn.c: one connection of the agent to the listener: dialling, the TLS
 * write buffer, blocking frame I/O (see conn.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "buf.h"
#include "conn.h"
#include "tls.h"
#include "banned.h"

/*
 * TLS records (16 KiB each) gather in a buffer BIO of this size and go to
 * the socket together: one write() per record cost as much of the agent's
 * CPU on loopback as the encryption (bench/README.md, "Streaming").
 */
#define CONN_TLS_WBUF	(256u * 1024)

/* "what: strerror(errno)" into err. */
static int
conn_err(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(errno));
	return -1;
}

/* A TCP connection to name (a host, an address, "[v6]") and port. */
int
conn_dial(const char *name, const char *port, int timeout, char *err,
    size_t errlen)
{
	struct addrinfo hints, *res, *ai;
	struct pollfd pfd;
	socklen_t sl;
	int fd = -1, e, soerr, one = 1;

	char host[256];
	size_t hl = strlen(name);

	/* "[::1]" is how an IPv6 literal is written next to a port */
	if (hl > 2 && name[0] == '[' && name[hl - 1] == ']')
		snprintf(host, sizeof host, "%.*s", (int)(hl - 2), name + 1);
	else
		snprintf(host, sizeof host, "%s", name);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((e = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(err, errlen, "cannot resolve '%s': %s", name,
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
			if (poll(&pfd, 1, timeout * 1000) == 1) {
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
		    name, port, strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

void
conn_blocking_ms(int fd, bool on, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void
conn_blocking(int fd, bool on, int timeout)
{
	conn_blocking_ms(fd, on, timeout * 1000);
}

/*
 * Put a write buffer between c's TLS records and its socket, once the
 * handshake is over (OpenSSL flushes the handshake's flights itself).
 */
int
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

/* Bytes of TLS records gathered and not yet handed to the socket. */
size_t
conn_wpending(const struct conn *c)
{
	return c->ssl != NULL ? (size_t)BIO_wpending(SSL_get_wbio(c->ssl)) :
	    0;
}

/* Hand them over: 0 when all went, 1 when the socket would block, -1. */
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

/* Write all of p, blocking (set-up, time sync and finish). */
int
conn_write_all(struct conn *c, const void *p, size_t len, uint64_t *sent)
{
	ssize_t w;
	size_t done;
	int r;

	while (len != 0) {
		if (c->ssl != NULL) {
			ERR_clear_error();
			r = SSL_write_ex(c->ssl, p, len, &done);
			if (r <= 0) {
				errno = EPIPE;
				return -1;
			}
			w = (ssize_t)done;
		} else {
			w = send(c->fd, p, len, MSG_NOSIGNAL);
			if (w == -1 && errno == EINTR)
				continue;
			if (w == -1)
				return -1;
		}
		p = (const uint8_t *)p + w;
		len -= w;
		if (sent != NULL)
			*sent += w;
	}
	if (conn_wflush(c) != 0) {
		errno = EPIPE;
		return -1;
	}
	return 0;
}

/* Read up to cap bytes; 0 on EOF, -1 on error (errno EAGAIN: none yet). */
ssize_t
conn_read_some(struct conn *c, void *p, size_t cap)
{
	size_t got;
	int e;

	if (c->ssl == NULL)
		return recv(c->fd, p, cap, 0);
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
	if (e == SSL_ERROR_SSL)
		errno = EPROTO;
	return -1;
}

/* Read one whole frame into c->in, blocking. */
int
conn_read_frame(struct conn *c, struct td_frame *f, char *err,
    size_t errlen)
{
	uint8_t buf[4096];
	ssize_t r;
	int pr;

	for (;;) {
		pr = td_frame_parse(c->in.data ? c->in.data : buf, c->in.len,
		    f);
		if (pr == 1)
			return 0;
		if (pr == -1) {
			snprintf(err, errlen, "the listener sent a bad frame");
			return -1;
		}
		r = conn_read_some(c, buf, sizeof buf);
		if (r == 0) {
			snprintf(err, errlen, "the listener closed the "
			    "connection");
			return -1;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (c->ssl != NULL && errno == EPROTO) {
				c->refused = true;
				td_tls_handshake_error(c->ssl, err, errlen,
				    "the listener refused this agent");
				return -1;
			}
			return conn_err(err, errlen, errno == EAGAIN ?
			    "no answer from the listener" :
			    "cannot read from the listener");
		}
		if (td_buf_add(&c->in, buf, r) == -1) {
			snprintf(err, errlen, "the listener sent too much");
			return -1;
		}
	}
}

void
conn_consume(struct conn *c, const struct td_frame *f)
{
	memmove(c->in.data, c->in.data + f->total, c->in.len - f->total);
	c->in.len -= f->total;
}

void
conn_close(struct conn *c, bool polite)
{
	if (c->ssl != NULL) {
		if (polite)
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	td_buf_free(&c->in);
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

