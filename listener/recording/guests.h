/*
 * guests.h: host and guest recordings paired, for trace-cmd's view of a
 * virtual machine and its host together (docs/guests.md).
 *
 * Every recording has a struct guests, whatever it turns out to be.  As a
 * host it holds the guests its agent declared (tdagent --guest: OPTION
 * TD_OPT_TD_GUEST, each replacing the last one of its name: QEMU's pid,
 * vCPU -> host thread, KVM's TSC parameters) and the guest recordings it
 * was paired with; as a guest, the host recording it was paired with and,
 * where the host's KVM gives the exact clock, time-sync samples made from
 * the host's own.
 *
 * Pairing: a recording whose identity an open host recording declared as
 * a guest is paired with it while both are open here, whichever came
 * first, when the configuration allows that host identity to run that
 * guest identity (guests_allow(): tdlisten --guest HOST:GUEST); an
 * agent's declaration alone pairs nothing.  A guest recording has one
 * host (the first allowed that declares it), a host any number of guest
 * recordings (a guest rebooted makes one each time).  A pairing outlives the recordings: the one that finishes later
 * still writes what its file needs (the host's GUEST option names the
 * guest file's trace id, the guest's TIME_SHIFT the host file's); it is
 * kept in checkpoints and found again after tdlisten restarts.  Trace ids
 * are the files' TRACEID: the agents' (HELLO's trace_id); 0 (a recording
 * recovered from a checkpoint of before version 4) never pairs.
 *
 * A struct guests belongs to one recording, which frees it.  Between
 * guests_start() and guests_finish() (or guests_free()) it is in the
 * table of open recordings that pairing searches.  guests.c logs what it
 * pairs under the recording's label; it never calls a recording.  Loop
 * thread only.
 */
#ifndef TD_GUESTS_H
#define TD_GUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct guests;
struct td_buf;
struct td_cur;
struct td_file;
struct td_tsync_sample;
struct timesync;

/*
 * Allow host identity HOST to run guest identity GUEST (spec
 * "HOST:GUEST", tdlisten --guest; at start, before any recording): 0, or
 * -1 with errno EINVAL (malformed) or E2BIG (TD_MAX_GUEST_ALLOW already).
 */
int		 guests_allow(const char *spec);
/*
 * The pairing side of a recording of identity with trace id trace_id (its
 * TRACEID) in clock, logging under label.
 */
struct guests	*guests_new(const char *identity, uint64_t trace_id,
		    const char *clock, const char *label);
/* Who it is (a recording restored from a checkpoint learns it late). */
void		 guests_describe(struct guests *g, const char *identity,
		    uint64_t trace_id, const char *clock);
/* The recording's log label changed (a new connection resumed it). */
void		 guests_set_label(struct guests *g, const char *label);
/* Enter the table of open recordings, and pair what can be now. */
void		 guests_start(struct guests *g);
/*
 * An OPTION TD_OPT_TD_GUEST of the recording's agent (p, n: its content):
 * the guest it declares, paired with its open recordings; -1 when it is
 * malformed or one guest too many (errno EBADMSG, E2BIG).
 */
int		 guests_declare(struct guests *g, const void *p, size_t n);
/*
 * A time-sync sample the recording kept: for each of its paired guests
 * whose vCPUs have the KVM clock (x86-tsc on both sides), the guest's
 * sample at the same moment.
 */
void		 guests_host_sample(struct guests *g,
		    const struct td_tsync_sample *s);
/*
 * The host's part of its file: a GUEST option for every guest recording
 * it was paired with (that has vCPU threads); -1 when the writer refused.
 */
int		 guests_options(struct guests *g, struct td_file *f);
/* Whether g was paired with a host, and that host's trace id. */
bool		 guests_host(const struct guests *g, uint64_t *host_id);
/*
 * The guest's samples on the exact KVM clock, converted with its own
 * TSC2NSEC (mult, shift: from its agent) for its TIME_SHIFT, or NULL (and
 * why, for the log, when it was paired) when it has none to use; the
 * caller frees it.
 */
struct timesync	*guests_kvm(const struct guests *g, uint32_t mult,
		    uint32_t shift, const char **why);
/* The recording finished: out of the table, what it holds stays. */
void		 guests_finish(struct guests *g);
/* Out of the table (if in it) and freed. */
void		 guests_free(struct guests *g);
/* Bytes held, for the memory budget. */
uint64_t	 guests_mem(const struct guests *g);
/* Append the state to a checkpoint (host order); 0 or -1. */
int		 guests_save(const struct guests *g, struct td_buf *b);
/* Take it back from a checkpoint (not in the table); -1 when damaged. */
int		 guests_load(struct guests *g, struct td_cur *c);

#endif
