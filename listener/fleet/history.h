/*
 * history.h: the recordings that ended lately (tally.c's ring of
 * TD_TALLY_ENDED) kept in DIR/.tdlisten-history, so the status page and
 * /status show them after a restart.  The file is rewritten whole (write,
 * rename) after each end: at most TD_TALLY_ENDED lines of a few hundred
 * bytes.  A file that cannot be read or written costs the history only,
 * never a recording (one log line).  Loop thread only.
 */
#ifndef TD_HISTORY_H
#define TD_HISTORY_H

/* Put DIR's history back into the tally; keep it from now on. */
void	history_start(const char *dir);
/* Forget the file's name (at exit). */
void	history_free(void);

#endif
