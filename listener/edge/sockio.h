/*
 * sockio.h: the fast paths of a connection's socket, beside its
 * bufferevent (libevent 2.1 reads 4 KiB per call on a plain socket and
 * one TLS record per wake-up; a reply written through the bufferevent
 * waits for the loop's next turn).  Nothing here owns the bufferevent.
 * Loop thread only.
 */
#ifndef TD_SOCKIO_H
#define TD_SOCKIO_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct bufferevent;

/* Whether a connection made while conns are open reads in large pieces. */
bool	sockio_big(int conns);
/* A TLS connection that reads in large pieces needs a read buffer as large. */
void	sockio_tls(SSL *ssl);
/*
 * Read what waits on bev's socket into its input, in large pieces when
 * big; label names the connection in a log line (a TLS error).  True when
 * it stopped at its budget with more perhaps waiting: the caller reads
 * again in a later turn of the loop.
 */
bool	sockio_pump(struct bufferevent *bev, bool big, const char *label);
/*
 * Whether OpenSSL holds bytes of bev's connection that it read from the
 * socket and did not hand over (libevent reads them only when the socket
 * says more came).
 */
bool	sockio_held(struct bufferevent *bev);
/*
 * Give back the memory of bev's input while nothing waits in it: a read
 * that found nothing leaves its reserved space (16 to 64 KiB) in the
 * buffer, which an idle connection would hold for as long as it stays.
 */
void	sockio_rest(struct bufferevent *bev);
/* Send now when bev's output is empty, else (and the rest) through bev. */
void	sockio_send(struct bufferevent *bev, const void *data, size_t len);

#endif
