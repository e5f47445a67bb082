/*
 * plan9.h: tdagent --import-plan9: a trace of Plan 9's kernel trace
 * device (#T, /dev/trace) made into a recording, written to a trace.dat
 * file (-o) or streamed to tdlisten (-h), through the same sink as a
 * recording of this machine's kernel (meta.h).  It needs no root, no
 * tracefs and no ftrace instance: the header sections are made up here,
 * the pages built by shared/pagebuild.c.
 *
 * The caller has parsed the command line and blocked SIGINT, SIGTERM and
 * SIGHUP (they stop the import, which then finishes what it has read).
 * plan9_import() logs what the user must know and returns tdagent's exit
 * status: 0, 1 when the output cannot be made or the listener is lost
 * without a local file, 128 + N after signal N other than SIGINT or
 * SIGTERM.
 */
#ifndef TD_PLAN9_H
#define TD_PLAN9_H

struct agent_opts;

int	plan9_import(const struct agent_opts *o);

#endif
