/*
 * ufsession.h: one `uftrace record --host` run, from its messages to its
 * directory: the state machine of uftrace.c's clients, without the
 * connection.  The bytes a client sent go in (ufsession_feed()); each
 * message is decoded by proto/ufmsg.c and its body streamed into one file
 * of DIR/uftrace-<addr>/<UTC time>.part, opened relative to that directory
 * (openat, O_NOFOLLOW) under a name ufmsg.c checked.  ufsession_end() puts
 * the directory in place: <UTC time> when complete, else <UTC time>.incomplete
 * with the reason in its tdlisten.incomplete; either way with the receiving
 * machine's clocks in tdlisten.clock.
 *
 * Errors are returned, never acted on: the caller closes its client and
 * ends the run with the reason.  It logs what happens to the run under the
 * label it was given.  Loop thread only (it reads the registry).
 */
#ifndef TD_UFSESSION_H
#define TD_UFSESSION_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;
struct listener_config;
struct output_done;
struct ufsession;

/* Who hears of a run put in place (tdlisten --on-finish); cb may be NULL. */
struct ufsession_done {
	void	(*cb)(const struct output_done *, void *);
	void	*arg;
};

/*
 * A run of a client from addr (path-safe: output_sanitize()) into cfg's
 * directory, logged as label; done is copied.
 */
struct ufsession *ufsession_new(const struct listener_config *cfg,
	    const char *addr, const char *label,
	    const struct ufsession_done *done);
/*
 * Take what arrived in in: every whole header and head is decoded (and
 * drained), every body byte written; in keeps what is not a whole head
 * yet.  0 to go on, 1 when the run ended (SEND_END after the info file),
 * -1 with err (the client must go: ufsession_end(s, err)).
 */
int	ufsession_feed(struct ufsession *s, struct evbuffer *in, char *err,
	    size_t errlen);
/* Whether the run is named (SEND_DIR_NAME came): its directory exists. */
bool	ufsession_named(const struct ufsession *s);
/*
 * Put the run's directory in place: complete with why NULL, else
 * incomplete for why.  Nothing when it was not named.  Once.
 */
void	ufsession_end(struct ufsession *s, const char *why);
/* Free s (a run not ended is left as .part). */
void	ufsession_free(struct ufsession *s);

#endif
