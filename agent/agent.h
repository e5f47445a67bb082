/*
 * agent.h: what tdagent's command line asks for, shared by its modules.
 */
#ifndef TD_AGENT_H
#define TD_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "compress.h"
#include "guest.h"
#include "tdlimits.h"

/* One -e argument, with the -f filter that follows it. */
struct agent_event {
	const char	*spec;		/* "SYSTEM", "SYSTEM:EVENT", "EVENT" or
					   "all"; names may be globs */
	const char	*filter;	/* -f after it, or NULL */
	bool		 exclude;	/* after -v -e: left out (trace-cmd) */
};

/* Everything the command line says. */
struct agent_opts {
	const char		*output;	/* -o FILE, or NULL */
	const char		*host;		/* -h HOST, or NULL */
	const char		*port;		/* -p PORT */
	const char		*cert;
	const char		*key;
	const char		*ca;
	const char		*server_name;	/* --server-name, or NULL */
	const char		*name;		/* --name, a file suffix */
	bool			 insecure;
	const char		*spool_dir;	/* --spool DIR */
	bool			 spool_given;	/* not the default */
	uint64_t		 spool_max;	/* --spool-max, 0: memory only */
	int			 reconnect_wait;	/* s to deliver at the end */
	int			 wire;		/* --wire-compression, TD_WIRE_* */
	int			 file_version;	/* 6 or 7 */
	enum td_codec_id	 codec;
	int			 buffer_kb;	/* -b, 0 = kernel default */
	const char		*clock;		/* -C, NULL = keep */
	double			 seconds;	/* -s, 0 = until stopped */
	char			**argv;		/* -- COMMAND ARGS, or NULL */
	bool			 follow;	/* -F: only COMMAND's tasks */
	struct agent_event	 events[TD_MAX_EVENT_ARGS];
	int			 nevents;
	int			 verbosity;	/* -1 quiet, 0, 1 verbose */
	const char		*user;		/* -u USER, the recorder's */
	bool			 privsep;	/* user is not root: fork R */
	uid_t			 uid;		/* of user */
	gid_t			 gid;
	struct guest_spec	 guests[TD_MAX_GUESTS];	/* --guest */
	int			 nguests;
	/* --import-plan9 FILE|- (plan9.c): no recording, an import */
	const char		*import_plan9;
	const char		*symbols;	/* --symbols, nm -n output */
	uint64_t		 cycles_per_sec;	/* 0: not given */
	uint64_t		 ktzero;	/* --ktzero, 0: not given */
	int			 ready_fd;	/* --ready-fd, -1: none */
	const char		*flight;	/* --flight INSTANCE, or NULL */
	/* --flight-sync FD: the armed window's samples (tsyncsched.c) */
	struct agent_armed_sample *armed_samples;
	uint32_t		 narmed_samples;
};

/*
 * A time-sync sample an armed standby agent took over its ring's window
 * (agent/standby/armsync.h): the trace clock's ts was the listener's
 * CLOCK_MONOTONIC ref (ns).
 */
struct agent_armed_sample {
	uint64_t	 ts;
	uint64_t	 ref;
	uint64_t	 bound;		/* ns */
	uint64_t	 rtt;		/* ns */
	uint32_t	 probes;
};

/* tdagent check-events [-N] [-t DIR] */
int	checkevents_main(int argc, char **argv);

#endif
