/*
 * conn-tls.c: the TLS side of an agent's connection (see conn-tls.h).
 */
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/util.h>
#include <openssl/err.h>

#include "conn-tls.h"
#include "preamble.h"
#include "sockio.h"
#include "tls.h"
#include "banned.h"

struct bufferevent *
conn_tls_new(struct event_base *base, SSL_CTX *ctx, int fd, bool big,
    bool required, const char **why)
{
	struct bufferevent *bev;
	SSL *ssl;

	if ((ssl = SSL_new(ctx)) == NULL) {
		*why = "cannot start TLS";
		return NULL;
	}
	SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (big)
		sockio_tls(ssl);
	/* a byte pipe: a new session's preamble may come in this one */
	if (required)
		preamble_watch(ssl, fd);
	bev = bufferevent_openssl_socket_new(base, fd, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		*why = "out of memory";
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

void
conn_tls_error(struct bufferevent *bev, bool required, bool handshake,
    char *msg, size_t len)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long e = bufferevent_get_openssl_error(bev);
	char reason[256], why[400];

	if (required && preamble_seen(ssl))
		snprintf(msg, len, "a new session's resynchronisation preamble "
		    "came in the middle of this one: the agent started over "
		    "(a guest rebooted, or a new tdagent)");
	else if (handshake && ssl != NULL &&
	    SSL_get_verify_result(ssl) != X509_V_OK)
		td_tls_handshake_error(ssl, msg, len, "TLS handshake refused");
	else if (e != 0) {
		ERR_error_string_n(e, reason, sizeof reason);
		snprintf(msg, len, "%s: %s", handshake ?
		    "TLS handshake refused" : "TLS error", reason);
		/* what the agent's alert or its bytes mean, and the fix */
		if (handshake && ssl != NULL) {
			td_tls_explain(ssl, e, why, sizeof why);
			if (why[0] != '\0' && strlen(msg) < len)
				snprintf(msg + strlen(msg), len - strlen(msg),
				    " (%s)", why);
		}
	} else
		snprintf(msg, len, "connection error: %s",
		    strerror(EVUTIL_SOCKET_ERROR()));
}
