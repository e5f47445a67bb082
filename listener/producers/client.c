/*
 * client.c: tdlisten's one client layer (see client.h).
 *
 * Before this layer, agentconn.c, tracecmd.c, uftrace.c and control.c each had
 * their own list, count, timer, close and shutdown loop, and
 * --max-sessions was counted per kind: 1,024 agents and 1,024 trace-cmd
 * clients and 256 uftrace clients could be open at once (issue 29).  Now
 * one list holds every client, one count per kind is kept here, and the
 * sum of the agents', trace-cmd and uftrace clients' is what
 * --max-sessions caps.
 *
 * The list is walked for the per-identity and per-address checks: it is
 * --max-sessions long at most (1,024 by default) and walked once per
 * admission, never per byte.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "client.h"
#include "clock.h"
#include "listener.h"
#include "log.h"
#include "registry.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* One client of any kind. */
struct client {
	TAILQ_ENTRY(client)	 entry;
	enum client_kind	 kind;
	int			 fd;		/* -1 once bev has it */
	struct bufferevent	*bev;
	struct event		*timer;		/* deadline, or drain */
	uint64_t		 due_ns;	/* the deadline (CLOCK_MONOTONIC),
						   0: none */
	const struct client_hooks *hooks;
	void			*arg;		/* the producer's */
	bool			 counted;	/* holds a slot */
	bool			 reserve;	/* ... one kept for resumes */
	bool			 waiting;	/* before its HELLO/request */
	bool			 draining;	/* closing once flushed */
	char			 key[TD_MAX_NAME_LEN * 2 + 64];
	char			 label[TD_MAX_NAME_LEN * 2 + 160];
};

static TAILQ_HEAD(, client)	 client_list = TAILQ_HEAD_INITIALIZER(client_list);
static int			 client_n[CLIENT_NKINDS];	/* slots */
static int			 client_nlisted[CLIENT_NKINDS];
static struct event_base	*client_base;
static const struct listener_config *client_cfg;

static const char *const client_names[CLIENT_NKINDS] = {
	[CLIENT_TDPROTO] = "agent",
	[CLIENT_TRACECMD] = "trace-cmd",
	[CLIENT_UFTRACE] = "uftrace",
	[CLIENT_CONTROL] = "control",
};

void
client_init(struct event_base *base, const struct listener_config *cfg)
{
	client_base = base;
	client_cfg = cfg;
}

const char *
client_kind_name(enum client_kind kind)
{
	return kind < CLIENT_NKINDS ? client_names[kind] : "client";
}

/* Whether kind counts in --max-sessions (control clients do not). */
static bool
client_in_sessions(enum client_kind kind)
{
	return kind != CLIENT_CONTROL;
}

int
client_count(enum client_kind kind)
{
	int k, n = 0;

	if (kind < CLIENT_NKINDS)
		return client_n[kind];
	for (k = 0; k < CLIENT_NKINDS; k++)
		if (client_in_sessions(k))
			n += client_n[k];
	return n;
}

int
client_listed(enum client_kind kind)
{
	int k, n = 0;

	if (kind < CLIENT_NKINDS)
		return client_nlisted[kind];
	for (k = 0; k < CLIENT_NKINDS; k++)
		n += client_nlisted[k];
	return n;
}

/* Clients of kind named key holding a slot (waiting: only those). */
static int
client_count_key(enum client_kind kind, const char *key, bool waiting,
    bool reserve)
{
	struct client *c;
	int n = 0;

	TAILQ_FOREACH(c, &client_list, entry) {
		if (c->kind != kind || !c->counted ||
		    strcmp(c->key, key) != 0)
			continue;
		if ((waiting && !c->waiting) || (reserve && !c->reserve))
			continue;
		n++;
	}
	return n;
}

/*
 * Over --max-sessions, an agent of key may still take a slot kept for
 * resumes: while its identity has recordings open (waiting for a resume,
 * or on a connection that may be dead and not yet noticed), as many of its
 * connections as it has recordings may wait for their HELLO so; such a
 * session may only resume (session_set_resume_only()).  A crowd that
 * fills --max-sessions never keeps a recording from its resume (issue 31
 * row 1).
 */
static bool
client_resume_slot(const char *key)
{
	int recs = registry_count(key);

	return recs > 0 &&
	    client_count_key(CLIENT_TDPROTO, key, true, true) < recs;
}

enum client_verdict
client_may_open(enum client_kind kind, const char *key)
{
	switch (kind) {
	case CLIENT_CONTROL:
		if (client_n[kind] >= TD_CONTROL_MAX_CLIENTS)
			return CLIENT_KIND_FULL;
		return CLIENT_YES;
	case CLIENT_UFTRACE:
		if (client_count_key(kind, key, false, false) >=
		    TD_UF_MAX_CLIENTS_ADDR)
			return CLIENT_ADDRESS;
		if (client_n[kind] >= TD_UF_MAX_CLIENTS)
			return CLIENT_KIND_FULL;
		break;
	case CLIENT_TDPROTO:
		/* an authenticated identity's: its address is no one's */
		if (!client_cfg->insecure &&
		    client_count_key(kind, key, true, false) >=
		    client_cfg->max_per_identity)
			return CLIENT_IDENTITY;
		break;
	default:
		break;
	}
	if (client_count(CLIENT_NKINDS) < client_cfg->max_sessions)
		return CLIENT_YES;
	if (kind == CLIENT_TDPROTO && client_resume_slot(key))
		return CLIENT_RESERVE;
	return CLIENT_FULL;
}

enum client_verdict
client_admit(struct client *c, const char *key)
{
	enum client_verdict v;

	if (c->counted)
		return c->reserve ? CLIENT_RESERVE : CLIENT_YES;
	v = client_may_open(c->kind, key);
	if (v != CLIENT_YES && v != CLIENT_RESERVE)
		return v;
	snprintf(c->key, sizeof c->key, "%s", key);
	c->counted = true;
	c->reserve = v == CLIENT_RESERVE;
	c->waiting = true;
	client_n[c->kind]++;
	return v;
}

/* Arm c's timer for the time left until c->due_ns, rounded up. */
static void
client_timer_arm(struct client *c, uint64_t now)
{
	uint64_t left = c->due_ns > now ? c->due_ns - now : 0;
	struct timeval tv;

	left = (left + 999) / 1000;	/* µs, rounded up */
	tv.tv_sec = (time_t)(left / 1000000);
	tv.tv_usec = (suseconds_t)(left % 1000000);
	evtimer_add(c->timer, &tv);
}

/*
 * A deadline never passes early.  libevent's timers run on its cached
 * time, read with CLOCK_MONOTONIC_COARSE (one tick behind, 4 ms at
 * HZ=250) when the base is not EVENT_BASE_FLAG_PRECISE_TIMER: a timer
 * armed for 1 s fired 997-999 ms later (test-conn).  So the deadline is
 * kept on the precise clock, and a timer that comes early is armed
 * again for what is left.
 */
static void
client_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	uint64_t now;

	if (c->draining) {
		client_free(c);
		return;
	}
	now = td_clock_now_ns();
	if (now < c->due_ns) {
		client_timer_arm(c, now);
		return;
	}
	c->due_ns = 0;
	if (c->hooks->deadline != NULL)
		c->hooks->deadline(c, c->arg);
}

struct client *
client_new(enum client_kind kind, int fd, const char *label,
    const struct client_hooks *hooks, void *arg)
{
	struct client *c;

	c = xcalloc(1, sizeof *c);
	c->kind = kind;
	c->fd = fd;
	c->hooks = hooks;
	c->arg = arg;
	snprintf(c->label, sizeof c->label, "%s", label);
	c->timer = evtimer_new(client_base, client_timer_cb, c);
	if (c->timer == NULL)
		fatalx("out of memory");
	TAILQ_INSERT_HEAD(&client_list, c, entry);
	client_nlisted[kind]++;
	return c;
}

int
client_set_plain(struct client *c)
{
	c->bev = bufferevent_socket_new(client_base, c->fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		return -1;
	c->fd = -1;
	return 0;
}

void
client_set_bev(struct client *c, struct bufferevent *bev)
{
	c->bev = bev;
	c->fd = -1;
}

void
client_setcb(struct client *c, bufferevent_data_cb read,
    bufferevent_data_cb write, bufferevent_event_cb event)
{
	bufferevent_setcb(c->bev, read, write, event, c->arg);
}

struct bufferevent *
client_bev(const struct client *c)
{
	return c->bev;
}

int
client_fd(const struct client *c)
{
	return c->bev != NULL ? bufferevent_getfd(c->bev) : c->fd;
}

const char *
client_label(const struct client *c)
{
	return c->label;
}

void
client_set_label(struct client *c, const char *label)
{
	snprintf(c->label, sizeof c->label, "%s", label);
}

const char *
client_key(const struct client *c)
{
	return c->key;
}

enum client_kind
client_kind(const struct client *c)
{
	return c->kind;
}

void *
client_arg(const struct client *c)
{
	return c->arg;
}

bool
client_reserved(const struct client *c)
{
	return c->reserve;
}

void
client_done_waiting(struct client *c)
{
	c->waiting = false;
}

void
client_deadline(struct client *c, long ms)
{
	uint64_t now;

	if (c->draining)
		return;
	now = td_clock_now_ns();
	c->due_ns = now + (uint64_t)(ms > 0 ? ms : 0) * 1000000;
	client_timer_arm(c, now);
}

void
client_deadline_clear(struct client *c)
{
	if (!c->draining) {
		c->due_ns = 0;
		evtimer_del(c->timer);
	}
}

void
client_free(struct client *c)
{
	if (c->hooks->free != NULL)
		c->hooks->free(c->arg);
	event_free(c->timer);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	else if (c->fd != -1)
		close(c->fd);
	TAILQ_REMOVE(&client_list, c, entry);
	client_nlisted[c->kind]--;
	if (c->counted)
		client_n[c->kind]--;
	free(c);
}

void
client_close(struct client *c, const char *fmt, ...)
{
	char why[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	log_warnx("%s: closing: %s", c->label, why);
	client_free(c);
}

/* What was written went out (the write callback alone does not say so:
   libevent runs it deferred, maybe for an earlier write). */
static void
client_drain_write_cb(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		client_free(arg);
}

static void
client_drain_event_cb(struct bufferevent *bev, short what, void *arg)
{
	client_free(arg);
}

void
client_close_after_drain(struct client *c, int secs)
{
	struct timeval tv = { secs, 0 };

	if (c->bev == NULL) {
		client_free(c);
		return;
	}
	c->draining = true;
	c->waiting = false;
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, client_drain_write_cb,
	    client_drain_event_cb, c);
	evtimer_add(c->timer, &tv);
}

bool
client_draining(const struct client *c)
{
	return c->draining;
}

struct client *
client_first(enum client_kind kind)
{
	struct client *c = TAILQ_FIRST(&client_list);

	while (c != NULL && kind != CLIENT_NKINDS && c->kind != kind)
		c = TAILQ_NEXT(c, entry);
	return c;
}

struct client *
client_next(struct client *c)
{
	enum client_kind kind = c->kind;

	c = TAILQ_NEXT(c, entry);
	while (c != NULL && c->kind != kind)
		c = TAILQ_NEXT(c, entry);
	return c;
}

void
client_shutdown(enum client_kind kind)
{
	struct client *c, *next;

	for (c = TAILQ_FIRST(&client_list); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (kind != CLIENT_NKINDS && c->kind != kind)
			continue;
		if (c->draining)
			continue;
		if (c->hooks->shutdown != NULL)
			c->hooks->shutdown(c, c->arg);
		else
			client_close(c, "tdlisten is shutting down");
	}
}

void
client_free_all(enum client_kind kind)
{
	struct client *c, *next;

	for (c = TAILQ_FIRST(&client_list); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (kind == CLIENT_NKINDS || c->kind == kind)
			client_free(c);
	}
}

bool
client_may_record(const struct listener_config *cfg, const char *identity)
{
	return registry_count(identity) < cfg->max_per_identity;
}
