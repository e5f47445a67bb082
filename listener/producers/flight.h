/*
 * flight.h: the flight recorder's groups (docs/flight-recorder.md).  An
 * ARM names a group (its name): the standby agents armed with it, how a
 * trigger on one of them fans out (the group, or the agent alone) and the
 * hold-off between two acted-on triggers.  This module keeps the groups'
 * settings and their triggers' record (for /status and the snapshots'
 * names); standbytab.c sends the frames.  Nothing here calls another module.
 * Loop thread only.
 */
#ifndef TD_FLIGHT_H
#define TD_FLIGHT_H

#include <stdbool.h>
#include <stdint.h>

/* A group's default hold-off, s: a burst of triggers is one incident. */
#define FLIGHT_HOLDOFF_DEFAULT	30

/* What a group is and what its triggers did. */
struct flight_info {
	const char	*name;
	bool		 self;		/* --fanout self */
	uint32_t	 holdoff;	/* s */
	uint64_t	 acted;		/* triggers that made a snapshot */
	uint64_t	 held;		/* ... within the hold-off: counted */
	const char	*fired_by;	/* the last acted-on one's agent, "" */
	uint64_t	 fired_ns;	/* ... when (CLOCK_REALTIME ns) */
	uint64_t	 fired_clock_ns; /* ... its TRIGGERED's clock: the
					   trigger's event in its ring's
					   trace clock (older agents: their
					   CLOCK_MONOTONIC then) */
	const char	*snapshot;	/* ... the recordings' name */
};

/* Create or change group name (an ARM asked for it). */
void	flight_group_set(const char *name, bool self, uint32_t holdoff);
/*
 * A trigger of group name fired on identity at real_ns (the listener's
 * CLOCK_REALTIME when it heard), now_s on the listener's monotonic clock:
 * true when it is acted on (its snapshot's name in snap[snaplen], self
 * set for --fanout self), false when within the hold-off (counted).  An
 * unknown group is made with the defaults.
 */
bool	flight_trigger(const char *name, const char *identity,
	    uint64_t real_ns, uint64_t now_s, char *snap, size_t snaplen,
	    bool *self);
/*
 * The agent's own instant of the trigger flight_trigger() acted on last in
 * group name (TRIGGERED's clock_ns).
 */
void	flight_trigger_clock(const char *name, uint64_t clock_ns);
/* fn(info, arg) for each group. */
void	flight_each(void (*fn)(const struct flight_info *, void *),
	    void *arg);
/* Every group goes (at exit). */
void	flight_free(void);

#endif
