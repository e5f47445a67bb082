/*
 * httpd.c: the status page and the metrics over HTTP (see httpd.h).
 *
 * evhttp does the protocol; this file owns its listening socket (an
 * evconnlistener handed to evhttp_bind_listener(), so accepting can pause)
 * and makes each connection's bufferevent (evhttp_set_bevcb()), which is
 * how a connection is counted at accept, before it sends anything: evhttp
 * asks for one per accepted socket.  The bufferevent is held (a reference)
 * until the loop's next turn, when evhttp has made its connection (the
 * bufferevent's callback argument): a close callback on that connection
 * uncounts it; a bufferevent evhttp freed at once (its callbacks cleared)
 * is uncounted then.  At TD_HTTP_MAX_CONNS accepting pauses (within the
 * very accept loop) and the next to go resumes it; the others wait in the
 * kernel's queue.  Out of descriptors, accepting pauses for a second.
 *
 * Every reply is made at once from counters in memory (metrics.c): no
 * request waits on anything, none holds a recording.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "acceptpause.h"
#include "conn.h"
#include "httpd.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "tdlimits.h"
#include "banned.h"

static struct evhttp			*httpd_http;
static struct evconnlistener		*httpd_lev;
static const struct listener_config	*httpd_cfg;
static bool				 httpd_tls;
static struct evhttp_connection	*httpd_conns[TD_HTTP_MAX_CONNS];
static int				 httpd_nconns;	/* counted, all */
static struct bufferevent		*httpd_new[TD_HTTP_MAX_CONNS];
static int				 httpd_nnew;	/* of them: just made */
static struct event			*httpd_new_ev;
static struct accept_pause		*httpd_pause;

/* Accept again unless paused or full. */
static void
httpd_resume(void)
{
	if (httpd_lev != NULL && !accept_paused(httpd_pause) &&
	    httpd_nconns + httpd_nnew < TD_HTTP_MAX_CONNS)
		evconnlistener_enable(httpd_lev);
}

/* An HTTP connection closed: one fewer. */
static void
httpd_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	int i;

	for (i = 0; i < httpd_nconns; i++)
		if (httpd_conns[i] == evcon) {
			httpd_conns[i] = httpd_conns[--httpd_nconns];
			break;
		}
	httpd_resume();
}

/*
 * The loop's turn after accepting: each new bufferevent's connection gets
 * the close callback (or, freed already, is uncounted); our reference goes.
 */
static void
httpd_new_cb(evutil_socket_t fd, short what, void *arg)
{
	struct evhttp_connection *evcon;
	void *cbarg;

	while (httpd_nnew > 0) {
		struct bufferevent *bev = httpd_new[--httpd_nnew];

		bufferevent_getcb(bev, NULL, NULL, NULL, &cbarg);
		if ((evcon = cbarg) != NULL) {
			evhttp_connection_set_closecb(evcon, httpd_closed_cb,
			    NULL);
			httpd_conns[httpd_nconns++] = evcon;
		}
		bufferevent_decref(bev);
	}
	httpd_resume();
}

/* evhttp's maker of a connection's bufferevent (the socket: later). */
static struct bufferevent *
httpd_bev_cb(struct event_base *base, void *arg)
{
	struct bufferevent *bev;
	SSL *ssl;

	if (httpd_tls) {
		if ((ssl = SSL_new(conn_get_ctx())) == NULL)
			fatalx("--http: cannot make a TLS connection");
		bev = bufferevent_openssl_socket_new(base, -1, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	} else	/* as evhttp makes it: evhttp closes the socket */
		bev = bufferevent_socket_new(base, -1, 0);
	if (bev == NULL)
		fatalx("--http: cannot make a bufferevent");
	/* evhttp makes its connection now: see it on the loop's next turn */
	bufferevent_incref(bev);
	httpd_new[httpd_nnew++] = bev;
	event_active(httpd_new_ev, EV_TIMEOUT, 0);
	if (httpd_nconns + httpd_nnew >= TD_HTTP_MAX_CONNS)
		evconnlistener_disable(httpd_lev);	/* ends this accept loop */
	return bev;
}

/* After a pause for want of descriptors (acceptpause.h): unless full. */
static void
httpd_pause_over(void *arg)
{
	httpd_resume();
}

/* Reply code with body of type (to a HEAD: its headers only). */
static void
httpd_reply(struct evhttp_request *req, int code, const char *reason,
    const char *type, struct evbuffer *body)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char len[32];

	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		/* libevent 2.1 would send the body after a HEAD's headers */
		snprintf(len, sizeof len, "%zu", evbuffer_get_length(body));
		evhttp_add_header(h, "Content-Length", len);
		body = NULL;
	}
	evhttp_send_reply(req, code, reason, body);
}

/* Every request: the three pages, 404 or 405. */
static void
httpd_request_cb(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	struct evbuffer *body;

	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "GET, HEAD");
		body = evbuffer_new();
		evbuffer_add_printf(body, "method not allowed\n");
		httpd_reply(req, 405, "Method Not Allowed", "text/plain", body);
		evbuffer_free(body);
		return;
	}
	if ((body = evbuffer_new()) == NULL)
		fatalx("--http: out of memory");
	if (path != NULL && strcmp(path, "/metrics") == 0) {
		metrics_prometheus(httpd_cfg, body);
		httpd_reply(req, 200, "OK", "text/plain; version=0.0.4; "
		    "charset=utf-8", body);
	} else if (path != NULL && strcmp(path, "/status") == 0) {
		metrics_json(httpd_cfg, body);
		httpd_reply(req, 200, "OK", "application/json", body);
	} else if (path != NULL && strcmp(path, "/") == 0) {
		evbuffer_add(body, statuspage_html, strlen(statuspage_html));
		/* its own script and style only, its requests to us only */
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Content-Security-Policy", "default-src 'none'; "
		    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
		    "connect-src 'self'; img-src data:");
		httpd_reply(req, 200, "OK", "text/html; charset=utf-8", body);
	} else {
		evbuffer_add_printf(body, "not found\n");
		httpd_reply(req, 404, "Not Found", "text/plain", body);
	}
	evbuffer_free(body);
}

/* Whether sa is a loopback address (127/8, ::1, ::ffff:127/104). */
static bool
httpd_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

	if (sa->sa_family == AF_INET)
		return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family != AF_INET6)
		return false;
	if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
		return true;
	return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
	    s6->sin6_addr.s6_addr[12] == 127;
}

/* Split spec into host (127.0.0.1 when absent) and port; -1 when bad. */
static int
httpd_split(const char *spec, char *host, size_t hostlen, char *port,
    size_t portlen)
{
	const char *colon, *h = "127.0.0.1";
	size_t hl;

	if (spec[0] == '[') {
		if ((colon = strstr(spec, "]:")) == NULL)
			return -1;
		h = spec + 1;
		hl = (size_t)(colon - h);
		colon++;
	} else if ((colon = strrchr(spec, ':')) != NULL) {
		if (strchr(spec, ':') != colon)
			return -1;	/* an IPv6 address wants [ ] */
		h = spec;
		hl = (size_t)(colon - spec);
	} else
		hl = strlen(h);
	if (hl == 0 || hl >= hostlen)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (snprintf(port, portlen, "%s", colon != NULL ? colon + 1 :
	    spec) >= (int)portlen || port[0] == '\0' ||
	    strspn(port, "0123456789") != strlen(port))
		return -1;
	return 0;
}

int
httpd_start(struct event_base *base, const struct listener_config *cfg,
    bool tls, char *err, size_t errlen)
{
	struct addrinfo hints, *res;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;
	char host[NI_MAXHOST], port[16], name[NI_MAXHOST], serv[NI_MAXSERV];
	int e;

	if (httpd_split(cfg->http, host, sizeof host, port,
	    sizeof port) == -1) {
		snprintf(err, errlen, "'%s': want PORT, ADDR:PORT or "
		    "[ADDR6]:PORT", cfg->http);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((e = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(err, errlen, "'%s': %s", cfg->http, gai_strerror(e));
		return -1;
	}
	httpd_tls = !httpd_loopback(res->ai_addr);
	if (httpd_tls && !tls) {
		freeaddrinfo(res);
		snprintf(err, errlen, "'%s' is not a loopback address: the "
		    "status page is served there over TLS with client "
		    "certificates only, and --insecure has none", host);
		return -1;
	}
	httpd_cfg = cfg;
	httpd_lev = evconnlistener_new_bind(base, NULL, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
	    TD_HTTP_MAX_CONNS, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (httpd_lev == NULL) {
		snprintf(err, errlen, "cannot listen on '%s': %s", cfg->http,
		    strerror(errno));
		return -1;
	}
	if ((httpd_http = evhttp_new(base)) == NULL ||
	    evhttp_bind_listener(httpd_http, httpd_lev) == NULL)
		fatalx("--http: cannot set up evhttp");
	if ((httpd_new_ev = event_new(base, -1, 0, httpd_new_cb,
	    NULL)) == NULL || (httpd_pause = accept_pause_new(base, "--http",
	    httpd_pause_over, NULL)) == NULL)
		fatalx("--http: out of memory");
	evhttp_set_bevcb(httpd_http, httpd_bev_cb, NULL);
	accept_pause_watch(httpd_pause, httpd_lev);
	evhttp_set_gencb(httpd_http, httpd_request_cb, NULL);
	/* every method reaches httpd_request_cb, which answers 405 */
	evhttp_set_allowed_methods(httpd_http, EVHTTP_REQ_GET |
	    EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
	    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(httpd_http, TD_HTTP_MAX_HEADERS);
	evhttp_set_max_body_size(httpd_http, TD_HTTP_MAX_BODY);
	evhttp_set_timeout(httpd_http, TD_HTTP_TIMEOUT);
	if (getsockname(evconnlistener_get_fd(httpd_lev),
	    (struct sockaddr *)&ss, &sslen) == -1 ||
	    getnameinfo((struct sockaddr *)&ss, sslen, name, sizeof name,
	    serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(serv, sizeof serv, "%s", port);
	else
		snprintf(host, sizeof host, "%s", name);
	log_info("status page and metrics at %s://%s%s%s:%s/%s",
	    httpd_tls ? "https" : "http", strchr(host, ':') ? "[" : "", host,
	    strchr(host, ':') ? "]" : "", serv, httpd_tls ? " (client "
	    "certificates from --ca only)" : "");
	return 0;
}

void
httpd_free(void)
{
	struct evconnlistener *lev = httpd_lev;

	/* no connection that goes now may enable it again */
	httpd_lev = NULL;
	/* evhttp_free() frees the listener and every connection */
	if (httpd_http != NULL)
		evhttp_free(httpd_http);
	else if (lev != NULL)
		evconnlistener_free(lev);
	httpd_http = NULL;
	while (httpd_nnew > 0)
		bufferevent_decref(httpd_new[--httpd_nnew]);
	httpd_nconns = 0;
	if (httpd_new_ev != NULL)
		event_free(httpd_new_ev);
	accept_pause_free(httpd_pause);
	httpd_new_ev = NULL;
	httpd_pause = NULL;
}
