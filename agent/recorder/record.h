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

#endif
