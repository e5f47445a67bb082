/*
 * record.h: one recording: start the instance, move every page of every CPU
 * into the output, stop on command exit, timeout or signal, finish the file.
 *
 * The caller creates and configures the instance and removes it afterwards;
 * record_run() owns everything else, logs what a user must know and returns
 * tdagent's exit status (the command's status when there is a command).
 * SIGINT, SIGTERM, SIGHUP and SIGCHLD must be blocked by the caller before
 * the instance is created, so that no signal can leave it behind.
 */
#ifndef TD_RECORD_H
#define TD_RECORD_H

struct instance;
struct agent_opts;

int	record_run(struct instance *in, const struct agent_opts *o);
/*
 * tsyncsched.c: --flight-sync FD, the time-sync samples an armed standby
 * agent took over its ring's window (agent/standby/armsync.h), read into
 * o and fd closed; a recording sends them before its first round's.  A
 * line it cannot read ends them: the snapshot goes on with those before.
 */
void	tsyncsched_armed_read(struct agent_opts *o, int fd);

#endif
