/*
 * httpd.c: the status page and the metrics over HTTP (see httpd.h).
 *
 * evhttp does the protocol; this file owns its listening socket (an
 * evconnlistener handed to evhttp_bind_listener(), so accepting can pause)
 * and every client: a slot taken when evhttp asks for the connection's
 * bufferevent (evhttp_set_bevcb(), at accept, before the client sends
 * anything).  The bufferevent is held (a reference) until the loop's next
 * turn, when evhttp has made its connection (the bufferevent's callback
 * argument): then the client's address is known and it is admitted or
 * closed, and a close callback on the connection gives the slot back (a
 * bufferevent evhttp freed at once, its callbacks cleared, gives it back
 * then).
 *
 * evhttp's timeout is per read: a client sending a byte every few seconds
 * kept its slot for as long as its headers could grow (16 of them kept the
 * page away for 90 s).  So each client has a deadline instead: its whole
 * request, TLS handshake included, within TD_HTTP_DEADLINE seconds of its
 * accept or of its last reply, or it is closed.  One address (an IPv6
 * /64) holds at most TD_HTTP_MAX_CONNS_ADDR slots, all of them
 * TD_HTTP_MAX_CONNS; a newcomer beyond either takes the slot of the client
 * (of its own address, or any when all are taken) that has owed a request
 * longest, if that one has owed it for TD_HTTP_MIN_AGE_MS: an honest
 * request takes milliseconds, so a crowd that keeps a page reader out must
 * open a slot's worth of connections every second, and honest readers
 * arriving together never take each other's.  When every slot is taken
 * and none is that old, accepting pauses (newcomers wait in the kernel's
 * queue) until one is; at most one slot more is used for the newcomer of
 * the moment.  Out of descriptors, accepting pauses for a second.
 *
 * A request whose Host is not this listener's (localhost, a loopback
 * address, the address it came in on, the --http address, the host's name,
 * a name of the listener's certificate) is refused with 421: a page of
 * another site whose name an attacker points at this address (DNS
 * rebinding) cannot read it.
 *
 * Replies are made from counters in memory (metrics.c), none holds a
 * recording.  A pipelined flood of /metrics took 97% of the loop and
 * widened honest time-sync bounds eightfold, so a reply made is reused
 * for TD_HTTP_CACHE_MS unless a count of things changed (it is made at
 * most once a second while only progress counters move), and one address
 * is answered TD_HTTP_BURST requests at once, then TD_HTTP_RATE a second:
 * a request past that is held, which stops evhttp reading the
 * connection, until its turn.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
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
#include <openssl/x509v3.h>

#include "acceptpause.h"
#include "agentconn.h"
#include "httpd.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "tdlimits.h"
#include "banned.h"

/* A client's address as the caps see it: IPv4, or an IPv6 /64. */
struct httpd_key {
	uint8_t		 b[16];
};

/* One HTTP client, from its accept to its close. */
struct httpd_client {
	bool			 used;
	struct bufferevent	*bev;		/* held until its turn */
	struct evhttp_connection *evcon;	/* NULL: not admitted yet */
	struct event		*deadline;
	struct httpd_key	 key;
	uint64_t		 owes_since;	/* ms; 0: being answered */
	struct evhttp_request	*held;		/* waiting for its address's turn */
	struct event		*later;		/* when it may be answered */
};

/*
 * An address's allowance of requests (a token bucket): TD_HTTP_BURST at
 * once, then TD_HTTP_RATE a second; in thousandths of a request.
 */
struct httpd_bucket {
	struct httpd_key	 key;
	uint64_t		 at_ms;		/* last filled, 0: unused */
	uint64_t		 milli;
};

/* A reply made lately, reused while young and no count has changed. */
struct httpd_page {
	struct evbuffer		*body;
	uint64_t		 at_ms;
	uint64_t		 generation;	/* metrics_generation() */
	bool			 made;
};

/* Slots: TD_HTTP_MAX_CONNS, and the newcomer of the moment. */
#define HTTPD_SLOTS	(TD_HTTP_MAX_CONNS + 1)
/* Allowances: those of the addresses connected, and as many gone lately. */
#define HTTPD_BUCKETS	(2 * HTTPD_SLOTS)

static struct evhttp			*httpd_http;
static struct evconnlistener		*httpd_lev;
static const struct listener_config	*httpd_cfg;
static bool				 httpd_tls;
static struct httpd_client		 httpd_clients[HTTPD_SLOTS];
static int				 httpd_nused;
static struct httpd_client		*httpd_new[HTTPD_SLOTS];
static int				 httpd_nnew;	/* not admitted yet */
static struct event			*httpd_new_ev;
static struct event			*httpd_full_ev;
static struct accept_pause		*httpd_pause;
static char				 httpd_host[NI_MAXHOST];
static struct metrics_http		 httpd_stats;
static struct httpd_bucket		 httpd_buckets[HTTPD_BUCKETS];
static struct httpd_page		 httpd_pages[METRICS_HTTP_NPAGES];

/* Milliseconds of CLOCK_MONOTONIC. */
static uint64_t
httpd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The key of sa: an IPv4 address (mapped ones too), or an IPv6 /64. */
static void
httpd_key_of(const struct sockaddr *sa, struct httpd_key *k)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

	memset(k, 0, sizeof *k);
	if (sa->sa_family == AF_INET)
		memcpy(k->b, &s4->sin_addr, 4);
	else if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		memcpy(k->b, &s6->sin6_addr.s6_addr[12], 4);
	else if (sa->sa_family == AF_INET6) {
		k->b[4] = 6;	/* apart from every IPv4 address */
		memcpy(k->b + 8, &s6->sin6_addr, 8);
	}
}

/*
 * The admitted client (of key, or any when NULL) that has owed a request
 * longest, if for TD_HTTP_MIN_AGE_MS; with ready false the one that will
 * be so first, whatever its age.  NULL when none owes one.
 */
static struct httpd_client *
httpd_oldest(const struct httpd_key *key, uint64_t now, bool ready)
{
	struct httpd_client *c, *v = NULL;

	for (c = httpd_clients; c < httpd_clients + HTTPD_SLOTS; c++) {
		if (!c->used || c->evcon == NULL || c->owes_since == 0 ||
		    (key != NULL && memcmp(&c->key, key, sizeof *key) != 0))
			continue;
		if (v == NULL || c->owes_since < v->owes_since)
			v = c;
	}
	if (v != NULL && ready && now - v->owes_since < TD_HTTP_MIN_AGE_MS)
		return NULL;
	return v;
}

/*
 * Accept again unless paused or full; when full, once a client has owed a
 * request long enough to give its slot to a newcomer.
 */
static void
httpd_resume(void)
{
	struct httpd_client *v;
	struct timeval tv;
	uint64_t now, ms;

	if (httpd_lev == NULL || accept_paused(httpd_pause))
		return;
	if (httpd_nused < TD_HTTP_MAX_CONNS) {
		evconnlistener_enable(httpd_lev);
		return;
	}
	evconnlistener_disable(httpd_lev);
	now = httpd_now_ms();
	if (httpd_nused > TD_HTTP_MAX_CONNS ||
	    (v = httpd_oldest(NULL, now, false)) == NULL)
		return;		/* a newcomer's turn, or a close, comes */
	if (now - v->owes_since >= TD_HTTP_MIN_AGE_MS) {
		evconnlistener_enable(httpd_lev);
		return;
	}
	ms = v->owes_since + TD_HTTP_MIN_AGE_MS - now;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	event_add(httpd_full_ev, &tv);
}

/* The timer of a full house: a client may now give its slot. */
static void
httpd_full_cb(evutil_socket_t fd, short what, void *arg)
{
	httpd_resume();
}

/* An HTTP connection closed: its slot is free. */
static void
httpd_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct httpd_client *c = arg;

	event_del(c->deadline);
	event_del(c->later);
	c->held = NULL;		/* evhttp frees it */
	c->evcon = NULL;
	c->used = false;
	httpd_nused--;
	httpd_resume();
}

/* Close client c (admitted), counted under why. */
static void
httpd_close(struct httpd_client *c, enum metrics_http_refusal why)
{
	httpd_stats.refused[why]++;
	log_debug("--http: closing a client: %s", why ==
	    METRICS_HTTP_DEADLINE ? "no whole request by its deadline" :
	    why == METRICS_HTTP_ADDRESS ? "its address holds its share" :
	    why == METRICS_HTTP_FULL ? "every slot is taken" :
	    "its slot goes to a newcomer");
	evhttp_connection_free(c->evcon);	/* httpd_closed_cb() */
}

/* Client c owes a whole request within TD_HTTP_DEADLINE from now. */
static void
httpd_owe(struct httpd_client *c, uint64_t now)
{
	struct timeval tv = { TD_HTTP_DEADLINE, 0 };

	c->owes_since = now;
	event_add(c->deadline, &tv);
}

/* A client's deadline passed before its request was whole. */
static void
httpd_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	httpd_close(arg, METRICS_HTTP_DEADLINE);
}

/*
 * A new client's turn: admitted, or closed when its address holds its
 * share or every slot is taken, unless a client old enough gives its.
 */
static void
httpd_admit(struct httpd_client *c, uint64_t now)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;
	struct httpd_client *o, *v;
	int n = 0;

	evhttp_connection_set_closecb(c->evcon, httpd_closed_cb, c);
	if (getpeername(bufferevent_getfd(c->bev), (struct sockaddr *)&ss,
	    &sslen) == -1)
		memset(&ss, 0, sizeof ss);
	httpd_key_of((struct sockaddr *)&ss, &c->key);
	for (o = httpd_clients; o < httpd_clients + HTTPD_SLOTS; o++)
		if (o != c && o->used && o->evcon != NULL &&
		    memcmp(&o->key, &c->key, sizeof c->key) == 0)
			n++;
	if (n >= TD_HTTP_MAX_CONNS_ADDR) {
		if ((v = httpd_oldest(&c->key, now, true)) == NULL) {
			httpd_close(c, METRICS_HTTP_ADDRESS);
			return;
		}
		httpd_close(v, METRICS_HTTP_EVICTED);
	}
	if (httpd_nused > TD_HTTP_MAX_CONNS) {
		if ((v = httpd_oldest(NULL, now, true)) == NULL) {
			httpd_close(c, METRICS_HTTP_FULL);
			return;
		}
		httpd_close(v, METRICS_HTTP_EVICTED);
	}
	httpd_owe(c, now);
}

/*
 * The loop's turn after accepting: each new bufferevent's connection is
 * admitted (or, freed already, its slot given back); our reference goes.
 */
static void
httpd_new_cb(evutil_socket_t fd, short what, void *arg)
{
	struct httpd_client *c;
	uint64_t now = httpd_now_ms();
	void *cbarg;

	while (httpd_nnew > 0) {
		c = httpd_new[--httpd_nnew];
		bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
		if ((c->evcon = cbarg) != NULL)
			httpd_admit(c, now);
		else {
			c->used = false;
			httpd_nused--;
		}
		bufferevent_decref(c->bev);
		c->bev = NULL;
	}
	httpd_resume();
}

/* evhttp's maker of a connection's bufferevent (the socket: later). */
static struct bufferevent *
httpd_bev_cb(struct event_base *base, void *arg)
{
	struct httpd_client *c = httpd_clients;
	struct bufferevent *bev;
	SSL *ssl;

	while (c->used)		/* accepting stops before none is free */
		c++;
	if (httpd_tls) {
		if ((ssl = SSL_new(agentconn_get_ctx())) == NULL)
			fatalx("--http: cannot make a TLS connection");
		bev = bufferevent_openssl_socket_new(base, -1, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	} else	/* as evhttp makes it: evhttp closes the socket */
		bev = bufferevent_socket_new(base, -1, 0);
	if (bev == NULL)
		fatalx("--http: cannot make a bufferevent");
	/* evhttp makes its connection now: see it on the loop's next turn */
	bufferevent_incref(bev);
	c->used = true;
	c->bev = bev;
	c->evcon = NULL;
	c->owes_since = 0;
	c->held = NULL;
	httpd_nused++;
	httpd_new[httpd_nnew++] = c;
	event_active(httpd_new_ev, EV_TIMEOUT, 0);
	if (httpd_nused >= TD_HTTP_MAX_CONNS)
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

static bool	httpd_loopback(const struct sockaddr *);

/* The numeric form of sa (a mapped IPv4 address as IPv4); "" if none. */
static void
httpd_numeric(const struct sockaddr *sa, socklen_t salen, char *buf,
    size_t len)
{
	if (getnameinfo(sa, salen, buf, (socklen_t)len, NULL, 0,
	    NI_NUMERICHOST) != 0)
		buf[0] = '\0';
	else if (strncasecmp(buf, "::ffff:", 7) == 0 && strchr(buf, '.'))
		memmove(buf, buf + 7, strlen(buf + 7) + 1);
}

/*
 * Whether host (a request's Host, its port stripped) names this listener
 * for a request that came in on fd: localhost, a loopback address, the
 * address it came in on, the --http host, this host's name or its first
 * label, or a name of the listener's certificate.  A numeric address
 * cannot be rebound; a name must be one of these.
 */
static bool
httpd_host_ok(const char *host, evutil_socket_t fd)
{
	char h[NI_MAXHOST], num[NI_MAXHOST], local[NI_MAXHOST], me[256];
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;
	struct addrinfo hints, *res;
	size_t len = strlen(host), dot;
	X509 *cert;
	bool ok;

	if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
	}
	if (len > 0 && host[len - 1] == '.')
		len--;		/* the root's dot */
	if (len == 0 || len >= sizeof h)
		return false;
	memcpy(h, host, len);
	h[len] = '\0';
	if (strcasecmp(h, "localhost") == 0 || strcasecmp(h, httpd_host) == 0)
		return true;
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(h, NULL, &hints, &res) == 0) {
		httpd_numeric(res->ai_addr, res->ai_addrlen, num, sizeof num);
		ok = httpd_loopback(res->ai_addr);
		freeaddrinfo(res);
		if (ok)
			return true;
		if (getsockname(fd, (struct sockaddr *)&ss, &sslen) == -1)
			return false;
		httpd_numeric((struct sockaddr *)&ss, sslen, local,
		    sizeof local);
		return num[0] != '\0' && strcasecmp(num, local) == 0;
	}
	if (gethostname(me, sizeof me) == 0) {
		me[sizeof me - 1] = '\0';
		dot = strcspn(me, ".");
		if (strcasecmp(h, me) == 0 || (strlen(h) == dot &&
		    strncasecmp(h, me, dot) == 0))
			return true;
	}
	return httpd_tls && (cert = SSL_CTX_get0_certificate(
	    agentconn_get_ctx())) != NULL &&
	    X509_check_host(cert, h, strlen(h), 0, NULL) == 1;
}

/* The client whose request req is (NULL: none known). */
static struct httpd_client *
httpd_client_of(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct httpd_client *c;

	for (c = httpd_clients; c < httpd_clients + HTTPD_SLOTS; c++)
		if (c->used && c->evcon != NULL && c->evcon == evcon)
			return c;
	return NULL;
}

/* A reply is sent: its client owes the next request (or closes). */
static void
httpd_sent_cb(struct evhttp_request *req, void *arg)
{
	httpd_owe(arg, httpd_now_ms());
}

/*
 * The allowance of key's address, filled for the time since it was last;
 * an address not seen lately gets a full one, in the place of the one
 * filled longest ago.
 */
static struct httpd_bucket *
httpd_bucket_of(const struct httpd_key *key, uint64_t now)
{
	struct httpd_bucket *b, *v = NULL;
	uint64_t add;

	for (b = httpd_buckets; b < httpd_buckets + HTTPD_BUCKETS; b++) {
		if (b->at_ms != 0 && memcmp(&b->key, key, sizeof *key) == 0)
			break;
		if (v == NULL || b->at_ms < v->at_ms)
			v = b;
	}
	if (b == httpd_buckets + HTTPD_BUCKETS) {
		b = v;
		b->key = *key;
		b->milli = TD_HTTP_BURST * 1000;
	} else {
		add = (now - b->at_ms) * TD_HTTP_RATE;
		b->milli = b->milli + add > TD_HTTP_BURST * 1000 ?
		    TD_HTTP_BURST * 1000 : b->milli + add;
	}
	b->at_ms = now > 0 ? now : 1;
	return b;
}

/*
 * 0 when key's address may have a request answered now (it is counted),
 * else the milliseconds until it may.
 */
static uint64_t
httpd_take(const struct httpd_key *key, uint64_t now)
{
	struct httpd_bucket *b = httpd_bucket_of(key, now);

	if (b->milli >= 1000) {
		b->milli -= 1000;
		return 0;
	}
	return (1000 - b->milli + TD_HTTP_RATE - 1) / TD_HTTP_RATE;
}

/*
 * The body of page (/metrics or /status): the one made last if it is
 * younger than TD_HTTP_CACHE_MS and no count of things (sessions,
 * recordings, ends, refusals, runs) has changed since, else a new one.
 */
static struct evbuffer *
httpd_page(enum metrics_http_page page)
{
	struct httpd_page *p = &httpd_pages[page];
	uint64_t now = httpd_now_ms(), gen = metrics_generation(httpd_cfg);

	if (p->made && now - p->at_ms < TD_HTTP_CACHE_MS &&
	    gen == p->generation)
		return p->body;
	evbuffer_drain(p->body, evbuffer_get_length(p->body));
	httpd_stats.renders[page]++;
	if (page == METRICS_HTTP_PROMETHEUS)
		metrics_prometheus(httpd_cfg, p->body);
	else
		metrics_json(httpd_cfg, p->body);
	evbuffer_pullup(p->body, -1);	/* one copy out per reply */
	p->made = true;
	p->at_ms = now;
	p->generation = gen;
	return p->body;
}

/* body gets a copy of page's. */
static void
httpd_page_copy(struct evbuffer *body, enum metrics_http_page page)
{
	struct evbuffer *b = httpd_page(page);
	size_t len = evbuffer_get_length(b);

	evbuffer_add(body, evbuffer_pullup(b, (ev_ssize_t)len), len);
}

static void	httpd_serve(struct evhttp_request *);

/* A held request's turn may have come: answered, or held on. */
static void
httpd_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct httpd_client *c = arg;
	struct evhttp_request *req = c->held;
	struct timeval tv;
	uint64_t ms;

	if ((ms = httpd_take(&c->key, httpd_now_ms())) > 0) {
		tv.tv_sec = (time_t)(ms / 1000);
		tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
		event_add(c->later, &tv);
		return;
	}
	c->held = NULL;
	httpd_serve(req);
}

/*
 * Every request, whole: the reply and the next request owe the deadline;
 * past its address's allowance it is held (evhttp reads no more from the
 * connection meanwhile, so pipelining gains nothing), else answered.
 */
static void
httpd_request_cb(struct evhttp_request *req, void *arg)
{
	struct httpd_client *c;
	struct timeval tv;
	uint64_t now = httpd_now_ms(), ms;

	if ((c = httpd_client_of(req)) == NULL) {
		httpd_serve(req);
		return;
	}
	httpd_owe(c, now);
	c->owes_since = 0;
	evhttp_request_set_on_complete_cb(req, httpd_sent_cb, c);
	if ((ms = httpd_take(&c->key, now)) == 0) {
		httpd_serve(req);
		return;
	}
	httpd_stats.delayed++;
	c->held = req;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	event_add(c->later, &tv);
}

/* Answer req: the three pages, 421, 404 or 405. */
static void
httpd_serve(struct evhttp_request *req)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	const char *host = evhttp_request_get_host(req);
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct evbuffer *body;

	httpd_stats.requests++;
	/* no Host: not a browser's (HTTP/1.0), nothing to rebind */
	if (host != NULL && evcon != NULL && !httpd_host_ok(host,
	    bufferevent_getfd(evhttp_connection_get_bufferevent(evcon)))) {
		httpd_stats.refused[METRICS_HTTP_HOST]++;
		log_debug("--http: a request for another host refused (421)");
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Connection", "close");
		body = evbuffer_new();
		evbuffer_add_printf(body, "this listener does not answer to "
		    "that name (its own, localhost or an address of it)\n");
		httpd_reply(req, 421, "Misdirected Request", "text/plain",
		    body);
		evbuffer_free(body);
		return;
	}
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
		httpd_page_copy(body, METRICS_HTTP_PROMETHEUS);
		httpd_reply(req, 200, "OK", "text/plain; version=0.0.4; "
		    "charset=utf-8", body);
	} else if (path != NULL && strcmp(path, "/status") == 0) {
		httpd_page_copy(body, METRICS_HTTP_STATUS);
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
	int e, i;

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
	snprintf(httpd_host, sizeof httpd_host, "%s", host);
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
	    NULL)) == NULL || (httpd_full_ev = evtimer_new(base,
	    httpd_full_cb, NULL)) == NULL || (httpd_pause =
	    accept_pause_new(base, "--http", httpd_pause_over, NULL)) == NULL)
		fatalx("--http: out of memory");
	for (i = 0; i < HTTPD_SLOTS; i++)
		if ((httpd_clients[i].deadline = evtimer_new(base,
		    httpd_deadline_cb, &httpd_clients[i])) == NULL ||
		    (httpd_clients[i].later = evtimer_new(base,
		    httpd_later_cb, &httpd_clients[i])) == NULL)
			fatalx("--http: out of memory");
	for (i = 0; i < METRICS_HTTP_NPAGES; i++)
		if ((httpd_pages[i].body = evbuffer_new()) == NULL)
			fatalx("--http: out of memory");
	metrics_set_http(&httpd_stats);
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
	/* per read and write: a second after the deadline, which comes first */
	evhttp_set_timeout(httpd_http, TD_HTTP_DEADLINE + 1);
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
	int i;

	/* no connection that goes now may enable it again */
	httpd_lev = NULL;
	/* evhttp_free() frees the listener and every connection */
	if (httpd_http != NULL)
		evhttp_free(httpd_http);
	else if (lev != NULL)
		evconnlistener_free(lev);
	httpd_http = NULL;
	while (httpd_nnew > 0)
		bufferevent_decref(httpd_new[--httpd_nnew]->bev);
	for (i = 0; i < HTTPD_SLOTS; i++) {
		if (httpd_clients[i].deadline != NULL)
			event_free(httpd_clients[i].deadline);
		if (httpd_clients[i].later != NULL)
			event_free(httpd_clients[i].later);
		memset(&httpd_clients[i], 0, sizeof httpd_clients[i]);
	}
	for (i = 0; i < METRICS_HTTP_NPAGES; i++) {
		if (httpd_pages[i].body != NULL)
			evbuffer_free(httpd_pages[i].body);
		memset(&httpd_pages[i], 0, sizeof httpd_pages[i]);
	}
	memset(httpd_buckets, 0, sizeof httpd_buckets);
	httpd_nused = 0;
	if (httpd_new_ev != NULL)
		event_free(httpd_new_ev);
	if (httpd_full_ev != NULL)
		event_free(httpd_full_ev);
	accept_pause_free(httpd_pause);
	metrics_set_http(NULL);
	httpd_new_ev = NULL;
	httpd_full_ev = NULL;
	httpd_pause = NULL;
}
