/*
 * standbycfg.h: what tdagent --standby may do, from its flags and its
 * configuration file (standbycfg.c): the options, and whether a
 * collector's request fits them.  The standby agent (standby.c) and its
 * armed ring (armed.c) both ask.
 */
#ifndef TD_STANDBYCFG_H
#define TD_STANDBYCFG_H

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
