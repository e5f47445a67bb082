/*
 * finished.h: the recordings tdlisten finished lately, so that an agent
 * that missed its DONE and comes back to resume is told DONE again.
 *
 * finished.c owns the table, in memory and in DIR/.tdlisten-finished
 * (one line appended per recording, read back by finished_load() at
 * start), capped per identity and in all by tdlimits.h.  Loop thread
 * only.
 */
#ifndef TD_FINISHED_H
#define TD_FINISHED_H

#include <stdint.h>

#include "tdlimits.h"

/* One finished recording: enough to answer its lost DONE again. */
struct finished {
	char		 identity[TD_MAX_NAME_LEN + 1];
	uint64_t	 recording_id;
	uint64_t	 end_off;	/* the stream's length */
	uint64_t	 size;		/* of the file */
	char		 path[TD_MAX_NAME_LEN * 4 + 1];	/* under DIR */
};
void		 finished_load(const char *dir);
void		 finished_add(const struct finished *e);
const struct finished *finished_find(const char *identity,
		    uint64_t recording_id);
void		 finished_free(void);

#endif
