/*
 * uftrace.c: the producer for `uftrace record --host H --port P` clients
 * (uftrace 0.13's record-to-recv protocol, proto/ufmsg.h).  One
 * bufferevent per client on the listener's loop; the read callback walks
 * a state machine (a message's header, the head of its payload, its body)
 * and streams each body into one file of the run's directory, opened
 * relative to that directory (openat, O_NOFOLLOW) under a name
 * proto/ufmsg.c checked, so nothing a client says can leave it.
 *
 * Unlike uftrace recv (uftrace issue 480), which takes the client's
 * directory name as a path and dies on any malformed message, a client
 * here is only ever given DIR/uftrace-<its address>/<UTC time>/ (the name
 * it sends is logged, never used), every length is capped (message, file,
 * run, files per run: tdlimits.h), and bad input closes that client only:
 * its run is kept as <UTC time>.incomplete with the reason.
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
#include <sys/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "acceptpause.h"
#include "admit.h"
#include "client.h"
#include "listener.h"
#include "output.h"
#include "server.h"
#include "log.h"
#include "recording.h"
#include "registry.h"
#include "tdlimits.h"
#include "ufmsg.h"
#include "uftrace.h"
#include "xmalloc.h"
#include "banned.h"

#define UF_MAX_LISTENERS	4
/* tdagent recordings of the same host named per run (the log's) */
#define UF_MAX_PEERS		8
#define UF_CLOCK_FILE		"tdlisten.clock"
#define UF_INCOMPLETE_FILE	"tdlisten.incomplete"

enum uf_state {
	UF_HEADER,	/* waiting for a message's 8-byte header */
	UF_HEAD,	/* ... for the head of its payload */
	UF_BODY,	/* streaming its body to a file (or skipping it) */
};

/* The collection box's clocks at one moment (ns). */
struct uf_clock {
	int64_t		 mono;
	int64_t		 real;
};

/*
 * One uftrace client and the run it sends: the state machine in a client
 * of the client layer (client.h), which owns the connection, its label,
 * the deadline of its run's name, the list and the slot.
 */
struct uf_client {
	struct client		*cl;
	struct bufferevent	*bev;		/* cl's */
	char			 peer[NI_MAXHOST + NI_MAXSERV + 4];
	char			 addr[NI_MAXHOST];	/* path-safe */
	enum uf_state		 state;
	struct td_uf_hdr	 hdr;
	struct td_uf_msg	 msg;
	uint32_t		 body_left;
	int			 fd;		/* the body's file, -1: skip */
	int			 dirfd;		/* the run's, -1 before
						   DIR_NAME */
	char			*hostdir;	/* DIR/uftrace-<addr> */
	char			*stamp;		/* <UTC time>[.N] */
	uint64_t		 bytes;		/* written for the run */
	uint32_t		 files;
	uint32_t		 skipped;	/* files of no kind */
	bool			 got_info;
	struct uf_clock		 start;
	char			*peers[UF_MAX_PEERS];	/* tdagent files */
	int			 npeers;
	uint64_t		 last_ms;	/* its last bytes (monotonic) */
};

static const struct listener_config	*uf_cfg;
static struct evconnlistener		*uf_lev[UF_MAX_LISTENERS];
static int				 uf_nlev;
static struct accept_pause		*uf_pause;
/* Who hears of the runs put in place (uftrace_set_done()). */
static void	(*uf_done_cb)(const struct output_done *, void *);
static void	*uf_done_arg;

static const char *
uf_label(const struct uf_client *c)
{
	return client_label(c->cl);
}

static int64_t
uf_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Realtime between two monotonic readings: the offset at its midpoint. */
static void
uf_clock_now(struct uf_clock *c)
{
	int64_t m1, m2;

	m1 = uf_ns(CLOCK_MONOTONIC);
	c->real = uf_ns(CLOCK_REALTIME);
	m2 = uf_ns(CLOCK_MONOTONIC);
	c->mono = m1 + (m2 - m1) / 2;
}

/* Write the small text file name into the run's directory: 0 or -1. */
static int
uf_write_text(struct uf_client *c, const char *name, const char *text)
{
	size_t len = strlen(text), off = 0;
	ssize_t n;
	int fd;

	fd = openat(c->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, uf_cfg->file_mode);
	if (fd == -1)
		return -1;
	while (off < len) {
		n = write(fd, text + off, len - off);
		if (n <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	return close(fd);
}

/*
 * The collection box's CLOCK_MONOTONIC and CLOCK_REALTIME when the run
 * began and ended (uftrace's default clock is the traced machine's
 * monotonic one: on the same machine, realtime = mono + offset).
 */
static void
uf_write_clock(struct uf_client *c)
{
	struct uf_clock end;
	char *text;

	uf_clock_now(&end);
	xasprintf(&text,
	    "# tdlisten: the receiving machine's clocks in ns, realtime = "
	    "monotonic + offset\n"
	    "start_monotonic_ns: %lld\nstart_realtime_ns: %lld\n"
	    "start_offset_ns: %lld\n"
	    "end_monotonic_ns: %lld\nend_realtime_ns: %lld\n"
	    "end_offset_ns: %lld\n",
	    (long long)c->start.mono, (long long)c->start.real,
	    (long long)(c->start.real - c->start.mono),
	    (long long)end.mono, (long long)end.real,
	    (long long)(end.real - end.mono));
	if (uf_write_text(c, UF_CLOCK_FILE, text) == -1)
		log_warn("%s: cannot write %s", uf_label(c), UF_CLOCK_FILE);
	free(text);
}

/* registry_each(): note an open tdagent recording of the same host. */
static void
uf_peer_cb(void *rec, void *arg)
{
	struct uf_client *c = arg;
	const struct recording_params *p = recording_params(rec);
	const char *path = recording_path(rec);
	int i;

	if (strcmp(p->clock, "mono") != 0 || path == NULL)
		return;
	for (i = 0; i < c->npeers; i++)
		if (strcmp(c->peers[i], path) == 0)
			return;
	if (c->npeers < UF_MAX_PEERS)
		c->peers[c->npeers++] = xstrdup(path);
}

/*
 * The tdagent recordings of this host (its identity is the address, as
 * with --insecure) on the mono clock that are open when the run starts
 * or ends: they cover part of the run's interval.
 */
static void
uf_find_peers(struct uf_client *c)
{
	registry_each(c->addr, uf_peer_cb, c);
}

static void
uf_log_peers(struct uf_client *c, const char *dir)
{
	int i;

	for (i = 0; i < c->npeers; i++)
		log_info("%s: tdagent recording '%s' of the same host (clock "
		    "mono) covers the interval of '%s'", uf_label(c), c->peers[i],
		    dir);
}

static void
uf_body_close(struct uf_client *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
}

/*
 * Put the run's directory in place: as <stamp> when complete, else as
 * <stamp>.incomplete with why in its tdlisten.incomplete.
 */
static void
uf_run_end(struct uf_client *c, const char *why)
{
	char *part, *final, *text;

	uf_body_close(c);
	if (c->dirfd == -1)
		return;
	uf_write_clock(c);
	if (why != NULL) {
		xasprintf(&text, "%s\n", why);
		if (uf_write_text(c, UF_INCOMPLETE_FILE, text) == -1)
			log_warn("%s: cannot write %s", uf_label(c),
			    UF_INCOMPLETE_FILE);
		free(text);
	}
	close(c->dirfd);
	c->dirfd = -1;
	uf_find_peers(c);
	xasprintf(&part, "%s/%s.part", c->hostdir, c->stamp);
	xasprintf(&final, "%s/%s%s", c->hostdir, c->stamp,
	    why != NULL ? ".incomplete" : "");
	if (rename(part, final) == -1) {
		log_warn("%s: cannot rename '%s' to '%s'", uf_label(c), part,
		    final);
		free(final);
		final = part;
		part = NULL;
	}
	if (why == NULL)
		log_info("%s: wrote '%s' (%u files, %llu bytes%s)", uf_label(c),
		    final, c->files, (unsigned long long)c->bytes,
		    c->skipped ? ", files of no kind skipped" : "");
	else
		log_warnx("%s: kept '%s' as incomplete (%u files, %llu bytes): "
		    "%s", uf_label(c), final, c->files,
		    (unsigned long long)c->bytes, why);
	uf_log_peers(c, final);
	if (part != NULL && uf_done_cb != NULL) {
		struct output_done d;

		d.path = final;
		d.complete = why == NULL;
		d.producer = "uftrace";
		d.identity = strrchr(c->hostdir, '/') + 1;
		d.name = "";
		uf_done_cb(&d, uf_done_arg);
	}
	free(part);
	free(final);
}

/* The one function that frees a client: its run ends with why. */
static void
uf_close(struct uf_client *c, const char *why)
{
	if (why != NULL && c->dirfd == -1)
		log_warnx("%s: closed: %s", uf_label(c), why);
	uf_run_end(c, why);
	client_free(c->cl);
}

/* The client layer's free hook: what the run's end left. */
static void
uf_free_cb(void *arg)
{
	struct uf_client *c = arg;
	int i;

	for (i = 0; i < c->npeers; i++)
		free(c->peers[i]);
	free(c->hostdir);
	free(c->stamp);
	free(c);
}

/*
 * SEND_DIR_NAME: make DIR/uftrace-<addr>/<UTC time>[.N].part, a name
 * whose final and incomplete forms are free too.  0, or -1 with err.
 */
static int
uf_run_begin(struct uf_client *c, char *err, size_t errlen)
{
	char stamp[32], *part, *a, *b;
	struct stat st;
	struct tm tm;
	time_t now;
	int i, e;

	xasprintf(&c->hostdir, "%s/uftrace-%s", uf_cfg->dir, c->addr);
	if (output_hostdir(uf_cfg, c->hostdir) == -1) {
		snprintf(err, errlen, "cannot create '%s': %s", c->hostdir,
		    strerror(errno));
		return -1;
	}
	uf_clock_now(&c->start);
	now = time(NULL);
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	for (i = 0; i < 1000; i++) {
		free(c->stamp);
		if (i == 0)
			c->stamp = xstrdup(stamp);
		else
			xasprintf(&c->stamp, "%s.%d", stamp, i);
		xasprintf(&part, "%s/%s.part", c->hostdir, c->stamp);
		xasprintf(&a, "%s/%s", c->hostdir, c->stamp);
		xasprintf(&b, "%s/%s.incomplete", c->hostdir, c->stamp);
		e = 0;
		if (lstat(a, &st) == 0 || lstat(b, &st) == 0)
			e = EEXIST;
		else if (mkdir(part, uf_cfg->dir_mode) == -1)
			e = errno;
		free(a);
		free(b);
		if (e == 0) {
			c->dirfd = open(part, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			e = c->dirfd == -1 ? errno : 0;
			if (e != 0)
				rmdir(part);
		}
		if (e != EEXIST) {
			if (e != 0)
				snprintf(err, errlen, "cannot create '%s': %s",
				    part, strerror(e));
			free(part);
			return e == 0 ? 0 : -1;
		}
		free(part);
	}
	snprintf(err, errlen, "no free name in '%s'", c->hostdir);
	return -1;
}

/*
 * The head of a message is in: check it against the run (order, caps)
 * and open the file its body goes to.  0, 1 when the run ended (END), or
 * -1 with err.
 */
static int
uf_message(struct uf_client *c, char *err, size_t errlen)
{
	struct td_uf_msg *m = &c->msg;
	struct stat st;
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;

	if ((m->type == TD_UF_DIR_NAME) != (c->dirfd == -1)) {
		snprintf(err, errlen, "%s %s SEND_DIR_NAME",
		    td_ufmsg_type_name(m->type), c->dirfd == -1 ?
		    "before" : "after");
		return -1;
	}
	switch (m->kind) {
	case TD_UF_K_NONE:
		if (m->type == TD_UF_END)
			return 1;
		if (uf_run_begin(c, err, errlen) == -1)
			return -1;
		log_info("%s: run of '%s' (plain TCP, unauthenticated) into "
		    "'%s/%s.part'", uf_label(c), m->dir, c->hostdir, c->stamp);
		uf_find_peers(c);
		return 0;
	case TD_UF_K_OTHER:
		if (c->skipped++ == 0)
			log_info("%s: '%s' is no file of a uftrace data "
			    "directory: skipped", uf_label(c), m->name);
		c->fd = -1;
		return 0;
	default:
		break;
	}
	if (c->bytes + m->body_len + (m->kind == TD_UF_K_INFO ?
	    TD_UF_INFO_HEADER : 0) > TD_UF_MAX_RUN) {
		snprintf(err, errlen, "run over %llu bytes",
		    (unsigned long long)TD_UF_MAX_RUN);
		return -1;
	}
	c->fd = openat(c->dirfd, m->name, flags, uf_cfg->file_mode);
	if (c->fd == -1 && errno == EEXIST && (m->kind == TD_UF_K_TASK_DATA ||
	    m->kind == TD_UF_K_KERNEL_DATA || m->kind == TD_UF_K_PERF_DATA)) {
		/* data files grow buffer by buffer */
		c->fd = openat(c->dirfd, m->name, O_WRONLY | O_APPEND |
		    O_NOFOLLOW | O_CLOEXEC);
		if (c->fd != -1 && fstat(c->fd, &st) == 0 &&
		    (uint64_t)st.st_size + m->body_len > TD_UF_MAX_FILE) {
			snprintf(err, errlen, "'%s' over %llu bytes", m->name,
			    (unsigned long long)TD_UF_MAX_FILE);
			uf_body_close(c);
			return -1;
		}
	} else if (c->fd != -1 && ++c->files > TD_UF_MAX_FILES) {
		snprintf(err, errlen, "more than %u files", TD_UF_MAX_FILES);
		uf_body_close(c);
		return -1;
	}
	if (c->fd == -1) {
		if (errno == EEXIST)
			snprintf(err, errlen, "'%s' sent twice", m->name);
		else
			snprintf(err, errlen, "cannot create '%s': %s",
			    m->name, strerror(errno));
		return -1;
	}
	if (m->kind == TD_UF_K_INFO) {
		if (write(c->fd, m->info, sizeof m->info) !=
		    (ssize_t)sizeof m->info) {
			snprintf(err, errlen, "cannot write '%s': %s",
			    m->name, strerror(errno));
			return -1;
		}
		c->bytes += sizeof m->info;
		c->got_info = true;
	}
	return 0;
}

/* Up to n bytes of the body to its file (or dropped): 0 or -1 with err. */
static int
uf_body(struct uf_client *c, struct evbuffer *in, size_t n, char *err,
    size_t errlen)
{
	int w;

	if (c->fd == -1)
		return evbuffer_drain(in, n);
	while (n > 0) {
		w = evbuffer_write_atmost(in, c->fd, (ev_ssize_t)n);
		if (w <= 0) {
			if (w == -1 && errno == EINTR)
				continue;
			snprintf(err, errlen, "cannot write '%s': %s",
			    c->msg.name, w == 0 ? "no room" :
			    strerror(errno));
			return -1;
		}
		n -= (size_t)w;
		c->body_left -= (uint32_t)w;
		c->bytes += (uint64_t)w;
	}
	return 0;
}

/*
 * What arrived: every whole header and head is decoded, every body byte
 * written; the read-ahead bounds what one call writes.  0 to go on, 1 when
 * the run ended, -1 with err.
 */
static int
uf_input(struct uf_client *c, struct evbuffer *in, char *err, size_t errlen)
{
	size_t avail, n;
	long need;
	uint8_t *p;
	int r;

	for (;;) {
		avail = evbuffer_get_length(in);
		switch (c->state) {
		case UF_HEADER:
			if (avail < TD_UF_HEADER)
				return 0;
			p = evbuffer_pullup(in, TD_UF_HEADER);
			if (td_ufmsg_header(p, &c->hdr, err, errlen) == -1)
				return -1;
			evbuffer_drain(in, TD_UF_HEADER);
			c->state = UF_HEAD;
			break;
		case UF_HEAD:
			n = avail < 4 ? avail : 4;
			p = evbuffer_pullup(in, (ev_ssize_t)n);
			need = td_ufmsg_head_need(&c->hdr, p, n, err, errlen);
			if (need == -1)
				return -1;
			if ((size_t)need > avail)
				return 0;
			p = evbuffer_pullup(in, need);
			if (td_ufmsg_head(&c->hdr, p, (size_t)need, &c->msg,
			    err, errlen) == -1)
				return -1;
			evbuffer_drain(in, (size_t)need);
			if ((r = uf_message(c, err, errlen)) != 0)
				return r;
			c->body_left = c->msg.body_len;
			c->state = UF_BODY;
			break;
		case UF_BODY:
			if (c->body_left > 0 && avail == 0)
				return 0;
			n = avail < c->body_left ? avail : c->body_left;
			if (n > 0 && uf_body(c, in, n, err, errlen) == -1)
				return -1;
			if (c->fd == -1)
				c->body_left -= (uint32_t)n;
			if (c->body_left == 0) {
				uf_body_close(c);
				c->state = UF_HEADER;
			}
			break;
		}
	}
}

static void
uf_read_cb(struct bufferevent *bev, void *arg)
{
	struct uf_client *c = arg;
	char err[512];
	int r;

	c->last_ms = uf_ns(CLOCK_MONOTONIC) / 1000000;
	r = uf_input(c, bufferevent_get_input(bev), err, sizeof err);
	if (r == -1)
		uf_close(c, err);
	else if (r == 1) {
		if (!c->got_info)
			uf_close(c, "SEND_END without the info file");
		else
			uf_close(c, NULL);
	}
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

	if (c->dirfd != -1)
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
	uint64_t now = uf_ns(CLOCK_MONOTONIC) / 1000000;
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
	    (unsigned long long)(uf_ns(CLOCK_MONOTONIC) / 1000000 -
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
	c->fd = -1;
	c->dirfd = -1;
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
	c->last_ms = uf_ns(CLOCK_MONOTONIC) / 1000000;
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
	uf_done_cb = cb;
	uf_done_arg = arg;
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
