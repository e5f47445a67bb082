/*
 * reload.c: the reload of tdlisten's trust store (see reload.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agentconn.h"
#include "listener.h"
#include "log.h"
#include "notify.h"
#include "reload.h"
#include "tls.h"
#include "banned.h"

static uint64_t	reload_nfailed;
static char	reload_why[512];

int
reload_run(const struct listener_config *c, const char *who, char *msg,
    size_t len)
{
	SSL_CTX *ctx;
	char err[1024];
	bool kept;

	if (c->insecure) {
		snprintf(msg, len, "no certificates to reload (--insecure)");
		log_info("%s: %s", who, msg);
		reload_why[0] = '\0';
		return 0;
	}
	/*
	 * After -u the key (root's, 0600) is out of reach: the CA and the
	 * CRL, which are public, are what a revocation needs.
	 */
	notify_reloading();
	ctx = td_tls_server_reload(agentconn_get_ctx(), c->cert, c->key, c->ca,
	    c->crl, &kept, err, sizeof err);
	/* systemd waits for READY=1 after RELOADING=1, done or not */
	notify_send("READY=1");
	if (ctx == NULL) {
		reload_nfailed++;
		snprintf(reload_why, sizeof reload_why, "%.500s", err);
		snprintf(msg, len, "reload failed, the old CA%s still in force "
		    "for new sessions: %s", c->crl != NULL ? " and CRL are" :
		    " is", err);
		log_errx("%s: %s", who, msg);
		return -1;
	}
	agentconn_set_ctx(ctx);
	reload_why[0] = '\0';
	if (kept)
		snprintf(msg, len, "CA%s reloaded for new sessions; "
		    "certificate and key kept in memory (%s)",
		    c->crl != NULL ? " and CRL" : "", err);
	else
		snprintf(msg, len, "certificates%s reloaded for new sessions",
		    c->crl != NULL ? " and CRL" : "");
	log_info("%s: %s", who, msg);
	return 0;
}

uint64_t
reload_failures(void)
{
	return reload_nfailed;
}

const char *
reload_error(void)
{
	return reload_why;
}
