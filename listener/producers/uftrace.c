/*
 * uftrace.c: the producer for `uftrace record --host H --port P` clients
 * (uftrace 0.13's record-to-recv protocol, proto/ufmsg.h): the client
 * part.  One bufferevent per client on the listener's loop; what it reads
 * goes to the client's run, ufsession.c, which turns the messages into the
 * run's directory; a client whose run returns an error is closed, its run
 * kept as <UTC time>.incomplete with the reason.
 *
 * uftrace sends nothing while the traced program runs and its buffers are
 * not full: there is no idle timeout, TCP keepalives find a peer that
 * vanished.  But a client must name its run (SEND_DIR_NAME) within
 * --handshake-timeout of its connection, however it trickles, and when
 * every slot is taken a newcomer takes the slot of the client idle the
 * longest (at least --handshake-timeout) of the address that holds the
 * most, if that address holds more than the newcomer's and more than
 * one: idle clients of a few addresses cannot keep a real uftrace out
 * (issue 31).  Writes are bounded per callback by the read-ahead
 * (TD_UF_READ_AHEAD).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "acceptpause.h"
#include "admit.h"
#include "client.h"
#include "clock.h"
#include "listener.h"
#include "output.h"
#include "server.h"
#include "log.h"
#include "tdlimits.h"
#include "ufsession.h"
#include "uftrace.h"
#include "xmalloc.h"
#include "banned.h"

#define UF_MAX_LISTENERS	4
#define UF_INCOMPLETE_FILE	"tdlisten.incomplete"

/*
 * One uftrace client: its run (ufsession.c) in a client of the client
 * layer (client.h), which owns the connection, its label, the deadline of
 * its run's name, the list and the slot.
 */
struct uf_client {
	struct client		*cl;
	struct bufferevent	*bev;		/* cl's */
	char			 peer[NI_MAXHOST + NI_MAXSERV + 4];
	char			 addr[NI_MAXHOST];	/* path-safe */
	struct ufsession	*run;
	uint64_t		 last_ms;	/* its last bytes (monotonic) */
};

static const struct listener_config	*uf_cfg;
static struct evconnlistener		*uf_lev[UF_MAX_LISTENERS];
static int				 uf_nlev;
static struct accept_pause		*uf_pause;
/* Who hears of the runs put in place (uftrace_set_done()). */
static struct ufsession_done		 uf_done;

static const char *
uf_label(const struct uf_client *c)
{
	return client_label(c->cl);
}

/* The one function that frees a client: its run ends with why. */
static void
uf_close(struct uf_client *c, const char *why)
{
	if (why != NULL && !ufsession_named(c->run))
		log_warnx("%s: closed: %s", uf_label(c), why);
	ufsession_end(c->run, why);
	client_free(c->cl);
}

/* The client layer's free hook: what the run's end left. */
static void
uf_free_cb(void *arg)
{
	struct uf_client *c = arg;

	ufsession_free(c->run);
	free(c);
}


static void
uf_read_cb(struct bufferevent *bev, void *arg)
{
	struct uf_client *c = arg;
	char err[512];
	int r;

	c->last_ms = td_clock_now_ms();
	r = ufsession_feed(c->run, bufferevent_get_input(bev), err,
	    sizeof err);
	if (r == -1)
		uf_close(c, err);
	else if (r == 1)
		uf_close(c, NULL);
}

static void
uf_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct uf_client *c = arg;
	char why[160];

	if (what & BEV_EVENT_EOF)
		snprintf(why, sizeof why, "the client went away before "
		    "SEND_END");
	else
		snprintf(why, sizeof why, "connection lost before SEND_END: "
		    "%s", strerror(EVUTIL_SOCKET_ERROR()));
	uf_close(c, why);
}

/* A client that has not named its run in time goes. */
static void
uf_deadline_cb(struct client *cl, void *arg)
{
	struct uf_client *c = arg;
	char why[96];

	if (ufsession_named(c->run))
		return;
	snprintf(why, sizeof why, "no SEND_DIR_NAME within %d s",
	    uf_cfg->handshake_timeout);
	uf_close(c, why);
}

/* The clients of addr now. */
static int
uf_count(const char *addr)
{
	struct client *cl;
	int n = 0;

	for (cl = client_first(CLIENT_UFTRACE); cl != NULL;
	    cl = client_next(cl))
		if (strcmp(((struct uf_client *)client_arg(cl))->addr,
		    addr) == 0)
			n++;
	return n;
}

/*
 * Every slot is taken: the client whose slot a newcomer of an address
 * holding mine clients takes (see the top of this file), or NULL.
 */
static struct uf_client *
uf_victim(int mine)
{
	uint64_t now = td_clock_now_ms();
	struct uf_client *c, *v = NULL;
	struct client *cl;
	int most = 0, n;

	for (cl = client_first(CLIENT_UFTRACE); cl != NULL;
	    cl = client_next(cl))
		if ((n = uf_count(((struct uf_client *)
		    client_arg(cl))->addr)) > most)
			most = n;
	if (most < 2 || most <= mine)
		return NULL;
	for (cl = client_first(CLIENT_UFTRACE); cl != NULL;
	    cl = client_next(cl)) {
		c = client_arg(cl);
		if (uf_count(c->addr) == most &&
		    (v == NULL || c->last_ms < v->last_ms))
			v = c;
	}
	if (v == NULL || now - v->last_ms <
	    (uint64_t)uf_cfg->handshake_timeout * 1000)
		return NULL;
	return v;
}

/* tdlisten stops: the run is kept as incomplete. */
static void
uf_shutdown_cb(struct client *cl, void *arg)
{
	uf_close(arg, "tdlisten stopped before the run ended");
}

/* What the client layer calls uftrace.c for. */
static const struct client_hooks uf_hooks = {
	.free = uf_free_cb,
	.deadline = uf_deadline_cb,
	.shutdown = uf_shutdown_cb,
};

/*
 * Whether a client from host:serv (addr: path-safe) may come in, once the
 * slot of an idle one is taken for it when every slot is (logged).
 */
static bool
uf_admit(const char *host, const char *serv, const char *addr)
{
	char why[NI_MAXHOST + NI_MAXSERV + 160];
	enum client_verdict verdict;
	struct uf_client *v;
	int same;

	verdict = client_may_open(CLIENT_UFTRACE, addr);
	if (verdict == CLIENT_YES)
		return true;
	same = uf_count(addr);
	if (verdict == CLIENT_ADDRESS) {
		/* at a bounded rate, as every refusal (a flood of them
		   flooded the log: issue 31) */
		admit_refused(ADMIT_R_ADDRESS, "uftrace %s:%s: refused: %d "
		    "clients of that address already", host, serv, same);
		return false;
	}
	if ((v = uf_victim(same)) == NULL) {
		if (verdict == CLIENT_KIND_FULL)
			admit_refused(ADMIT_R_FULL, "uftrace %s:%s: refused: "
			    "%d clients already", host, serv,
			    client_count(CLIENT_UFTRACE));
		else
			admit_refused(ADMIT_R_SESSIONS, "uftrace %s:%s: "
			    "refused: %d sessions of every kind already "
			    "(--max-sessions)", host, serv,
			    client_count(CLIENT_NKINDS));
		return false;
	}
	snprintf(why, sizeof why, "idle for %llu s, its slot goes to "
	    "%s:%s, of a less busy address (%d clients at most)",
	    (unsigned long long)(td_clock_now_ms() -
	    v->last_ms) / 1000, host, serv, verdict == CLIENT_KIND_FULL ?
	    TD_UF_MAX_CLIENTS : uf_cfg->max_sessions);
	uf_close(v, why);
	return true;
}

static void
uf_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct uf_client *c;
	char host[NI_MAXHOST], serv[NI_MAXSERV], addr[NI_MAXHOST];
	char label[NI_MAXHOST + NI_MAXSERV + 16];
	int one = 1, idle = 60, intvl = 10, cnt = 6;

	if (getnameinfo(sa, (socklen_t)salen, host, sizeof host, serv,
	    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(host, sizeof host, "unknown");
		snprintf(serv, sizeof serv, "0");
	}
	snprintf(addr, sizeof addr, "%s", host);
	output_sanitize(addr);
	if (!uf_admit(host, serv, addr)) {
		evutil_closesocket(fd);
		return;
	}
	c = xcalloc(1, sizeof *c);
	snprintf(c->peer, sizeof c->peer, sa->sa_family == AF_INET6 ?
	    "[%s]:%s" : "%s:%s", host, serv);
	snprintf(c->addr, sizeof c->addr, "%s", addr);
	snprintf(label, sizeof label, "uftrace %s", c->peer);
	c->run = ufsession_new(uf_cfg, addr, label, &uf_done);
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	evutil_make_socket_nonblocking(fd);
	c->cl = client_new(CLIENT_UFTRACE, fd, label, &uf_hooks, c);
	if (client_set_plain(c->cl) == -1) {
		log_warnx("%s: cannot make a bufferevent", label);
		client_free(c->cl);
		return;
	}
	client_admit(c->cl, addr);
	c->bev = client_bev(c->cl);
	bufferevent_setwatermark(c->bev, EV_READ, 0, TD_UF_READ_AHEAD);
	client_setcb(c->cl, uf_read_cb, NULL, uf_event_cb);
	bufferevent_enable(c->bev, EV_READ);
	c->last_ms = td_clock_now_ms();
	/* its run named in time, however it trickles */
	client_deadline(c->cl, uf_cfg->handshake_timeout * 1000L);
	log_debug("%s: connected", label);
}

/*
 * Runs an earlier tdlisten left in DIR/uftrace-* as NAME.part become
 * NAME.incomplete, with the reason.
 */
static void
uf_recover(const struct listener_config *cfg)
{
	static const char why[] = "tdlisten stopped before the run ended\n";
	struct dirent *d, *e;
	DIR *top, *host;
	char *hostdir, *part, *final, *note;
	size_t n;
	int fd;

	if ((top = opendir(cfg->dir)) == NULL)
		return;
	while ((d = readdir(top)) != NULL) {
		if (strncmp(d->d_name, "uftrace-", 8) != 0)
			continue;
		xasprintf(&hostdir, "%s/%s", cfg->dir, d->d_name);
		if ((host = opendir(hostdir)) == NULL) {
			free(hostdir);
			continue;
		}
		while ((e = readdir(host)) != NULL) {
			n = strlen(e->d_name);
			if (n <= 5 || e->d_name[0] == '.' ||
			    strcmp(e->d_name + n - 5, ".part") != 0)
				continue;
			xasprintf(&part, "%s/%s", hostdir, e->d_name);
			xasprintf(&final, "%s/%.*s.incomplete", hostdir,
			    (int)(n - 5), e->d_name);
			xasprintf(&note, "%s/%s", part, UF_INCOMPLETE_FILE);
			fd = open(note, O_WRONLY | O_CREAT | O_TRUNC |
			    O_NOFOLLOW | O_CLOEXEC, cfg->file_mode);
			if (fd != -1) {
				if (write(fd, why, sizeof why - 1) == -1)
					log_warn("cannot write '%s'", note);
				close(fd);
			}
			if (rename(part, final) == 0)
				log_warnx("uftrace: '%s' kept as incomplete: "
				    "%s", final, "tdlisten stopped before "
				    "the run ended");
			free(note);
			free(part);
			free(final);
		}
		closedir(host);
		free(hostdir);
	}
	closedir(top);
}

int
uftrace_start(struct event_base *base, const struct listener_config *cfg,
    const char *port, const char *bind_addr)
{
	struct server_tcp how = {
		.opt = "--uftrace-bind",
		.fail = "cannot listen for uftrace",
		.ok = "listening for uftrace record --host",
		.tail = " (INSECURE: plain TCP, no authentication)",
		.backlog = 64,
		.cb = uf_accept_cb,
	};
	int n;

	uf_cfg = cfg;
	if (bind_addr == NULL)
		bind_addr = "127.0.0.1";
	if ((uf_pause = accept_pause_new(base, "uftrace port", NULL,
	    NULL)) == NULL)
		fatalx("uftrace port: out of memory");
	how.pause = uf_pause;
	/* runs an earlier tdlisten left open are settled before we listen */
	uf_recover(cfg);
	n = server_listen_tcp(base, bind_addr, port, &how, uf_lev,
	    UF_MAX_LISTENERS);
	if (n == -1)
		return -1;
	uf_nlev = n;
	return 0;
}

void
uftrace_set_done(void (*cb)(const struct output_done *, void *), void *arg)
{
	uf_done.cb = cb;
	uf_done.arg = arg;
}

void
uftrace_shutdown(void)
{
	int i;

	for (i = 0; i < uf_nlev; i++)
		evconnlistener_free(uf_lev[i]);
	uf_nlev = 0;
	accept_pause_free(uf_pause);
	uf_pause = NULL;
	client_shutdown(CLIENT_UFTRACE);
}
