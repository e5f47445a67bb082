/*
 * recording-piece.h: the mechanism of a recording's pieces, for the
 * policy that decides on them (rotate.c: when to cut, the names, --keep,
 * recovery).  recording-piece.c seals a piece, cuts a recording to its
 * next piece and says what the piece being written holds; it decides
 * nothing.
 *
 * A cut: a checkpoint at the cut, the piece sealed (the listener's own
 * options: time sync with every sample so far, TRACEID, GUEST) and put
 * in place, the next piece's writer opened with the header sections and
 * the producer's options of the piece before (read back from it: a
 * recording recovered after a crash has nothing of them in memory),
 * copied a step of TD_ROTATE_COPY_CHUNK a turn of the loop
 * (recording_busy(): its producer waits), then its lock and its first
 * checkpoint.  Without a loop (recording_set_base()) the copy is done at
 * once.
 *
 * Loop thread only.  -1 with errno and err filled, nothing logged, except
 * the recording's own life ("next piece ..."), under its label.
 */
#ifndef TD_RECORDING_PIECE_H
#define TD_RECORDING_PIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct listener_config;
struct recording;
struct td_file;

/* What the piece being written holds (recording_piece()). */
struct recording_piece {
	bool		 whole;		/* a writer, every header section
					   whole, none open, no cut */
	uint64_t	 page_bytes;	/* bytes of the pages in it */
	uint64_t	 written;	/* bytes its file holds so far */
	uint64_t	 headers;	/* stored bytes of the header sections
					   copied into it (0: the first) */
	uint64_t	 secs;		/* seconds since it began */
};

/* A piece of r is in place as path, size bytes (the policy's part). */
typedef void	(*recording_piece_done_cb)(struct recording *r,
		    const char *path, uint64_t size);

/* The configuration r was opened under. */
const struct listener_config *recording_config(const struct recording *r);
/* What r's piece holds now (its span begins at the first ask). */
void		 recording_piece(struct recording *r,
		    struct recording_piece *pi);
/*
 * Write the options the listener writes itself (time sync, TRACEID,
 * GUEST) and finish r's file, putting it in place: the end of a piece and
 * of a recording.  -1 with errno.
 */
int		 recording_seal(struct recording *r);
/*
 * Cut r to its next piece at next (NEXT.part claimed by the caller as its
 * placeholder).  done(r, piece, size) when the piece is in place and the
 * next one begun, or the copy failed (then r cannot go on: its next
 * checkpoint says why).  0 (the copy may go on: recording_busy()); -1 with
 * errno and err: *sealed says whether the piece was already put in place
 * (r cannot go on: close it; done was called) or not (r is as it was; the
 * placeholder is the caller's to remove).
 */
int		 recording_cut(struct recording *r, const char *next,
		    recording_piece_done_cb done, bool *sealed, char *err,
		    size_t errlen);
/*
 * At start (recovery of a cut, where nobody waits): the next piece's
 * writer at path, with the header sections (*copied: their stored bytes)
 * and the producer's options of the piece at old, copied at once.
 * cmdlines: whether old's CMDLINES is the producer's (copied; else the
 * next piece waits for it); no_tsync, file_trace_id: whether DATE and
 * TRACEID are the producer's (copied).  NULL with errno and err.
 */
struct td_file	*recording_piece_copy_all(const struct listener_config *c,
		    const char *old, const char *path, bool cmdlines,
		    bool no_tsync, uint64_t file_trace_id, uint64_t *copied,
		    char *err, size_t errlen);

#endif
