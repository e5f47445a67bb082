/*
 * standby.h: tdagent --standby, the agent that waits for a collector to
 * ask for recordings (docs/tdagent.8 "STANDBY"; docs/tdproto.md "Standby").
 *
 * One process, one thread: it keeps one authenticated connection to the
 * collector (STANDBY, then KEEPALIVEs), dials it again with backoff when
 * it breaks, and for each START the collector sends that the machine's own
 * limits allow (standbycfg.c) it runs an ordinary recording: tdagent
 * itself, executed as a child with the request's options, over its own
 * connection.  STOP ends that child as SIGINT does.  The collector can
 * choose only events, a filter, a buffer size, a clock, a duration and a
 * name, each checked here; never a command.
 */
#ifndef TD_STANDBY_H
#define TD_STANDBY_H

#include "standbycfg.h"

/* tdagent --standby ...: never returns but by exit status. */
int	standby_main(int argc, char **argv);

#endif
