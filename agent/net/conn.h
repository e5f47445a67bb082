/*
 * conn.h: one connection of the agent to the listener, whatever carries
 * it.
 *
 * Every socket, device and TLS call of the agent is here, and every wait
 * on a connection (conn_poll()): net.c speaks the protocol over a struct
 * conn and never touches its descriptor, which only the recorder's epoll
 * set holds besides (net_fd()).  A connection is made over one of three
 * transports, chosen by the listener's address (conn_target_parse()):
 *
 *	HOST		TCP to HOST (a name, an address, "[v6]") and port
 *	vsock:CID	an AF_VSOCK stream to the host context CID and port
 *	serial:PATH	a character device, e.g. a virtio-serial port
 *			(/dev/virtio-ports/NAME): a byte pipe, no port
 *
 * with TLS on top unless the context is NULL (--insecure).  Over TCP,
 * kernel TLS (SSL_OP_ENABLE_KTLS) is asked for: where the kernel has it,
 * the kernel encrypts what the agent sends; elsewhere OpenSSL does.  Over TCP the
 * listener's certificate must name the host unless a server name is given;
 * over vsock and serial there is no host name to check, so a server name
 * is required.  Over serial, the session starts after a resynchronisation
 * preamble the listener answers (proto/resync.h): whatever an old session
 * left in the device is discarded.  conn_open() blocks (timeout in s, the
 * preamble's wait included) until the connection is
 * authenticated; after it the descriptor is blocking or not as
 * conn_set_blocking() says.  No logging; errors go into err, or errno.
 */
#ifndef TD_CONN_H
#define TD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "tdproto.h"

struct conn;

enum conn_kind {
	CONN_TCP,
	CONN_VSOCK,
	CONN_SERIAL,
};

/* Where the listener is: parsed from -h and -p. */
struct conn_target {
	enum conn_kind	 kind;
	char		 addr[4096];	/* TCP host, or the device's path */
	uint32_t	 cid;		/* vsock: the peer's context id */
	char		 port[16];	/* TCP and vsock */
	char		 server_name[256]; /* what the certificate names */
	int		 devfd;		/* serial: the device, opened early */
};

/*
 * Fill t from a listener address ("HOST", "vsock:CID", "serial:PATH"),
 * a port and a server name (NULL: the TCP host); -1 with err when the
 * address is malformed or a transport needs a server name not given.
 */
int		 conn_target_parse(const char *spec, const char *port,
		    const char *server_name, bool tls, struct conn_target *t,
		    char *err, size_t errlen);
/*
 * Open what must be opened while the agent is still root: a serial
 * device (root's alone in a guest), kept for every connection over it
 * (a virtio-serial port is a byte pipe that outlives connections); a
 * no-op for sockets.  conn_target_close() closes it.
 */
int		 conn_target_open(struct conn_target *t, char *err,
		    size_t errlen);
void		 conn_target_close(struct conn_target *t);
/* The transport's name ("TCP", "vsock", "serial"). */
const char	*conn_kind_name(enum conn_kind kind);
/*
 * Where t leads, for messages: "'HOST' port P", "vsock CID C port P" or
 * "serial device 'PATH'".
 */
void		 conn_target_describe(const struct conn_target *t, char *buf,
		    size_t len);
/*
 * Dial t's transport (conn-target.c): a connected socket (TCP with
 * TCP_USER_TIMEOUT user_timeout_ms), or a descriptor of t's serial device
 * of its own; blocking for at most timeout s.  -1 with err.
 */
int		 conn_target_dial(const struct conn_target *t, int timeout,
		    int user_timeout_ms, char *err, size_t errlen);

/*
 * The TLS client context of every connection: our certificate and key
 * (read now, never again) and the CA the listener must chain to.
 */
SSL_CTX		*conn_ctx_new(const char *cert, const char *key,
		    const char *ca, char *err, size_t errlen);
void		 conn_ctx_free(SSL_CTX *ctx);

/*
 * Connect and, with ctx, authenticate (TLS 1.3, the listener's certificate
 * checked against t's server name), blocking for at most timeout s at each
 * step; a link that stops acknowledging is given up after user_timeout_ms
 * (TCP).  NULL with err; *fatal when trying again cannot help (a
 * certificate refused); errno ETIMEDOUT when a serial device's preamble
 * got no answer (the listener, or QEMU's connection to it, is not there
 * yet: worth trying again).
 */
struct conn	*conn_open(const struct conn_target *t, SSL_CTX *ctx,
		    int timeout, int user_timeout_ms, bool *fatal, char *err,
		    size_t errlen);
/* Close (polite: TLS close_notify first) and free; NULL is fine. */
void		 conn_close(struct conn *c, bool polite);

/* The descriptor to poll. */
int		 conn_fd(const struct conn *c);
/*
 * Over TCP, give the connection up after user_ms of data unacknowledged
 * (TCP_USER_TIMEOUT), or window_ms while the listener's receive window is
 * closed: its kernel answers the window probes, so it is slow, not gone.
 * Called again as the window closes and opens (every turn of net.c's loop).
 */
void		 conn_patience(struct conn *c, int user_ms, int window_ms);
/*
 * What the resynchronisation preamble of a serial connection found, for
 * messages: "resynchronised: 2 preambles written, 96 stale bytes
 * discarded"; "" over other transports.
 */
void		 conn_resync_describe(const struct conn *c, char *buf,
		    size_t len);
/*
 * Wait up to ms for the descriptor to be ready for events (POLLIN,
 * POLLOUT): the events that came (POLLHUP and POLLERR too), 0 when the
 * time is out, -1 with errno.
 */
int		 conn_poll(struct conn *c, short events, int ms);
/* Blocking, with send and receive timeouts of ms, or not. */
void		 conn_set_blocking(struct conn *c, bool on, int ms);
/* Whether the listener refused this agent with a TLS alert. */
bool		 conn_refused(const struct conn *c);
/*
 * The TLS session, for messages: "TLSv1.3 TLS_AES_128_GCM_SHA256, records
 * made by OpenSSL (no kernel TLS on this socket)" or "... by the kernel
 * (kTLS)"; "" without TLS.
 */
void		 conn_tls_describe(const struct conn *c, char *buf,
		    size_t len);

/*
 * Write what the connection takes now of len bytes: the count (TLS: into
 * the gathered records; kernel TLS: handed to the socket, which makes the
 * records), or -1 with errno (EAGAIN: nothing now).
 */
ssize_t		 conn_write_some(struct conn *c, const void *p, size_t len);
/* TLS records gathered and not yet handed to the descriptor; 0 plain. */
size_t		 conn_wpending(const struct conn *c);
/* Hand them over: 0 all went, 1 the descriptor would block, -1 error. */
int		 conn_wflush(struct conn *c);
/* Write all of len bytes, blocking; *sent (if not NULL) counts them. */
int		 conn_write_all(struct conn *c, const void *p, size_t len,
		    uint64_t *sent);

/*
 * Read what is there into the connection's input: the bytes added, 0 at
 * the end, or -1 with errno (EAGAIN: none yet; EMSGSIZE: the input is
 * full; EPROTO: a TLS error or alert).
 */
ssize_t		 conn_fill(struct conn *c);
/* The first whole frame of the input: 1 (f), 0 not yet, -1 malformed. */
int		 conn_frame(struct conn *c, struct td_frame *f);
/* Read until the input starts with a whole frame, blocking; f is it. */
int		 conn_read_frame(struct conn *c, struct td_frame *f, char *err,
		    size_t errlen);
/* Drop frame f, the first of the input. */
void		 conn_consume(struct conn *c, const struct td_frame *f);
/* An ERROR frame into err ("what: text"); *fatal unless it says RETRY. */
int		 conn_error_frame(const struct td_frame *f, bool *fatal,
		    char *err, size_t errlen, const char *what);

#endif
