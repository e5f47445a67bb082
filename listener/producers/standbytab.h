/*
 * standbytab.h: the table of standby agents (tdagent --standby) and what the
 * control socket asks of them (docs/tdproto.md "Standby").
 *
 * A session whose first frame is STANDBY becomes one entry here, small
 * (no recording, no buffer of its own: its connection's are the only
 * ones), until the session is freed.  START and STOP go out through the
 * send callback the session gave; each agent's ANSWER comes back through
 * standbytab_answer() and goes, as one line, to the reply callbacks of the
 * one who asked (a control client, control.c), which hears when its last
 * agent answered.  Nothing here calls session.c or control.c but through
 * those callbacks.  Loop thread only.
 */
#ifndef TD_STANDBYTAB_H
#define TD_STANDBYTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_answer;
struct td_arm;
struct td_armed;
struct td_triggered;
struct td_buf;
struct td_standby;
struct td_start;

struct standbytab_entry;

/* Where the answers to a request go (owned by the asker). */
struct standbytab_reply {
	void	(*line)(void *arg, const char *text);	/* one line */
	void	(*settle)(void *arg);	/* one agent is done */
	void	*arg;
};

/*
 * A standby agent st (identity, from peer) from now on; send(arg, p, n)
 * queues a whole frame to it: 0, or -1.
 */
struct standbytab_entry *standbytab_add(const char *identity,
		    const char *peer, const struct td_standby *st,
		    int (*send)(void *arg, const void *p, size_t n), void *arg);
/* Standby agents of identity now. */
int		 standbytab_count(const char *identity);
/* Its session is going: the entry goes, its control client is told. */
void		 standbytab_remove(struct standbytab_entry *sb);
/* The agent's ANSWER: logged, and to the control client waiting. */
void		 standbytab_answer(struct standbytab_entry *sb,
		    const struct td_answer *a);

/*
 * A file of identity's recording name was put in place (complete, or kept
 * incomplete): the FINISHED of the standby agent recording it names it
 * (of several of that identity recording that name, one of them: each
 * FINISHED names one file, each file once).
 */
void		 standbytab_file(const char *identity, const char *name,
		    const char *path, bool complete);
/* One line per standby agent into out (the control socket's "list"). */
void		 standbytab_list(struct td_buf *out);
/* One standby agent as the status page shows it (valid during the call). */
struct standbytab_info {
	const char	*identity;
	const char	*host;		/* as it says, sanitized */
	const char	*peer;
	const char	*state;		/* "standby", "recording", "refused" */
	const char	*recording;	/* "" when idle */
	uint32_t	 ncpus;
	uint32_t	 seconds;	/* its last START's duration, 0: the
					   agent's --max-duration */
	const char	*armed;		/* its flight group, "" */
	long long	 armed_since;	/* time(), when armed */
};
/* fn(info, arg) for each standby agent; fn adds or removes none. */
void		 standbytab_each(void (*fn)(const struct standbytab_info *,
		    void *), void *arg);
/*
 * START req to every idle agent whose identity or host name matches
 * pattern (fnmatch), all in this one call; busy ones get a line.  Returns
 * the agents that will answer cl.
 */
int		 standbytab_start(const char *pattern, struct td_start *req,
		    struct standbytab_reply *r);
/* STOP to the recording agents matching pattern and name ("": any). */
int		 standbytab_stop(const char *pattern, const char *name,
		    struct standbytab_reply *r);
/*
 * The flight recorder (docs/flight-recorder.md; groups: flight.c).  ARM a
 * to the agents matching pattern that can be armed (version 3), the group
 * a->name set to fan out to self only or all, with holdoff s between
 * triggers; DISARM to the armed ones; SNAPSHOT to the armed ones, each
 * answering as a START's recording does (STARTED, READY, FINISHED and its
 * file).  Each returns the agents that will answer cl.
 */
int		 standbytab_arm(const char *pattern, struct td_arm *a,
		    bool self, uint32_t holdoff, struct standbytab_reply *cl);
int		 standbytab_disarm(const char *pattern,
		    struct standbytab_reply *cl);
int		 standbytab_snapshot(const char *pattern, const char *name,
		    struct standbytab_reply *cl);
/* The agent's ARMED and TRIGGERED (a trigger's snapshot, or held off). */
void		 standbytab_armed(struct standbytab_entry *sb,
		    const struct td_armed *a);
void		 standbytab_triggered(struct standbytab_entry *sb,
		    const struct td_triggered *t);
/* r goes or gave up: no agent answers it any more ("timeout" lines). */
void		 standbytab_forget(struct standbytab_reply *r, bool say);

#endif
