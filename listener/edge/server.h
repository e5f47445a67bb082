/*
 * server.h: tdlisten's listening sockets (TCP on --bind's addresses, and
 * --unix).  Each accepted socket, non-blocking, goes to the accept
 * callback with its printable peer name; nothing here knows connections
 * or sessions.  Loop thread only.
 */
#ifndef TD_SERVER_H
#define TD_SERVER_H

#include <stdbool.h>

#include <event2/listener.h>

struct accept_pause;
struct event_base;
struct listener_config;
struct sockaddr;

/*
 * A TCP listening socket's wishes and words (server_listen_tcp()): the
 * backlog and callback of its evconnlistener, the group it pauses with
 * when accept() runs out of descriptors (acceptpause.h; NULL: none); opt
 * names the bind option
 * in a resolution error (NULL: "cannot resolve"); the log says
 * "<fail> on HOST port PORT" when it cannot listen and
 * "<ok> on HOST port PORT<tail>" when it does.
 */
struct server_tcp {
	const char		*opt;
	const char		*fail;
	const char		*ok;
	const char		*tail;
	int			 backlog;
	int			 numeric;	/* bind is a numeric address */
	evconnlistener_cb	 cb;
	struct accept_pause	*pause;
};

/* What an accepted socket is handed to. */
typedef void (*server_accept_fn)(int fd, const struct sockaddr *sa,
    const char *peer, void *arg);

/* Listen where cfg says (tls: for the log line); 0 or -1 (logged). */
int	server_start(struct event_base *base, const struct listener_config *cfg,
	    bool tls, server_accept_fn accept, void *arg);
/*
 * Listen at port on each address addr resolves to (every address when
 * NULL), at most max of them into levs: non-blocking, close-on-exec,
 * SO_REUSEADDR, IPv6 only on IPv6.  The count made (> 0), or -1; both
 * logged.  tdlisten's producers of plain clients share it.
 */
int	server_listen_tcp(struct event_base *base, const char *addr,
	    const char *port, const struct server_tcp *how,
	    struct evconnlistener **levs, int max);
/* Stop listening (the Unix socket file goes). */
void	server_shutdown(void);

#endif
