/*
 * reload.h: tdlisten's reload of its trust store (SIGHUP, tdctl reload):
 * the CA and the CRL read again, the certificate and key too where they
 * can be, for new sessions.  A reload that fails keeps the old store, and
 * that must not pass unnoticed (a revocation that did not happen): it is
 * logged as an error, counted (tdlisten_reload_failures_total), shown in
 * /status and answered to tdctl.  Loop thread only.
 */
#ifndef TD_RELOAD_H
#define TD_RELOAD_H

#include <stddef.h>
#include <stdint.h>

struct listener_config;

/*
 * Reload c's TLS files for new sessions, logged (who: "SIGHUP", "tdctl
 * reload"): 0 and what was done in msg, or -1 and why in msg (the old
 * store kept).
 */
int		 reload_run(const struct listener_config *c, const char *who,
		    char *msg, size_t len);
/* Reloads that failed since the start. */
uint64_t	 reload_failures(void);
/* Why the last reload failed, or "" when it succeeded (or none ran). */
const char	*reload_error(void);

#endif
