/*
 * conn-tls.h: the TLS side of an agent's connection (agentconn.c): the
 * accepting bufferevent over a socket, and words for what went wrong in
 * the handshake or later.
 *
 * Nothing here keeps state or logs: agentconn.c owns the bufferevent these
 * functions make and read, and decides what to do with the words.  Loop
 * thread only.
 */
#ifndef TD_CONN_TLS_H
#define TD_CONN_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct bufferevent;
struct event_base;

/*
 * An accepting TLS bufferevent on fd (closed when it is freed) with a new
 * SSL of ctx; big: the connection reads in large pieces (sockio_big());
 * required: a byte pipe, whose raw bytes are watched for a new session's
 * preamble.  NULL with *why set when there is none ("cannot start TLS",
 * "out of memory").
 */
struct bufferevent *conn_tls_new(struct event_base *base, SSL_CTX *ctx,
	    int fd, bool big, bool required, const char **why);
/*
 * Words for bev's error event into msg (len bytes): a new preamble in
 * the middle (required), the handshake refused (handshake: it was
 * running) with the reason and what the peer's alert means, a TLS error,
 * else the socket's error.
 */
void	conn_tls_error(struct bufferevent *bev, bool required, bool handshake,
	    char *msg, size_t len);

#endif
