/*
 * crash.h: a backtrace on stderr when the program dies of a bug.
 */
#ifndef TD_CRASH_H
#define TD_CRASH_H

/* Install the handlers (once, early in main); prog prefixes the report. */
void	crash_install(const char *prog);

#endif
