/*
 * armed.h: a standby agent's flight recorder (docs/flight-recorder.md):
 * the ftrace instance an ARM makes, recording into its ring in overwrite
 * mode with nothing read or sent, frozen for a snapshot (or by its own
 * kernel trigger, `traceoff if FILTER'), then cleared and re-armed.
 *
 * The instance is tracedock-<pid>-flight, the standby agent's own; a
 * snapshot's recording (tdagent --flight INSTANCE) borrows it and reads
 * its rings to the end.  Failures return -1 (or NULL) with a message in
 * the caller's err, the kernel's own words for a filter or a trigger it
 * refused; nothing here logs.  The standby agent's thread only.
 */
#ifndef TD_ARMED_H
#define TD_ARMED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct standby_opts;
struct td_arm;
struct instance;

struct armed;

/*
 * Without a sentinel (armed_sentinel_why()), how often tracing_on is read
 * for a trigger: the trigger froze the ring at once, this is only how late
 * the collector hears.  With one, the looks after a sentinel event that
 * found the ring still running (its trigger a moment behind), this apart.
 */
#define ARMED_POLL_MS		250
#define ARMED_RECHECK_MS	10

/*
 * Arm as a asks, within o's limits (--allow-arm, --allow-events,
 * --max-buffer; used_kb: the KB per CPU a recording holds now, counted
 * against TD_AGENT_RING_TOTAL_KB with the ring's): tracing on.
 */
struct armed	*armed_new(const struct standby_opts *o, const struct td_arm *a,
		    uint32_t ncpus, uint32_t used_kb, char *err,
		    size_t errlen);
/* Trigger removed, instance removed, memory freed (NULL: nothing). */
void		 armed_free(struct armed *ar);
/* The instance's name in tracefs (for tdagent --flight). */
const char	*armed_instance(const struct armed *ar);
/* The ARM's name (the snapshots' recording names start with it). */
const char	*armed_name(const struct armed *ar);
/* Its ring in KB per CPU. */
uint32_t	 armed_kb(const struct armed *ar);
/* Whether it has a trigger (its tracing_on is then looked at). */
bool		 armed_has_trigger(const struct armed *ar);
/*
 * The trigger's sentinel to wait on (POLLIN: its event happened, call
 * armed_fired()), or -1: none, or the ring is frozen.
 */
int		 armed_sentinel_fd(const struct armed *ar);
/* Why it has a trigger and no sentinel ("": it has one, or no trigger). */
const char	*armed_sentinel_why(const struct armed *ar);
/*
 * In how many ms armed_fired() wants a look without a wake-up of the
 * sentinel's (ARMED_POLL_MS with none, ARMED_RECHECK_MS just after one of
 * its events), or -1: no need.
 */
int		 armed_look_ms(const struct armed *ar);
/* Whether it is frozen (by armed_freeze() or its trigger). */
bool		 armed_frozen(const struct armed *ar);
/* Stop its tracing (the ring keeps what it holds): 0, or -1. */
int		 armed_freeze(struct armed *ar);
/*
 * Whether its trigger froze it since the last look (empties the sentinel,
 * reads tracing_on; a freeze of our own is not one).
 */
bool		 armed_fired(struct armed *ar);
/*
 * The instant of the event that fired the trigger, in ns of the ring's
 * trace clock (armed_clock()), once armed_fired() said so: exact (*exact)
 * when found in the frozen ring itself, else the sentinel's copy of it (a
 * few hundred ns later); 0: unknown (no sentinel).
 */
uint64_t	 armed_fired_ns(const struct armed *ar, bool *exact);
/* The ring's trace clock ("local"). */
const char	*armed_clock(struct armed *ar);
/*
 * How far back the ring reaches now, in ms (per_cpu/cpuN/stats: "now ts"
 * less "oldest event ts", the shortest of the CPUs that hold events): the
 * window a snapshot would bring.  -1 when no CPU holds one yet.
 */
long long	 armed_window_ms(struct armed *ar, int ncpus);
/* Empty the ring and trace again: 0, or -1. */
int		 armed_rearm(struct armed *ar);
/* Its instance (for armsync.c's sync instance, of the same clock). */
struct instance	*armed_ring(const struct armed *ar);

#endif
