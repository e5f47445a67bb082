/*
 * server.h: tdlisten's listening sockets (TCP on --bind's addresses, and
 * --unix).  Each accepted socket, non-blocking, goes to the accept
 * callback with its printable peer name; nothing here knows connections
 * or sessions.  Loop thread only.
 */
#ifndef TD_SERVER_H
#define TD_SERVER_H

#include <stdbool.h>

struct event_base;
struct listener_config;
struct sockaddr;

/* What an accepted socket is handed to. */
typedef void (*server_accept_fn)(int fd, const struct sockaddr *sa,
    const char *peer, void *arg);

/* Listen where cfg says (tls: for the log line); 0 or -1 (logged). */
int	server_start(struct event_base *base, const struct listener_config *cfg,
	    bool tls, server_accept_fn accept, void *arg);
/* Stop listening (the Unix socket file goes). */
void	server_shutdown(void);

#endif
