/*
 * standby.h: the table of standby agents (tdagent --standby) and what the
 * control socket asks of them (docs/tdproto.md "Standby").
 *
 * A session whose first frame is STANDBY becomes one entry here, small
 * (no recording, no buffer of its own: its connection's are the only
 * ones), until the session is freed.  START and STOP go out through the
 * session's output; each agent's ANSWER comes back through
 * standby_answer() and is written, as one line, to the control client
 * that asked (struct control_client, control.h), which is told when its
 * last agent answered.  Loop thread only.
 */
#ifndef TD_STANDBY_H
#define TD_STANDBY_H

#include <stdbool.h>
#include <stdint.h>

struct control_client;
struct session;
struct td_answer;
struct td_buf;
struct td_standby;
struct td_start;

struct standby;

/* Session s (identity, from peer) is standby agent st from now on. */
struct standby	*standby_add(struct session *s, const char *identity,
		    const char *peer, const struct td_standby *st);
/* Its session is going: the entry goes, its control client is told. */
void		 standby_remove(struct standby *sb);
/* The agent's ANSWER: logged, and to the control client waiting. */
void		 standby_answer(struct standby *sb, const struct td_answer *a);

/* One line per standby agent into out (the control socket's "list"). */
void		 standby_list(struct td_buf *out);
/*
 * START req to every idle agent whose identity or host name matches
 * pattern (fnmatch), all in this one call; busy ones get a line.  Returns
 * the agents that will answer cl.
 */
int		 standby_start(const char *pattern, struct td_start *req,
		    struct control_client *cl);
/* STOP to the recording agents matching pattern and name ("": any). */
int		 standby_stop(const char *pattern, const char *name,
		    struct control_client *cl);
/* cl goes or gave up: no agent answers it any more ("timeout" lines). */
void		 standby_forget(struct control_client *cl, bool say);

#endif
