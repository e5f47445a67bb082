/*
 * client.h: tdlisten's one client layer, the shell every kind of client
 * lives in (the shape of tmux's proc_add_peer() and relayd's one session
 * struct with protocol hooks).
 *
 * A client is one accepted connection of a kind: an agent speaking
 * tdproto (agentconn.c and session.c), a trace-cmd record -N client
 * (tracecmd.c), a uftrace record --host client (uftrace.c) or a tdctl on
 * the control socket (control.c).  The layer owns what is the same for
 * all of them: the socket and its bufferevent (plain, or TLS made by
 * conn-tls.c and handed over), the label used in the logs, the deadline
 * of the handshake or request, close with a reason, close after the
 * output drained, one list of every client, one count, the shutdown of
 * all of them, and admission.  The producer keeps its state machine: it
 * sets the bufferevent's callbacks (with its own pointer as their
 * argument) and gives hooks the layer calls.
 *
 * Admission is one function for every kind, client_admit(): --max-sessions
 * holds across the agents, trace-cmd and uftrace clients together (a slot
 * is taken once the client is known: at accept for plain TCP, after the
 * certificate for TLS); the agents of one identity waiting for their
 * HELLO hold at most --max-per-identity of them, and over the cap a slot
 * is kept for the resume of an identity's open recordings.  uftrace
 * clients have their own share too (TD_UF_MAX_CLIENTS, TD_UF_MAX_CLIENTS_ADDR
 * per address).  Control clients are local operators, behind the
 * socket's file mode: they are not counted in --max-sessions (a crowd of
 * agents must never lock the operator out), only in their own small cap,
 * TD_CONTROL_MAX_CLIENTS.  The TLS handshake budget and the Unix socket
 * peers' credentials are admit.c's, asked by agentconn.c before a client
 * has an identity.
 *
 * client_free() is the only function that frees a client: it calls the
 * producer's free hook first, then frees the bufferevent, the timer and
 * the slot.  Nothing here is called back up but the hooks.  Loop thread
 * only.
 */
#ifndef TD_CLIENT_H
#define TD_CLIENT_H

#include <stdbool.h>

#include <event2/bufferevent.h>

struct event_base;
struct listener_config;

/* The kinds of client. */
enum client_kind {
	CLIENT_TDPROTO,		/* an agent: agentconn.c, session.c */
	CLIENT_TRACECMD,	/* trace-cmd record -N: tracecmd.c */
	CLIENT_UFTRACE,		/* uftrace record --host: uftrace.c */
	CLIENT_CONTROL,		/* tdctl: control.c */
	CLIENT_NKINDS
};

/* What client_admit() said. */
enum client_verdict {
	CLIENT_YES,		/* a slot taken */
	CLIENT_RESERVE,		/* a slot kept for resumes (over the cap) */
	CLIENT_FULL,		/* --max-sessions reached, of every kind */
	CLIENT_KIND_FULL,	/* the kind's own cap reached */
	CLIENT_ADDRESS,		/* its address holds the kind's share */
	CLIENT_IDENTITY,	/* its identity waits for HELLOs enough */
};

struct client;

/* What the layer calls a producer for (each may be NULL). */
struct client_hooks {
	/* the client goes: free the producer's state (the bufferevent and
	   the label are still there; the client must not be closed again) */
	void	(*free)(void *arg);
	/* the deadline (client_deadline()) passed */
	void	(*deadline)(struct client *c, void *arg);
	/* tdlisten stops (NULL: client_close(c, "tdlisten is shutting
	   down")) */
	void	(*shutdown)(struct client *c, void *arg);
};

/* Start: clients use base and cfg (its --max-sessions and so on). */
void	client_init(struct event_base *base,
	    const struct listener_config *cfg);
/*
 * May a client of kind, named key (its identity, or its address for
 * uftrace), have a slot?  YES or RESERVE: it may; the others say why not.
 * Nothing is taken.
 */
enum client_verdict client_may_open(enum client_kind kind, const char *key);
/*
 * client_may_open() for c, named key: on YES or RESERVE c takes the slot
 * (and is waiting: client_done_waiting()).
 */
enum client_verdict client_admit(struct client *c, const char *key);
/*
 * A client of kind on the socket fd (owned from now on), called label in
 * the logs, with hooks and the producer's arg; it holds no slot yet.
 */
struct client *client_new(enum client_kind kind, int fd, const char *label,
	    const struct client_hooks *hooks, void *arg);
/*
 * The client's bufferevent: a plain one on its socket (0, or -1 when it
 * cannot be made), or bev made on it already (TLS: conn-tls.c).
 */
int	client_set_plain(struct client *c);
void	client_set_bev(struct client *c, struct bufferevent *bev);
/* Its bufferevent's callbacks, called with the producer's arg. */
void	client_setcb(struct client *c, bufferevent_data_cb read,
	    bufferevent_data_cb write, bufferevent_event_cb event);
/* Its bufferevent (NULL before one is set), socket (-1 once in bev). */
struct bufferevent *client_bev(const struct client *c);
int	client_fd(const struct client *c);
/* Its label in the logs, and a new one. */
const char *client_label(const struct client *c);
void	client_set_label(struct client *c, const char *label);
/* Its key (identity or address) once admitted, "" before. */
const char *client_key(const struct client *c);
enum client_kind client_kind(const struct client *c);
void	*client_arg(const struct client *c);
/* Whether it holds a slot kept for resumes. */
bool	client_reserved(const struct client *c);
/* It is through its handshake and request (HELLO): no longer waiting. */
void	client_done_waiting(struct client *c);
/*
 * The deadline: hooks->deadline in ms from now (replacing the one set);
 * an absolute deadline is set once and not moved by what the peer does.
 */
void	client_deadline(struct client *c, long ms);
void	client_deadline_clear(struct client *c);
/* Log "LABEL: closing: why" (as a warning), then free c. */
void	client_close(struct client *c, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Free c now (see the top). */
void	client_free(struct client *c);
/*
 * Stop reading, send what is written (and what the caller writes right
 * after), then free c: once it went out, the peer closed, or secs passed.
 */
void	client_close_after_drain(struct client *c, int secs);
/* Whether c is draining to its close. */
bool	client_draining(const struct client *c);
/* Clients of kind (CLIENT_NKINDS: every kind) holding a slot. */
int	client_count(enum client_kind kind);
/* Clients of kind in the list, slot or not (CLIENT_NKINDS: all). */
int	client_listed(enum client_kind kind);
/*
 * Walk the clients of kind, newest first: client_first(kind), then
 * client_next() (the next of the same kind) until NULL.  A walker may free the
 * client it stands on once it took the next one.
 */
struct client *client_first(enum client_kind kind);
struct client *client_next(struct client *c);
/*
 * tdlisten stops: every client of kind (CLIENT_NKINDS: all) is given its
 * shutdown hook, or closed.
 */
void	client_shutdown(enum client_kind kind);
/* Free every client of kind (CLIENT_NKINDS: all), after the loop. */
void	client_free_all(enum client_kind kind);
/*
 * Whether identity may open one more recording (--max-per-identity of
 * cfg): the agents' and the trace-cmd clients' one check.
 */
bool	client_may_record(const struct listener_config *cfg,
	    const char *identity);
/* A short name for kind ("agent", "trace-cmd" ...). */
const char *client_kind_name(enum client_kind kind);

#endif
