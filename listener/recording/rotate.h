/*
 * rotate.h: tdlisten --rotate SIZE|DURATION and --keep N|SIZE: a long
 * recording written as a series of complete trace.dat files,
 * DIR/<identity>/<host>-<time>[-name]-0001.dat, -0002.dat ...
 *
 * A recording rotates when its file's name ends in -NNNN.dat (output.c
 * names the first piece so under --rotate; a recovered recording goes on
 * as its name says).  A cut happens only at a checkpoint, where the
 * producer's position is at a frame's end, every section is whole and no
 * section is open: the piece is finished (its time-sync options carry
 * the recording's samples so far), put in place, and the next piece
 * opened with the same header sections and the producer's options, read
 * back from the piece just finished; its first checkpoint is the cut's.
 * Every page is in exactly one piece.  --keep then removes the oldest
 * finished pieces of the recording beyond the limit, each logged; never
 * the piece being written, nor one whose --on-finish command has not
 * succeeded yet (PATH.onfinish beside it).
 *
 * The policy only: the cut itself (seal, copy, checkpoint) is the
 * recording's (recording-piece.h), which copies the sections a step of
 * TD_ROTATE_COPY_CHUNK a turn of the loop (recording_busy()).
 *
 * Called by recording.c only, on the loop's thread.  Lower layers' rule:
 * -1 with errno and err filled, nothing logged, except the pieces' own
 * life (wrote, removed), which is logged here under the recording's
 * label.
 */
#ifndef TD_ROTATE_H
#define TD_ROTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct listener_config;
struct recording;

/*
 * Parse --rotate's value: SIZE (bytes, K, M or G; at least
 * TD_ROTATE_MIN_SIZE) into *bytes, or DURATION (a number and s, m or h,
 * lower case: "10m" is ten minutes, "10M" ten MiB) into *secs.  -1 with
 * err.
 */
int	rotate_parse(const char *s, uint64_t *bytes, uint32_t *secs,
	    char *err, size_t errlen);
/* Parse --keep's value: N pieces, or SIZE (K, M or G) of them.  -1. */
int	rotate_parse_keep(const char *s, uint32_t *n, uint64_t *bytes,
	    char *err, size_t errlen);
/*
 * The piece number of a file named ...-NNNN.dat (four digits or more),
 * 0 for another name; *baselen: the length of the name before "-NNNN".
 */
uint32_t rotate_piece(const char *path, size_t *baselen);
/* The policy a recording asks (recording_set_policy()). */
extern const struct recording_policy rotate_policy;

#endif
