/*
 * checkpoint.h: a recording's state on disk (PATH.state), so that it
 * survives a crash or a restart of tdlisten and a producer can resume it.
 *
 * A struct checkpoint is what a recording is made of: its parameters, the
 * producer's position, its counters, per-CPU sequences, time-sync samples
 * and its writer.  checkpoint_write() writes one; checkpoint_read()
 * builds one back, with the writer restored to what the state describes.
 * Nothing here logs; errors come back with errno or a message.  Loop
 * thread only.
 */
#ifndef TD_CHECKPOINT_H
#define TD_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recparams.h"

struct guests;
struct td_codec;
struct td_file;
struct timesync;

/* A recording's state, as checkpoints keep it. */
struct checkpoint {
	struct recording_params	 params;	/* identity: not kept */
	uint64_t		 trace_id;
	uint64_t		 position;	/* the producer's, acknowledged */
	uint64_t		 bytes;
	uint64_t		 pages;
	uint64_t		 lost;
	uint64_t		 elapsed_ns;
	struct recording_cpu	*cpu;		/* params.ncpus of them */
	struct timesync		*ts;
	struct guests		*guests;	/* NULL: none (written empty,
						   skipped when read) */
	struct td_file		*file;
	int			 cmdlines;	/* read: 1 the producer's
						   CMDLINES section is in the
						   writer, 0 not, -1 unknown
						   (a state before version 6) */
	bool			 no_file;	/* read: leave the writer (a
						   piece put in place already,
						   rotate.c) */
};

/*
 * Write state_path for ck (and its writer's pages waiting in chunks go
 * out to the files first): 0 and *len the state's size, or -1 with errno
 * (EBUSY: a zlib section is open, try later).
 */
int	checkpoint_write(const char *state_path, const struct checkpoint *ck,
	    size_t *len);
/*
 * Read state_path into ck: params (but identity), counters, ck->cpu
 * (allocated), ck->ts and ck->guests (given, filled; guests may be NULL)
 * and ck->file (restored, using the
 * shared codec context when not NULL; not with ck->no_file: NULL).  -1 with err and errno (EBADMSG:
 * damaged; EMFILE, ENOMEM ...: a later try may work): nothing allocated
 * is left in ck but what ck->ts holds.
 */
int	checkpoint_read(const char *state_path, struct checkpoint *ck,
	    struct td_codec *shared, char *err, size_t errlen);
/* The recording is finished or given up: its state goes. */
void	checkpoint_remove(const char *state_path);

#endif
