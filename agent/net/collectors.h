/*
 * collectors.h: the listeners an agent may stream a recording to
 * (tdagent -h A,B,C), in the order it tries them.
 *
 * Each item of the comma-separated list is a conn.h target with an
 * optional port of its own:
 *
 *	HOST, HOST:PORT		TCP (a name or an IPv4 address)
 *	[V6], [V6]:PORT		TCP to an IPv6 literal (a bare V6 takes -p)
 *	vsock:CID, vsock:CID:PORT
 *	serial:PATH		a character device (no port; PATH without
 *				a comma)
 *
 * An item without a port takes -p's.  At most TD_MAX_COLLECTORS items; an
 * empty item is an error.  The first connection tries them in order
 * (uplink.c); the one that takes the recording keeps it: every resume
 * goes back to it (net.c).  A list is read-only once parsed, so the
 * reconnection thread may read it.  No logging: errors go into err.
 */
#ifndef TD_COLLECTORS_H
#define TD_COLLECTORS_H

#include <stdbool.h>
#include <stddef.h>

struct collectors;
struct conn_target;

/*
 * Parse list with the default port, the server name (NULL: each TCP
 * host's own) and whether TLS is on; NULL with err when an item is
 * empty or malformed, or there are too many.
 */
struct collectors *collectors_parse(const char *list, const char *port,
		    const char *server_name, bool tls, char *err,
		    size_t errlen);
/* Open what must be opened as root (serial devices: conn_target_open()). */
int		 collectors_open(struct collectors *cl, char *err,
		    size_t errlen);
/* Close the devices and free; NULL is fine. */
void		 collectors_free(struct collectors *cl);
/* How many there are (1 to TD_MAX_COLLECTORS). */
int		 collectors_count(const struct collectors *cl);
/* The i-th, 0 first. */
const struct conn_target *collectors_target(const struct collectors *cl,
		    int i);
/* Where the i-th leads, for messages (conn_target_describe()). */
const char	*collectors_where(const struct collectors *cl, int i);
/* Whether any takes a port (is not a serial device). */
bool		 collectors_ported(const struct collectors *cl);

#endif
