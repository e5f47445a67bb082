/*
 * admit.h: who may start a TLS handshake with tdlisten, and the log of
 * refusals.
 *
 * admit.c holds at most --max-handshakes slots, --max-handshakes-per-address
 * of them per address (an IPv6 /64; a Unix socket's peers told apart by
 * their credentials).  A slot is owned by the caller's pointer, the
 * tables are admit.c's, and the caller closes its own connections: an
 * EVICT names the victim for the caller to close.  Refusals of every
 * kind are counted since the start and logged at a bounded rate, the rest
 * told in one line an interval.  Loop thread only.
 */
#ifndef TD_ADMIT_H
#define TD_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct sockaddr;

enum admit_verdict {
	ADMIT_YES,
	ADMIT_EVICT,	/* after closing the victim */
	ADMIT_FULL,	/* no slot free, none to take */
	ADMIT_NO,	/* the address holds its share */
};
/* Why a connection was refused or closed, for the summary line. */
enum admit_kind {
	ADMIT_R_ADDRESS,	/* over --max-handshakes-per-address */
	ADMIT_R_FULL,		/* over --max-handshakes */
	ADMIT_R_EVICTED,	/* its slot went to a newcomer */
	ADMIT_R_SESSIONS,	/* over --max-sessions */
	ADMIT_R_IDENTITY,	/* its identity waits for HELLOs enough */
	ADMIT_R_FAILED,		/* timed out, TLS error, went away */
	ADMIT_R_NKINDS
};
/*
 * max slots, per_addr of them per address (an IPv6 /64); when full, a
 * handshake min_age_ms old gives its slot to a newcomer.
 */
void	admit_init(struct event_base *base, int max, int per_addr,
	    uint64_t min_age_ms);
/*
 * May a connection fd from sa have a slot (EVICT: once *victim is
 * closed)?  fd: for a Unix peer's credentials (-1: none).
 */
enum admit_verdict admit_check(int fd, const struct sockaddr *sa,
	    void **victim);
/* owner, from sa, takes a slot: only after YES, or EVICT and the close. */
void	admit_add(int fd, const struct sockaddr *sa, void *owner);
/* owner gives its slot back; false when it held none. */
bool	admit_release(void *owner);
/* Slots taken. */
int	admit_handshakes(void);
/* Log a refusal (kind), or count it for the interval's summary line. */
void	admit_refused(enum admit_kind kind, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Connections refused or closed for kind since the start. */
uint64_t admit_refused_total(enum admit_kind kind);
/* A short name for kind, a metric's label ("address", "failed" ...). */
const char *admit_kind_label(enum admit_kind kind);
/* Log what is counted, free the tables. */
void	admit_free(void);

#endif
