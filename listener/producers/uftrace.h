/*
 * uftrace.h: tdlisten's producer for `uftrace record --host` clients
 * (--uftrace-port).  Each client's run becomes a uftrace data directory,
 * DIR/uftrace-<peer address>/<UTC time>/, written as <UTC time>.part and
 * renamed at the client's SEND_END, or to <UTC time>.incomplete (with the
 * reason in its tdlisten.incomplete) when the client goes away, sends
 * something malformed or the listener stops.  It writes a directory, not
 * a trace.dat: it does not go through recording.c; it only reads the
 * registry to name the tdagent recordings of the same host.  Plain TCP
 * (uftrace has nothing else), unauthenticated.  Loop thread only.
 */
#ifndef TD_UFTRACE_H
#define TD_UFTRACE_H

struct event_base;
struct listener_config;
struct output_done;

/*
 * Listen on port at bind_addr (an address; NULL: 127.0.0.1) and take runs into
 * cfg->dir; runs an earlier tdlisten left as .part are marked incomplete.
 * 0, or -1 (logged).
 */
int	uftrace_start(struct event_base *base,
	    const struct listener_config *cfg, const char *port,
	    const char *bind_addr);
/*
 * cb(d, arg) for every run put in place, as its directory (complete, or
 * <UTC time>.incomplete): tdlisten --on-finish; NULL: nobody.
 */
void	uftrace_set_done(void (*cb)(const struct output_done *, void *),
	    void *arg);
/* Stop listening; every run still open is kept as incomplete. */
void	uftrace_shutdown(void);

#endif
