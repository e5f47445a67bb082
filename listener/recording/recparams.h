/*
 * recparams.h: what a recording is made of that producers declare and
 * checkpoints keep (plain data: recording.h's functions use them,
 * checkpoint.h stores them).
 */
#ifndef TD_RECPARAMS_H
#define TD_RECPARAMS_H

#include <stdint.h>

#include "tdlimits.h"

/* What a producer declares about the recording it opens. */
struct recording_params {
	char		 identity[TD_MAX_NAME_LEN + 1];	/* a path component */
	char		 name[TD_MAX_NAME_LEN + 1];	/* the agent's, or "" */
	char		 clock[TD_MAX_NAME_LEN + 1];	/* trace clock */
	uint64_t	 recording_id;	/* the producer's key for resuming */
	uint64_t	 file_trace_id;	/* the file's TRACEID (tdproto:
					   HELLO's trace_id); 0: unknown */
	uint32_t	 ncpus;
	uint32_t	 page_size;
	uint8_t		 long_size;	/* the traced machine's user long */
	uint8_t		 commit_size;	/* ring-buffer commit field */
	uint8_t		 big_endian;
	uint8_t		 pieces;	/* at open: the producer checkpoints
					   between frames, --rotate applies
					   (tdproto); not kept */
};

/* One CPU's pages: the next sequence number due, what they held. */
struct recording_cpu {
	uint64_t	 next_seq;
	uint64_t	 events;
	uint64_t	 missed_pages;	/* marked: the ring lost events */
	uint64_t	 piece_seq;	/* --rotate: the piece's first page */
};

#endif
