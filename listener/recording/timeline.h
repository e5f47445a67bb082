/*
 * timeline.h: at the end of a recording, the options that put its file on
 * the listener's timeline: TIME_SHIFT (against the listener's
 * CLOCK_MONOTONIC, naming the paired host file when the recording is a
 * guest's, on KVM's exact clock where the host gave one), DATE and our
 * own with each sample's error bound (timesync.c, guests.c), and the log
 * line that says what was written.  Loop thread only.
 */
#ifndef TD_TIMELINE_H
#define TD_TIMELINE_H

#include <stdint.h>

struct guests;
struct recording_params;
struct td_file;
struct timesync;

/*
 * Write the time-sync options of a recording (p, its own trace_id, its
 * samples ts, its pairings g) into f, and log them under label: 0 (also
 * when there was no sample: the file keeps the agent's clock, logged), or
 * -1 when the writer refused (errno set).
 */
int	timeline_write(struct timesync *ts, struct guests *g,
	    struct td_file *f, const struct recording_params *p,
	    uint64_t trace_id, const char *label);

#endif
