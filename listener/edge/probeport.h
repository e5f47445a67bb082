/*
 * probeport.h: the listener's time-sync datagrams (docs/timesync.md, "The
 * probe port").
 *
 * Beside each TCP listening socket a UDP socket on the same address (the
 * same port number when free, else any), whose probes a thread of its own
 * answers with the kernel's receive stamp (t2) and the time just before
 * the reply is sent (t3), so that neither the event loop's delay nor the
 * sessions' bulk data enters a sample.  Each TCP session gets an entry: a
 * random id and key, given to the agent in WELCOME over TLS; a probe is
 * answered only when its id names an entry, it comes from the session's IP
 * address, its MAC is right under the entry's key, and the entry's rate
 * limit allows; anything else is dropped and touches no other entry.  The
 * functions are for the event loop's thread; probeport_start() logs.
 */
#ifndef TD_PROBEPORT_H
#define TD_PROBEPORT_H

#include <stdint.h>

struct event_base;
struct evconnlistener;
struct probeport_entry;

/* Open a UDP socket beside each of the n listeners; 0, or -1 if none. */
int	probeport_start(struct event_base *base,
	    struct evconnlistener **levs, int n);
/* An entry for the session on TCP socket fd, NULL if it cannot have one
   (not TCP, no UDP socket on its address). */
struct probeport_entry *probeport_register(int fd);
/* What WELCOME tells the agent: port, id, key (TD_TSUDP_KEY_LEN bytes). */
void	probeport_offer(const struct probeport_entry *e, uint16_t *port,
	    uint64_t *id, uint8_t *key);
/* Probes answered and dropped (bad MAC, address, rate) for e. */
void	probeport_counts(const struct probeport_entry *e,
	    uint64_t *answered, uint64_t *dropped);
void	probeport_unregister(struct probeport_entry *e);
void	probeport_shutdown(void);

#endif
