/*
 * sockio.c: the fast paths of a connection's socket, beside its
 * bufferevent: reading in large pieces, and a reply sent at once.
 *
 * libevent 2.1 reads at most 4 KiB per readv() on a plain socket
 * (EVBUFFER_MAX_READ, whatever FIONREAD says: with the ioctl and an
 * epoll_wait, about 800 system calls per MB), and one TLS record per
 * wake-up (its 5-byte header, then the rest, and an epoll_wait: about 200
 * per MB).  sockio_pump(), called first thing by the connection's read
 * callback, reads what else is waiting right away, 64 KiB per read(), into
 * the bufferevent's input, where the session takes it as if libevent had
 * read it; the bufferevent keeps everything else (the handshake, writes,
 * timeouts, EOF and errors).  100 MB through tdlisten: 845 system calls
 * instead of 80,690 plain, 4,023 instead of 22,707 over TLS.
 *
 * Over TLS the pump lets OpenSSL read ahead, so one read() brings several
 * records; it reads until OpenSSL needs the socket again, so no whole
 * record is left in OpenSSL's buffer, where libevent would not see it, and
 * switches reading ahead off again for libevent's own reads.
 *
 * Large reads cost memory in every session that sends at the same moment
 * (a 64 KiB read buffer in OpenSSL, 64 KiB pieces in the input): 300 TLS
 * agents sending their metadata at once took tdlisten's peak from 42 to
 * 109 MB (bench/load.sh).  So they are for few connections: with more than
 * SOCKIO_FEW open, a connection made then reads 16 KiB at a time, one record
 * per SSL_read, as libevent would (about a third more listener CPU per MB
 * for a fast agent, measured).  After
 * SOCKIO_BUDGET bytes it stops and says so: the caller has the read
 * callback run again in a later turn of the loop, so that one busy agent
 * does not hold up the others and a connection holds no more than that
 * much unread.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "log.h"
#include "sockio.h"
#include "tdlimits.h"
#include "banned.h"

/* One read() asks for this much (a connection made with few others). */
#define SOCKIO_CHUNK	(64u * 1024)
/* ... or this much (a connection made with many). */
#define SOCKIO_CHUNK_SMALL	(16u * 1024)
/* Sessions open at most for large reads. */
#define SOCKIO_FEW	32
/* One pump reads at most this much before it lets others run. */
#define SOCKIO_BUDGET	(256u * 1024)

/*
 * Read into v[0..n) from ssl until it needs the socket (or the stream
 * ended: libevent sees that on its own next read); set each iov_len to
 * what it got and return the total.  *failed is set on a TLS error, with
 * its reason in why.
 */
static size_t
sockio_read_ssl(SSL *ssl, struct evbuffer_iovec *v, int n, bool *failed,
    char *why, size_t whylen)
{
	size_t got, total = 0, off;
	unsigned long e;
	int i, j;

	for (i = 0; i < n; i++) {
		for (off = 0; off < v[i].iov_len; off += got) {
			ERR_clear_error();
			if (SSL_read_ex(ssl, (char *)v[i].iov_base + off,
			    v[i].iov_len - off, &got) == 1) {
				total += got;
				continue;
			}
			e = ERR_peek_error();
			if (SSL_get_error(ssl, 0) == SSL_ERROR_SSL &&
			    ERR_GET_REASON(e) !=
			    SSL_R_UNEXPECTED_EOF_WHILE_READING) {
				ERR_error_string_n(e, why, whylen);
				*failed = true;
			}
			v[i].iov_len = off;
			for (j = i + 1; j < n; j++)
				v[j].iov_len = 0;
			return total;
		}
	}
	return total;
}

/* Read into v[0..n) from a plain socket; set each iov_len, the total. */
static size_t
sockio_read_plain(evutil_socket_t fd, struct evbuffer_iovec *v, int n)
{
	size_t left, total;
	ssize_t r;
	int i;

	do
		r = readv(fd, (struct iovec *)v, n);
	while (r == -1 && errno == EINTR);
	/* EOF and errors: libevent finds them on its own next read */
	total = left = r > 0 ? (size_t)r : 0;
	for (i = 0; i < n; i++) {
		if (v[i].iov_len > left)
			v[i].iov_len = left;
		left -= v[i].iov_len;
	}
	return total;
}

bool
sockio_big(int conns)
{
	return conns <= SOCKIO_FEW;
}

void
sockio_tls(SSL *ssl)
{
	SSL_set_default_read_buffer_len(ssl, TD_TLS_READ_AHEAD);
}

bool
sockio_pump(struct bufferevent *bev, bool big, const char *label)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	struct evbuffer_iovec v[2];
	size_t chunk = big ? SOCKIO_CHUNK : SOCKIO_CHUNK_SMALL;
	bool failed = false;
	size_t done = 0, got;
	char why[256];
	int n;

	/*
	 * A socket bufferevent keeps the end of its input frozen but while it
	 * reads (an OpenSSL one does not freeze it).
	 */
	if (ssl != NULL && big)
		SSL_set_read_ahead(ssl, 1);
	else if (ssl == NULL)
		evbuffer_unfreeze(in, 0);
	while (done < SOCKIO_BUDGET && !failed) {
		if ((n = evbuffer_reserve_space(in, chunk, v, 2)) <= 0)
			break;
		if (ssl != NULL)
			got = sockio_read_ssl(ssl, v, n, &failed, why, sizeof why);
		else
			got = sockio_read_plain(bufferevent_getfd(bev), v, n);
		evbuffer_commit_space(in, v, n);
		done += got;
		if (got < chunk)
			break;		/* nothing more now */
	}
	if (ssl != NULL && big)
		SSL_set_read_ahead(ssl, 0);
	else if (ssl == NULL)
		evbuffer_freeze(in, 0);
	if (failed) {
		/* no later read may hear of it: say it now, after the data */
		log_warnx("%s: TLS error: %s", label, why);
		bufferevent_trigger_event(bev, BEV_EVENT_ERROR |
		    BEV_EVENT_READING, BEV_TRIG_DEFER_CALLBACKS);
		return false;
	}
	/* more may be waiting: the caller comes back once the others had a
	   turn (a deferred trigger would not wait for them: conn.c) */
	return done >= SOCKIO_BUDGET;
}

void
sockio_rest(struct bufferevent *bev)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	bool plain = bufferevent_openssl_get_ssl(bev) == NULL;

	if (evbuffer_get_length(in) != 0)
		return;
	/*
	 * libevent frees a buffer's chains when it is drained whole, but a
	 * drain of an empty buffer does nothing: one byte, into the space
	 * that waits, and drained.  A socket bufferevent's input is frozen
	 * at its end but while it reads (sockio_pump).
	 */
	if (plain)
		evbuffer_unfreeze(in, 0);
	if (evbuffer_add(in, "", 1) == 0)
		evbuffer_drain(in, 1);
	if (plain)
		evbuffer_freeze(in, 0);
}

bool
sockio_held(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	return ssl != NULL && SSL_has_pending(ssl);
}

/*
 * Send data on bev's connection now, when nothing else waits in its output
 * (a time-sync reply must not wait for the next turn of the loop, after
 * whatever other sessions have to do).  What cannot go out at once, or all
 * of it when the output holds something already, goes through the
 * bufferevent as usual.  Over TLS the record is written with the session's
 * SSL, which bufferevent_openssl does not mind while its own output is
 * empty: it keeps no state of a write between its writes but a retry,
 * which an empty output cannot have.  Should OpenSSL want the write
 * retried (a full socket buffer), the bufferevent retries it with the same
 * bytes from its output (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, agentconn.c).
 */
void
sockio_send(struct bufferevent *bev, const void *data, size_t len)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	size_t done = 0;
	ssize_t r;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0 ||
	    !(bufferevent_get_enabled(bev) & EV_WRITE))
		goto out_rest;
	if (ssl != NULL) {
		ERR_clear_error();
		if (SSL_write_ex(ssl, data, len, &done) != 1)
			done = 0;	/* OpenSSL keeps it for the retry */
	} else {
		do
			r = send(bufferevent_getfd(bev), data, len,
			    MSG_DONTWAIT | MSG_NOSIGNAL);
		while (r == -1 && errno == EINTR);
		done = r > 0 ? (size_t)r : 0;
	}
out_rest:
	if (done < len)
		bufferevent_write(bev, (const char *)data + done, len - done);
}
