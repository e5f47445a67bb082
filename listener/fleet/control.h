/*
 * control.h: tdlisten's control socket (--control PATH), the local Unix
 * stream socket tdctl talks to.  Its file mode (0660) and owner decide who
 * may use it.  The protocol is lines of text (docs/tdctl.8, "PROTOCOL"):
 * one request, answer lines, then a line "." alone.  A client that sends
 * anything malformed or too long is closed; nobody else notices.  Loop
 * thread only.
 */
#ifndef TD_CONTROL_H
#define TD_CONTROL_H

#include <sys/types.h>

struct event_base;

/*
 * Listen on path (a stale socket there is replaced), mode 0660, owned by
 * uid and gid where they are not -1: 0, or -1 and err.
 */
int	control_start(struct event_base *base, const char *path, uid_t uid,
	    gid_t gid, char *err, size_t errlen);
/*
 * What "reload" runs (tdctl reload): 0 and what was done in msg, or -1
 * and why in msg.  Unset: reload is answered as not supported.
 */
void	control_set_reload(int (*fn)(char *msg, size_t len));
/* Close the socket (and remove it) and every client. */
void	control_free(void);

#endif
