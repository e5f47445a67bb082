/*
 * recording-local.h: struct recording, for recording.c, recording-info.c
 * and rotate.c only (everyone else sees recording.h's opaque type).
 */
#ifndef TD_RECORDING_LOCAL_H
#define TD_RECORDING_LOCAL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "recparams.h"
#include "recording.h"
#include "tdlimits.h"

struct listener_config;
struct rotate;

/* One recording. */
struct recording {
	const struct listener_config *cfg;
	struct recording_params	 p;
	char			 label[TD_MAX_NAME_LEN * 2 + 160];
	struct td_file		*file;		/* NULL: rewound (or closed) */
	char			*path;
	char			*state_path;	/* PATH.state */
	struct recording_cpu	*cpu;		/* p.ncpus */
	struct timesync		*ts;
	struct guests		*guests;	/* host and guest pairings */
	struct budget_account	*acct;		/* memory and descriptors */
	struct registry_entry	*reg;		/* NULL once finished */
	struct rotate		*rot;		/* --rotate: its pieces */
	struct td_codec		*wire;		/* chunks' decompression */
	int			 lockfd;	/* PATH.part's lock: ours
						   (reclock.h), -1 none */
	uint8_t			*zbuf;		/* TD_CHUNK_PAGES pages */
	uint64_t		 trace_id;
	uint64_t		 position;	/* the producer's */
	uint64_t		 acked;		/* ... at the last checkpoint */
	uint64_t		 bytes;
	uint64_t		 pages;
	uint64_t		 lost;		/* overrun + dropped (CPUSTAT) */
	uint64_t		 lost_pages;	/* the producer's, on the way */
	struct timespec		 start;
	size_t			 ck_len;	/* bytes of the last state */
	bool			 rewound;	/* take the writer back from the
						   checkpoint */
	char			 paused_why[128]; /* why it paused last, until
						   a checkpoint goes through */
	int			 paused_errno;	/* and its errno */
	bool			 finished;
	bool			 no_tsync;	/* the producer has none */
	const char		*producer;	/* a static string */
	void			(*taken)(void *);
	void			*owner;		/* NULL: waits for a resume */
	enum recording_fault	 fault;
	char			 why[600];
};

/* Seconds since the recording began. */
double		 recording_elapsed(const struct recording *r);
/* Write r's checkpoint: 0, or -1 with errno (EBUSY: later). */
int		 recording_write_state(struct recording *r);
/* r's file is in place as path (complete: finished): say so. */
void		 recording_done(const struct recording *r, const char *path,
		    bool complete);
/* Events and marked pages of every CPU. */
uint64_t	 recording_events(const struct recording *r, uint64_t *marked);

#endif
