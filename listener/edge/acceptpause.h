/*
 * acceptpause.h: listening sockets that stop accepting together for a
 * second when accept() runs out of descriptors or memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM) instead of spinning on the error, then accept again;
 * any other accept error is logged and accepting goes on.  One for
 * tdlisten's agents, one for each producer of plain clients and one for
 * --http.  Loop thread only.
 */
#ifndef TD_ACCEPTPAUSE_H
#define TD_ACCEPTPAUSE_H

#include <stdbool.h>

struct accept_pause;
struct event_base;
struct evconnlistener;

/* What to do after a pause instead of enabling every listener again. */
typedef void	(*accept_resume_fn)(void *arg);

/*
 * A group named what in the log ("trace-cmd port: accept: ...": NULL for
 * none); resume, when not NULL, is called after a pause in place of
 * enabling the group's listeners (for a caller that keeps a listener off
 * for its own reasons: accept_paused() tells it whether the pause is
 * over).  NULL when no timer can be made.
 */
struct accept_pause	*accept_pause_new(struct event_base *base,
			    const char *what, accept_resume_fn resume,
			    void *arg);
/* Put lev in the group (its error callback); -1 when the group is full. */
int			 accept_pause_watch(struct accept_pause *p,
			    struct evconnlistener *lev);
bool			 accept_paused(const struct accept_pause *p);
/* NULL is fine; the listeners stay the caller's. */
void			 accept_pause_free(struct accept_pause *p);

#endif
