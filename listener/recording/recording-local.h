/*
 * recording-local.h: struct recording, for recording.c, recording-info.c
 * and recording-piece.c only (everyone else sees recording.h's opaque
 * type).
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
struct piece_state;

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
	struct piece_state	*piece;		/* --rotate: its pieces */
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
	void			(*ready)(void *);	/* a cut is over */
	void			*owner;		/* NULL: waits for a resume */
	enum recording_fault	 fault;
	char			 why[600];
};

/* Seconds since the recording began. */
double		 recording_elapsed(const struct recording *r);
/* Write r's checkpoint: 0, or -1 with errno (EBUSY: later). */
int		 recording_write_state(struct recording *r);
/*
 * recording-piece.c: the copy of the header sections (and the producer's
 * options) of the piece finished at old into the next piece's writer at
 * path, in steps of at most TD_ROTATE_COPY_CHUNK bytes: a cut's (see
 * recording_piece_copy_all() in recording-piece.h for the arguments).
 * Opened: NULL with errno and err.  A step: 1 (more to do), 0 (done: the
 * writer has it all), -1 with errno (recording_piece_copy_why() says it).
 * Free: the writer too when abort, else it is the caller's
 * (recording_piece_copy_file()).
 */
struct piece_copy;
struct piece_copy *recording_piece_copy_open(const struct listener_config *c,
		    const char *old, const char *path, bool cmdlines,
		    bool no_tsync, uint64_t file_trace_id, char *err,
		    size_t errlen);
int		 recording_piece_copy_step(struct piece_copy *job);
void		 recording_piece_copy_why(const struct piece_copy *job,
		    char *err, size_t errlen);
struct td_file	*recording_piece_copy_file(const struct piece_copy *job);
uint64_t	 recording_piece_copy_bytes(const struct piece_copy *job);
/* What job holds (0 for NULL). */
uint64_t	 recording_piece_copy_mem(const struct piece_copy *job);
void		 recording_piece_copy_free(struct piece_copy *job, bool abort);
/* The memory r's pieces hold (the cut's copy, the command lines). */
uint64_t	 recording_piece_mem(const struct recording *r);
/* At r's end: what its pieces hold (a cut stopped first). */
void		 recording_piece_free(struct recording *r);
/* Why r's cut failed once its piece was in place (r cannot go on), or NULL. */
const char	*recording_cut_broken(const struct recording *r);
/* Copy the rest of r's cut at once (a rewind or an END cannot wait). */
void		 recording_cut_settle(struct recording *r);
/*
 * r ends in a cut: the next piece's files go.  leave (tdlisten stops):
 * r's path and state are the piece's again, whose cut the next tdlisten
 * begins again (rotate_recover()); else the piece is done, r is broken.
 */
void		 recording_cut_stop(struct recording *r, bool leave);
/* Events and marked pages of every CPU. */
uint64_t	 recording_events(const struct recording *r, uint64_t *marked);

/* the --rotate policy given (recording_set_policy()), NULL: none */
extern const struct recording_policy *recording_policy;

#endif
