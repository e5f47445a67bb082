/*
 * acceptpause.c: a second's pause in accepting when the process runs out
 * of descriptors or memory (acceptpause.h).  libevent's listener calls its
 * error callback on every failed accept(): without the pause a full
 * descriptor table would spin the loop.  The callback's argument is the
 * listener's (evhttp takes it over for its own), so the group is found
 * from the listener among the few there are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "acceptpause.h"
#include "log.h"
#include "xmalloc.h"

#include "banned.h"

/* The most listeners of one group: --bind's addresses, --unix, --vsock. */
#define ACCEPT_PAUSE_MAX	8

struct accept_pause {
	struct evconnlistener	*lev[ACCEPT_PAUSE_MAX];
	int			 nlev;
	struct event		*timer;
	char			*what;		/* the log's prefix, or NULL */
	accept_resume_fn	 resume;
	void			*arg;
	bool			 paused;
	struct accept_pause	*next;
};

static struct accept_pause	*accept_groups;

/* The group lev is in. */
static struct accept_pause *
accept_pause_of(const struct evconnlistener *lev)
{
	struct accept_pause *p;
	int i;

	for (p = accept_groups; p != NULL; p = p->next)
		for (i = 0; i < p->nlev; i++)
			if (p->lev[i] == lev)
				return p;
	return NULL;
}

static void
accept_pause_over_cb(evutil_socket_t fd, short what, void *arg)
{
	struct accept_pause *p = arg;
	int i;

	p->paused = false;
	if (p->resume != NULL) {
		p->resume(p->arg);
		return;
	}
	for (i = 0; i < p->nlev; i++)
		evconnlistener_enable(p->lev[i]);
}

static void
accept_pause_error_cb(struct evconnlistener *lev, void *arg)
{
	struct accept_pause *p = accept_pause_of(lev);
	struct timeval second = { 1, 0 };
	int e = EVUTIL_SOCKET_ERROR(), i;

	if (p == NULL)
		return;
	if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM) {
		log_warnx("%s%saccept: %s", p->what ? p->what : "",
		    p->what ? ": " : "", strerror(e));
		return;
	}
	log_warnx("%s%saccept: %s: pausing for a second",
	    p->what ? p->what : "", p->what ? ": " : "", strerror(e));
	for (i = 0; i < p->nlev; i++)
		evconnlistener_disable(p->lev[i]);
	p->paused = true;
	evtimer_add(p->timer, &second);
}

struct accept_pause *
accept_pause_new(struct event_base *base, const char *what,
    accept_resume_fn resume, void *arg)
{
	struct accept_pause *p = xcalloc(1, sizeof *p);

	if ((p->timer = evtimer_new(base, accept_pause_over_cb, p)) == NULL) {
		free(p);
		return NULL;
	}
	p->what = what ? xstrdup(what) : NULL;
	p->resume = resume;
	p->arg = arg;
	p->next = accept_groups;
	accept_groups = p;
	return p;
}

int
accept_pause_watch(struct accept_pause *p, struct evconnlistener *lev)
{
	if (p->nlev >= ACCEPT_PAUSE_MAX)
		return -1;
	p->lev[p->nlev++] = lev;
	evconnlistener_set_error_cb(lev, accept_pause_error_cb);
	return 0;
}

bool
accept_paused(const struct accept_pause *p)
{
	return p->paused;
}

void
accept_pause_free(struct accept_pause *p)
{
	struct accept_pause **pp;

	if (p == NULL)
		return;
	for (pp = &accept_groups; *pp != NULL; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	event_free(p->timer);
	free(p->what);
	free(p);
}
