/*
 * net-local.h: struct net, for net.c and netsink.c only (everyone else
 * sees net.h's opaque type).
 */
#ifndef TD_NET_LOCAL_H
#define TD_NET_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "conn.h"
#include "net.h"
#include "tdproto.h"

struct hstage;
struct reconnect;
struct stream;

/* The session: the stream, the connection of the moment, reconnecting. */
struct net {
	struct net_params np;
	struct td_hello	 hello;
	struct conn_target target;	/* where the listener is */
	char		 where[4200];	/* net_where()'s text */
	SSL_CTX		*ctx;		/* NULL: --insecure */
	struct conn	*c;		/* NULL: down */
	char		 identity[TD_MAX_NAME_LEN + 1];
	uint32_t	 tsync_interval;
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
	uint64_t	 up_since_ms;
	char		 nerr[512];	/* why no attempt could start */
	unsigned int	 reconnects;
};

#endif
