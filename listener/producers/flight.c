/*
 * flight.c: the flight recorder's groups (see flight.h).  A list: groups
 * are few (one per incident an operator armed for).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* One group. */
struct flight_group {
	char			 name[TD_MAX_NAME_LEN + 1];
	bool			 self;
	uint32_t		 holdoff;
	bool			 ever;		/* a trigger was acted on */
	uint64_t		 last_s;	/* ... at this monotonic s */
	uint64_t		 acted, held;
	char			 fired_by[TD_MAX_NAME_LEN + 1];
	uint64_t		 fired_ns;
	uint64_t		 fired_clock_ns;
	char			 snapshot[TD_MAX_NAME_LEN + 1];
	struct flight_group	*next;
};

static struct flight_group	*flight_groups;

/* Group name, made with the defaults when new. */
static struct flight_group *
flight_group(const char *name)
{
	struct flight_group *g;

	for (g = flight_groups; g != NULL; g = g->next)
		if (strcmp(g->name, name) == 0)
			return g;
	g = xcalloc(1, sizeof *g);
	snprintf(g->name, sizeof g->name, "%s", name);
	g->holdoff = FLIGHT_HOLDOFF_DEFAULT;
	g->next = flight_groups;
	flight_groups = g;
	return g;
}

void
flight_group_set(const char *name, bool self, uint32_t holdoff)
{
	struct flight_group *g = flight_group(name);

	g->self = self;
	g->holdoff = holdoff;
}

/* A name's character as a recording name may have it. */
static char
flight_namechar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_')
		return c;
	return '_';
}

bool
flight_trigger(const char *name, const char *identity, uint64_t real_ns,
    uint64_t now_s, char *snap, size_t snaplen, bool *self)
{
	struct flight_group *g = flight_group(name);
	char who[17];
	size_t i;

	*self = g->self;
	if (g->ever && now_s < g->last_s + g->holdoff) {
		g->held++;
		return false;
	}
	g->ever = true;
	g->last_s = now_s;
	g->acted++;
	snprintf(g->fired_by, sizeof g->fired_by, "%s", identity);
	g->fired_ns = real_ns;
	g->fired_clock_ns = 0;
	/*
	 * The snapshot's name says who fired and when (ms since the epoch),
	 * in every file of it: NAME.trig.WHO.MS, within the 64 bytes of a
	 * name (the group's name cut first, then the agent's).
	 */
	for (i = 0; i < sizeof who - 1 && identity[i] != '\0'; i++)
		who[i] = flight_namechar(identity[i]);
	who[i] = '\0';
	snprintf(g->snapshot, sizeof g->snapshot, "%.20s.trig.%s.%" PRIu64,
	    name, who, real_ns / 1000000);
	snprintf(snap, snaplen, "%s", g->snapshot);
	return true;
}

void
flight_trigger_clock(const char *name, uint64_t clock_ns)
{
	flight_group(name)->fired_clock_ns = clock_ns;
}

void
flight_each(void (*fn)(const struct flight_info *, void *), void *arg)
{
	struct flight_group *g;
	struct flight_info i;

	for (g = flight_groups; g != NULL; g = g->next) {
		i.name = g->name;
		i.self = g->self;
		i.holdoff = g->holdoff;
		i.acted = g->acted;
		i.held = g->held;
		i.fired_by = g->fired_by;
		i.fired_ns = g->fired_ns;
		i.fired_clock_ns = g->fired_clock_ns;
		i.snapshot = g->snapshot;
		fn(&i, arg);
	}
}

void
flight_free(void)
{
	struct flight_group *g;

	while ((g = flight_groups) != NULL) {
		flight_groups = g->next;
		free(g);
	}
}
