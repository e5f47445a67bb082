/*
 * net-local.h: the agent's session with the listener, struct net, for
 * net.c, net-sink.c and net-tsync.c only (see net.h).
 */
#ifndef TD_NET_LOCAL_H
#define TD_NET_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "net.h"
#include "tdlimits.h"
#include "tdproto.h"

struct collectors;
struct conn;
struct hstage;
struct reconnect;
struct stream;
struct tsyncudp;

/* The session: the stream, the connection of the moment, reconnecting. */
struct net {
	struct net_params np;
	struct td_hello	 hello;
	struct collectors *cl;		/* where the listeners are */
	int		 cur;		/* the one tried, then the one that
					   took the recording: every resume
					   goes to it */
	char		 where[4200];	/* net_where()'s text */
	SSL_CTX		*ctx;		/* NULL: --insecure */
	struct conn	*c;		/* NULL: down */
	char		 identity[TD_MAX_NAME_LEN + 1];
	uint32_t	 tsync_interval;
	uint16_t	 version;	/* the last WELCOME's, 0: none yet */
	/* the listener's probe port (WELCOME version 5), 0: none */
	uint16_t	 udp_port;
	uint64_t	 udp_id;
	uint8_t		 udp_key[32];
	struct tsyncudp	*udp;		/* made at the first round */
	/* the best known network part (net_tsync_estimate()) */
	bool		 est;
	int64_t		 est_theta;	/* listener - agent CLOCK_MONOTONIC */
	uint64_t	 est_bound;	/* ns, when it was measured */
	uint64_t	 est_at;	/* agent CLOCK_MONOTONIC, ns */
	uint32_t	 idle_timeout;
	bool		 fatal;
	bool		 done;		/* DONE came with a resume */
	struct td_done	 done_msg;

	struct stream	*s;		/* the recording's bytes */
	struct hstage	*hs;		/* sections until the first
					   connection, NULL: framed */
	char		 note[160];	/* what the header cache saved */
	uint64_t	 last_send_ms;

	/* reconnecting */
	struct reconnect *rc;
	bool		 retry_later;	/* ERROR RETRY: wait before trying */
	bool		 told_later;	/* the first connection: try again */
	bool		 refused;	/* ... or not this listener, ever */
	uint64_t	 up_since_ms;
	char		 nerr[512];	/* why no attempt could start */
	unsigned int	 reconnects;
};

/* net.c: "what: strerror(errno)" into err; -1. */
int	net_err(char *err, size_t errlen, const char *what);
/*
 * net.c: wait on c for a frame of type (ACKs on the way applied when n is
 * given, late time-sync replies skipped): 0, or -1 and err (*fatal: the
 * listener is given up).
 */
int	net_expect(struct net *n, struct conn *c, uint16_t type,
	    struct td_frame *f, bool *fatal, char *err, size_t errlen);
/* A WELCOME came: its probe port, id and key (net-tsync.c). */
void	net_tsync_welcome(struct net *n, const struct td_welcome *w);

#endif
