/*
 * conn.h: one connection of the agent to the listener.
 *
 * A TCP socket, with TLS on top unless --insecure (ssl NULL), and the bytes
 * the listener sent that were not yet taken as frames.  net.c owns the
 * connections (the live one and the reconnect thread's) and the protocol;
 * this is the byte level: dial, gather TLS records, write and read whole
 * frames while blocking.  No logging; errors go into err, or errno.
 */
#ifndef TD_CONN_H
#define TD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "buf.h"
#include "tdproto.h"

struct conn {
	int		 fd;		/* -1: none */
	SSL		*ssl;		/* NULL: plain TCP */
	struct td_buf	 in;		/* what the listener sent */
	bool		 refused;	/* a TLS alert: it will not take us */
};

/* A connected TCP socket to name:port (timeout in s), or -1 with err. */
int	conn_dial(const char *name, const char *port, int timeout, char *err,
	    size_t errlen);
/* Make fd blocking (with send and receive timeouts) or not. */
void	conn_blocking_ms(int fd, bool on, int ms);
void	conn_blocking(int fd, bool on, int timeout);
/* After the handshake: TLS records gather before they go to the socket. */
int	conn_wbuf(struct conn *c);
/* Gathered bytes not yet in the socket; 0 for plain TCP. */
size_t	conn_wpending(const struct conn *c);
/* Push them: 0 all went, 1 the socket would block, -1 error. */
int	conn_wflush(struct conn *c);
/* Write all of len bytes, blocking; *sent (if not NULL) counts them. */
int	conn_write_all(struct conn *c, const void *p, size_t len,
	    uint64_t *sent);
/* Up to cap bytes; 0 at the end, -1 with errno (EAGAIN: none yet). */
ssize_t	conn_read_some(struct conn *c, void *p, size_t cap);
/* Read until c->in starts with a whole frame, blocking; f describes it. */
int	conn_read_frame(struct conn *c, struct td_frame *f, char *err,
	    size_t errlen);
/* Drop frame f, the first in c->in. */
void	conn_consume(struct conn *c, const struct td_frame *f);
/* Close (polite: TLS close_notify first) and free c's buffers. */
void	conn_close(struct conn *c, bool polite);
/* An ERROR frame into err ("what: text"); *fatal unless it says RETRY. */
int	conn_error_frame(const struct td_frame *f, bool *fatal, char *err,
	    size_t errlen, const char *what);

#endif
