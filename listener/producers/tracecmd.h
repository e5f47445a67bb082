/*
 * tracecmd.h: stock trace-cmd record -N clients (--tracecmd-port).
 *
 * A producer like session.c, for another protocol: trace-cmd's v3 "msg"
 * protocol on a control connection (handshake, TINIT/RINIT, the client's
 * trace.dat header as SEND_DATA ... FIN_DATA, CLOSE), per-CPU data on the
 * sockets tcdata.c makes, the header into a recording by tcmeta.c.  The
 * recording (DIR/tracecmd-<address>/<UTC time>.dat) is finished as soon
 * as CLOSE came and every data stream ended.  Plain TCP and UDP: nobody
 * is authenticated, which the log says.  One process, one loop: a client
 * is a struct with a bufferevent, never a process.  Loop thread only.
 */
#ifndef TD_TRACECMD_H
#define TD_TRACECMD_H

struct event_base;
struct listener_config;

/* Listen where cfg says (--tracecmd-port/-bind); 0, or -1 (logged). */
int	tracecmd_start(struct event_base *base,
	    const struct listener_config *cfg);
/* Clients connected now. */
int	tracecmd_clients(void);
/*
 * tdlisten stops: no more clients, and every recording of one is closed
 * now (kept as incomplete: a trace-cmd client cannot resume).
 */
void	tracecmd_shutdown(void);

#endif
