/*
 * budget.h: what the peers of tdlisten make it hold, counted so that no
 * one of them can take the listener down for the others.
 *
 * Memory: each session has an account of the bytes it holds (its writer's
 * buffers, decompressed pages, options, replies not sent, samples), set
 * after every frame; an account belongs to its identity's pool, and every
 * pool to the listener's total.  budget_set() says which of the three caps
 * (session, identity, all) the new figure passes, and still records it:
 * the caller pauses or closes that one session, which gives it all back.
 *
 * Descriptors: a recording reserves, at HELLO, the descriptors its writer
 * may keep open; a reservation is refused when, with the connections and
 * the listener's own reserve, it would pass the process's limit, or when
 * its identity's reservations would pass their share (recordings that wait
 * for a resume keep theirs: one identity must not hold them all).
 *
 * Pure bookkeeping: no I/O, nothing here logs; one event loop calls it.
 */
#ifndef TD_BUDGET_H
#define TD_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct budget_caps {
	uint64_t	 session;	/* bytes, per session */
	uint64_t	 identity;	/* bytes, all sessions of an identity */
	uint64_t	 total;		/* bytes, all sessions */
	int		 fds;		/* descriptors the process may open */
	int		 fd_reserve;	/* of those, kept for the listener */
	int		 identity_fds;	/* of those, one identity's share of
					   reservations (0: no share) */
};

enum budget_over {
	BUDGET_OK,
	BUDGET_SESSION,
	BUDGET_IDENTITY,
	BUDGET_TOTAL,
};

struct budget_account;

/* Set the caps (at start; accounts opened before keep what they hold). */
void		 budget_init(const struct budget_caps *caps);
/* An empty account for a session of identity. */
struct budget_account *budget_open(const char *identity);
/* Give back what an account holds and reserves; NULL is fine. */
void		 budget_close(struct budget_account *a);
/* Record that a holds held bytes now; which cap that passes, if any. */
enum budget_over budget_set(struct budget_account *a, uint64_t held);
/* Words for a cap, for a log line ("this session's 48 MiB"). */
const char	*budget_over_name(enum budget_over o);
/*
 * Reserve n descriptors for a's recording while conns connections are
 * open: BUDGET_OK, or (nothing reserved) BUDGET_IDENTITY when that would
 * pass its identity's share, BUDGET_TOTAL the process's limit.  A second
 * call replaces the first reservation.
 */
enum budget_over budget_fds(struct budget_account *a, int n, int conns);
/* Totals, for tests and the log. */
uint64_t	 budget_held(void);
uint64_t	 budget_identity_held(const char *identity);
int		 budget_fds_reserved(void);

#endif
