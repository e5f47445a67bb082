/*
 * tclocal.h: what the trace-cmd installed here can read, asked of it
 * ("trace-cmd list -c"), so that tdagent and tdlisten can say so before
 * they write files it cannot open (Debian 12's trace-cmd, libtracecmd and
 * KernelShark are built without zlib).
 *
 * Runs trace-cmd from PATH as a child with no blocked signals, its stdin
 * and stderr on /dev/null, reads at most TD_TCLOCAL_OUT bytes of its
 * output and waits at most TD_TCLOCAL_MS for it.  Call it before any
 * other child exists that the caller waits for by pid -1.  No logging.
 */
#ifndef TD_TCLOCAL_H
#define TD_TCLOCAL_H

#include <stddef.h>

/*
 * Whether the local trace-cmd reads files compressed with codec name
 * ("zlib"): 1 yes, 0 no (have: the codecs it lists, "zstd"), -1 it
 * cannot tell (no trace-cmd, or no list).
 */
int	td_tclocal_codec(const char *name, char *have, size_t havelen);
/*
 * The start-up warning of tdagent and tdlisten for --compression zlib
 * into msg: 1 when the local trace-cmd cannot read zlib files (say it),
 * 0 when it can or cannot tell.
 */
int	td_tclocal_zlib_warning(char *msg, size_t msglen);

#endif
