/*
 * agentconn.h: tdlisten's connections from agents: admission (a handshake slot,
 * then a session slot), the bufferevent (TLS or plain) with its timers and
 * watermarks, and the session (session.h) that speaks tdproto over it.
 *
 * A connection is a client of the client layer (client.h), which owns
 * its socket, bufferevent, deadline, list and slot; the connection owns
 * its session, and client_free() is the only function that frees one.  It reads
 * what arrives into its session and sends what the session writes; the
 * session's verdict says when to close, pause or let the recording wait.
 * Loop thread only.
 */
#ifndef TD_AGENTCONN_H
#define TD_AGENTCONN_H

#include <stdbool.h>

#include <openssl/ssl.h>

struct event_base;
struct listener_config;
struct sockaddr;

/* Start: connections use base, cfg and ctx (NULL: plain TCP). */
void	agentconn_init(struct event_base *base,
	    const struct listener_config *cfg, SSL_CTX *ctx);
/*
 * An accepted socket fd from sa (peer: its printable name): admitted to
 * a handshake slot (TLS) or a session slot, or closed (the refusal is
 * logged at a bounded rate).  The server's accept callback.
 */
void	agentconn_accept(int fd, const struct sockaddr *sa, const char *peer,
	    void *arg);
/* New connections use ctx from now on (certificates reloaded). */
void	agentconn_set_ctx(SSL_CTX *ctx);
/* The context new connections use. */
SSL_CTX	*agentconn_get_ctx(void);
/* Connections through their handshake (session slots taken). */
int	agentconn_sessions(void);
/* Connections by state, for the metrics. */
struct agentconn_counts {
	int	handshake;	/* in the preamble or the TLS handshake */
	int	open;		/* through it: HELLO, streaming */
	int	pausing;	/* told to come back later */
	int	closing;	/* sending their last ERROR */
};
void	agentconn_count(struct agentconn_counts *n);
/* One connection as the status page lists it (valid during the call). */
struct agentconn_info {
	const char	*peer;		/* address:port, unix:PID, vsock:... */
	const char	*identity;	/* its certificate's, "" before */
	const char	*state;		/* handshake, open, pausing, closing */
};
/* fn(info, arg) for every connection; fn changes none. */
void	agentconn_each(void (*fn)(const struct agentconn_info *, void *),
	    void *arg);
/* Every streaming session checkpoints and acknowledges what arrived. */
void	agentconn_tick(void);
/*
 * tdlisten stops: every agent is told to come back later (its recording
 * is left on disk for the next tdlisten); the ERRORs go out while the loop
 * runs its last second.
 */
void	agentconn_shutdown_all(void);
/* After the loop: free what is left. */
void	agentconn_free_all(void);

#endif
