/*
 * session.h: the tdproto conversation with one tdagent (docs/tdproto.md),
 * the producer of its recording.
 *
 * A session turns the agent's byte stream into recording calls (HELLO
 * opens or resumes a recording, sections, options, pages and samples go
 * into it, END finishes it) and the listener's replies (WELCOME, ACK,
 * TSYNC_REPLY, DONE) into an output buffer.  It knows no socket and no
 * event loop: its connection (agentconn.c) hands it the bytes that arrived,
 * sends what it wrote, and acts on its verdict.  Anything the agent sends
 * that does not fit closes this session only, with a logged reason.
 *
 * The session owns its recording while it streams; when the connection
 * goes, session_lost() lets the recording wait for a resume.  A later
 * session of the same identity may take the recording over: the session
 * that had it is then told through the gone callback of its session_new(),
 * and is over (its connection should be dropped and the session freed).
 * Loop thread only.
 */
#ifndef TD_SESSION_H
#define TD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct listener_config;
struct session;
struct td_buf;

/* Where the conversation stands. */
enum session_phase {
	SESSION_HELLO,		/* waiting for HELLO */
	SESSION_STREAM,		/* a recording is open */
	SESSION_DONE,		/* DONE is written: close once it is out */
	SESSION_OVER,		/* closed (see the verdict) or taken over */
	SESSION_STANDBY,	/* a standby agent's (standbytab.h) */
};

/* What the connection does after a call. */
enum session_verdict {
	SESSION_GO,		/* go on */
	SESSION_CLOSE,		/* send session_error(), then close */
	SESSION_QUIET,		/* close, with nothing to tell */
	SESSION_PAUSE,		/* send session_error() (come back later),
				   then session_lost(s, NULL) */
};

/*
 * A session of an agent with identity (its verified certificate's name,
 * or its address with --insecure) from peer.  gone(arg) is called when a
 * later session takes its recording over.
 */
struct session	*session_new(const struct listener_config *cfg,
		    const char *identity, const char *peer,
		    void (*gone)(void *), void *arg);
/* Free s; a recording it still owns waits for a resume (or closes). */
void		 session_free(struct session *s);
enum session_phase session_phase(const struct session *s);
/* The session's TCP socket, for its time-sync datagrams (probeport.h). */
void		 session_set_socket(struct session *s, int fd);
/*
 * kick(arg) sends what the session wrote when that was not an answer to
 * input (a standby agent's START or STOP, from standbytab.c).
 */
void		 session_set_kick(struct session *s, void (*kick)(void *),
		    void *arg);
/* What an agent over --max-sessions hears (ERROR RETRY). */
#define SESSION_FULL	"the listener holds all the sessions it takes " \
	"(--max-sessions): come back later"
/*
 * s took a slot kept for the resumes of its identity's waiting recordings
 * (over --max-sessions): anything but a resume is told to come back later.
 */
void		 session_set_resume_only(struct session *s);
const char	*session_identity(const struct session *s);
/* "session IDENTITY ['NAME'] (PEER)": what its log lines start with. */
const char	*session_label(const struct session *s);
/*
 * The bytes session_input() needs at once to go on; *more: it also takes
 * any bytes beyond them (a section's data, a piece at a time).
 */
size_t		 session_want(const struct session *s, bool *more);
/*
 * What the whole frame p[0..n) will make the listener hold once taken
 * beyond its own bytes (PAGES_Z: the pages it expands to), 0 for others.
 */
size_t		 session_expands(const struct session *s, const uint8_t *p,
		    size_t n);
/*
 * Take p[0..n) (n >= session_want()); rx_ns: the reference time this read
 * began (time-sync replies carry it), conns: connections open now.
 * Returns the bytes used (0: session_want() grew) and adds to *cost what
 * they made the listener do (pages decompressed count whole), or -1 with
 * a verdict in *v.
 */
ssize_t		 session_input(struct session *s, const uint8_t *p, size_t n,
		    uint64_t rx_ns, int conns, size_t *cost,
		    enum session_verdict *v);
/*
 * The replies written so far (the caller sends and resets them); *urgent
 * when one must not wait for the loop's next turn (a time-sync reply).
 */
struct td_buf	*session_output(struct session *s, bool *urgent);
/* The ERROR frame of the last CLOSE or PAUSE verdict. */
const struct td_buf *session_error(const struct session *s);
/*
 * Memory held by the recording and extra (the connection's buffers) past
 * a budget: the recording pauses (PAUSE), else GO.
 */
enum session_verdict session_account(struct session *s, uint64_t extra);
/* Checkpoint and acknowledge what arrived (the connection's tick). */
enum session_verdict session_tick(struct session *s);
/*
 * Whether s must not be fed now: its recording is cutting to its next
 * piece (recording_busy()).  The connection stops reading; the session's
 * kick (session_set_kick()) says when it may read again.
 */
bool		 session_waits(const struct session *s);
/*
 * The connection went (why: for the log, NULL when a PAUSE's ERROR went
 * out): a streaming recording waits for a resume; the session is over.
 * Returns CLOSE when the recording could not wait (--resume-wait 0).
 */
enum session_verdict session_lost(struct session *s, const char *why);
/* Close for a reason of the connection's (a timeout): the verdict. */
enum session_verdict session_close(struct session *s, const char *why);
/*
 * tdlisten stops: a streaming recording is left on disk for the next
 * tdlisten.  The verdict: CLOSE with an ERROR (come back later) to send,
 * or QUIET (a paused session's ERROR is on its way already).
 */
enum session_verdict session_shutdown(struct session *s);

#endif
