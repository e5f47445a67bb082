/*
 * standby.h: tdagent --standby, the agent that waits for a collector to
 * ask for recordings (docs/tdagent.8 "STANDBY"; docs/tdproto.md "Standby").
 *
 * One process, one thread: it keeps one authenticated connection to the
 * collector (STANDBY, then KEEPALIVEs), dials it again with backoff when
 * it breaks, and for each START the collector sends that the machine's own
 * limits allow (standbycfg.c) it runs an ordinary recording: tdagent
 * itself, executed as a child with the request's options, over its own
 * connection.  STOP ends that child as SIGINT does.  The collector can
 * choose only events, a filter, a buffer size, a clock, a duration and a
 * name, each checked here; never a command.
 */
#ifndef TD_STANDBY_H
#define TD_STANDBY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdproto.h"

/* What --standby was told, by its flags and then its configuration file. */
struct standby_opts {
	const char	*host;		/* -h: one collector */
	const char	*port;		/* -p */
	const char	*cert, *key, *ca, *server_name;
	bool		 insecure;
	const char	*user;		/* -u, the recordings' */
	const char	*allow_events;	/* --allow-events, a,b,c globs */
	uint32_t	 max_buffer;	/* --max-buffer KB */
	uint32_t	 max_duration;	/* --max-duration s */
	bool		 allow_arm;	/* --allow-arm: ARM taken */
	const char	*config;	/* -c FILE */
	int		 verbosity;
	char		*held[32];	/* strings the file gave (freed) */
	int		 nheld;
};

/* Defaults when neither the flags nor the file say. */
#define STANDBY_ALLOW_EVENTS	"sched,irq"
#define STANDBY_MAX_BUFFER	8192		/* KB per CPU */
#define STANDBY_MAX_DURATION	3600		/* s */
#define STANDBY_CONFIG		"/etc/tracedock/agent.conf"

/* tdagent --standby ...: never returns but by exit status. */
int	standby_main(int argc, char **argv);

/*
 * Parse the flags, then read the configuration file for what they did not
 * say (standbycfg.c): 0, or -1 and err.
 */
int	standby_parse(int argc, char **argv, struct standby_opts *o,
	    char *err, size_t errlen);
/*
 * Whether request r fits o's limits, given clocks (the machine's trace
 * clocks, space-separated): true, or false and why in err.
 */
bool	standby_allowed(const struct standby_opts *o, const struct td_start *r,
	    const char *clocks, char *err, size_t errlen);

#endif
