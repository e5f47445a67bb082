/*
 * fuzz-control.c: tdlisten's control socket (listener/fleet/control.c) driven
 * with arbitrary bytes from its clients.
 *
 * Nothing faked that can be real: control_start() listens on a real Unix
 * socket in a temporary directory, on a real libevent base run as
 * tdlisten's loop is (a non-blocking pass after each piece); the clients
 * are real sockets connected to it; behind it are FUZZ_CTL_AGENTS real
 * standby sessions (listener/producers/session.c, session-standby.c,
 * standbytab.c), each made by a STANDBY frame, whose START, STOP and GO frames
 * the target reads and answers as tdagent --standby would, on the loop's next
 * turn: agent 0 STARTED then READY (and FINISHED to a STOP), agent 1 REFUSED,
 * agent 2 never (until it hangs up at the end: "lost"). The reload callback is
 * tdlisten's kind (a message, success or failure).
 *
 * The input is up to FUZZ_CTL_CLIENTS clients' byte streams, each after
 * FUZZ_CONN_SEP and one byte b saying how the client before behaves
 * (b % 4): 0 reads as it goes, 1 hangs up at once after its last byte,
 * 2 reads nothing until the end, 3 shuts down its writing side and reads.
 * Bytes go in pieces of 1 + b % 509 (the first client: 64).  Checked:
 * every line a client reads is printable ASCII; it reads no more "." (ends
 * of answers) than the requests it sent lines for; a client that sends
 * only well-formed "list" lines gets one answer each, and a client the
 * listener did not close an answer to each of its requests once its
 * agents are gone (those waited for "lost"); at the end (clients
 * gone, agents gone) no descriptor, no standby entry, nothing left (ASan's
 * leak check: the client's memory is freed).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "budget.h"
#include "buf.h"
#include "client.h"
#include "control.h"
#include "listener.h"
#include "log.h"
#include "session.h"
#include "standbytab.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "fuzz.h"

#define FUZZ_CTL_CLIENTS	4
#define FUZZ_CTL_AGENTS		3
#define FUZZ_CTL_QUEUE		64

/* A standby agent, played by the target. */
struct agent {
	struct session	*s;
	struct td_buf	 out;		/* the listener's frames, unparsed */
	struct td_answer q[FUZZ_CTL_QUEUE];	/* answers for the next turn */
	int		 nq;
	char		 identity[32];
};

/* A control client. */
struct fz_client {
	int		 fd;		/* -1: gone */
	int		 how;		/* b % 4 */
	char		 line[8192];	/* what it read, a line in part */
	size_t		 len;
	int		 requests;	/* newlines sent */
	int		 ends;		/* "." lines read */
	bool		 lists_only;	/* every request "list" */
	bool		 closed;	/* the listener closed it */
};

static struct listener_config cfg;
static struct event_base *base;
static char *dir, *path;
static struct agent agents[FUZZ_CTL_AGENTS];
static bool verbose;

static int
reload_cb(char *msg, size_t len)
{
	static int n;

	snprintf(msg, len, "%s", ++n % 2 ? "nothing changed" :
	    "cannot read the certificate");
	return n % 2 ? 0 : -1;
}

/* The listener's frames to a: answered as tdagent --standby would. */
static void
agent_read(struct agent *a)
{
	struct td_buf *o;
	struct td_frame f;
	struct td_start *st;
	struct td_answer *q;
	uint32_t req;
	size_t pos = 0;
	bool urgent;
	int r, i = (int)(a - agents);

	if (a->s == NULL)
		return;
	o = session_output(a->s, &urgent);
	if (o->len > 0)
		FUZZ_CHECK(td_buf_add(&a->out, o->data, o->len) == 0);
	td_buf_reset(o);
	if (a->out.len == 0)
		return;
	while ((r = td_frame_parse(a->out.data + pos, a->out.len - pos,
	    &f)) == 1) {
		pos += f.total;
		q = a->nq < FUZZ_CTL_QUEUE ? &a->q[a->nq] : NULL;
		switch (f.type) {
		case TD_MSG_WELCOME:
			break;
		case TD_MSG_START:
			FUZZ_CHECK((st = malloc(sizeof *st)) != NULL);
			FUZZ_CHECK(td_msg_unpack_start(&f, st) == 0);
			req = st->req;
			free(st);
			if (i == 2 || q == NULL)
				break;
			q->req = req;
			q->what = i == 0 ? TD_ANSWER_STARTED :
			    TD_ANSWER_REFUSED;
			snprintf(q->text, sizeof q->text, i == 0 ?
			    "rec pid 7" : "event not allowed");
			a->nq++;
			if (i == 0 && a->nq < FUZZ_CTL_QUEUE) {
				q[1] = q[0];
				q[1].what = TD_ANSWER_READY;
				snprintf(q[1].text, sizeof q[1].text, "rec");
				a->nq++;
			}
			break;
		case TD_MSG_STOP:
			FUZZ_CHECK(td_msg_unpack_stop(&f, &req) == 0);
			if (i == 2 || q == NULL)
				break;
			q->req = req;
			q->what = TD_ANSWER_FINISHED;
			snprintf(q->text, sizeof q->text, "rec exit 0");
			a->nq++;
			break;
		case TD_MSG_GO:
			FUZZ_CHECK(td_msg_unpack_go(&f, &req) == 0);
			break;
		default:
			FUZZ_CHECK(!"the listener sent a standby agent an "
			    "unexpected frame");
		}
	}
	FUZZ_CHECK(r == 0);
	memmove(a->out.data, a->out.data + pos, a->out.len - pos);
	a->out.len -= pos;
}

static void
kick_cb(void *arg)
{
	agent_read(arg);
}

static void
gone_cb(void *arg)
{
	(void)arg;
	FUZZ_CHECK(!"a standby session taken over");
}

/* The whole frame p[0..n) from agent a; false: the session ended. */
static bool
agent_send(struct agent *a, const uint8_t *p, size_t n)
{
	enum session_verdict v;
	size_t cost = 0;
	ssize_t used;
	uint8_t *copy;

	FUZZ_CHECK((copy = malloc(n)) != NULL);
	memcpy(copy, p, n);
	used = session_input(a->s, copy, n, timesync_now(CLOCK_MONOTONIC),
	    FUZZ_CTL_AGENTS, &cost, &v);
	free(copy);
	agent_read(a);
	FUZZ_CHECK(used == (ssize_t)n);
	return true;
}

/* The answers queued last turn go in now. */
static bool
agents_answer(void)
{
	struct td_answer q[FUZZ_CTL_QUEUE];
	struct td_buf b;
	bool any = false;
	int i, j, n;

	td_buf_init(&b, TD_FRAME_HEADER + 8 + TD_MAX_ERROR_LEN);
	for (i = 0; i < FUZZ_CTL_AGENTS; i++) {
		n = agents[i].nq;
		memcpy(q, agents[i].q, (size_t)n * sizeof *q);
		agents[i].nq = 0;
		for (j = 0; j < n && agents[i].s != NULL; j++) {
			FUZZ_CHECK(td_msg_pack_answer(&b, &q[j]) == 0);
			agent_send(&agents[i], b.data, b.len);
			td_buf_reset(&b);
			any = true;
		}
	}
	td_buf_free(&b);
	return any;
}

static void
agents_new(void)
{
	struct td_standby st;
	struct td_buf b;
	struct agent *a;
	int i;

	td_buf_init(&b, TD_FRAME_HEADER + TD_MAX_STANDBY_MSG);
	for (i = 0; i < FUZZ_CTL_AGENTS; i++) {
		a = &agents[i];
		memset(a, 0, sizeof *a);
		td_buf_init(&a->out, 1 << 24);
		snprintf(a->identity, sizeof a->identity, "fuzz-ctl-%d", i);
		FUZZ_CHECK((a->s = session_new(&cfg, a->identity,
		    "192.0.2.1:4000", gone_cb, a)) != NULL);
		session_set_kick(a->s, kick_cb, a);
		memset(&st, 0, sizeof st);
		st.version = TD_STANDBY_VERSION;
		st.ncpus = 2;
		snprintf(st.host, sizeof st.host, "host%d", i);
		snprintf(st.kernel, sizeof st.kernel, "6.1 peer=x recording=y");
		snprintf(st.clocks, sizeof st.clocks, "local global");
		snprintf(st.allow, sizeof st.allow, "sched");
		FUZZ_CHECK(td_msg_pack_standby(&b, &st) == 0);
		agent_send(a, b.data, b.len);
		td_buf_reset(&b);
		FUZZ_CHECK(session_phase(a->s) == SESSION_STANDBY);
	}
	td_buf_free(&b);
}

static void
agents_free(void)
{
	int i;

	for (i = 0; i < FUZZ_CTL_AGENTS; i++) {
		if (agents[i].s != NULL) {
			session_lost(agents[i].s, "EOF");
			session_free(agents[i].s);
		}
		td_buf_free(&agents[i].out);
		FUZZ_CHECK(standbytab_count(agents[i].identity) == 0);
	}
}

/* What c can read now: each line checked. */
static void
fz_client_read(struct fz_client *c)
{
	ssize_t n;
	char *nl;

	while (c->fd != -1) {
		n = read(c->fd, c->line + c->len, sizeof c->line - c->len);
		if (n == 0 || (n == -1 && errno != EAGAIN))
			c->closed = true;
		if (n <= 0)
			return;
		if (verbose)
			fprintf(stderr, "client %d read: %.*s", c->fd, (int)n,
			    c->line + c->len);
		c->len += (size_t)n;
		while ((nl = memchr(c->line, '\n', c->len)) != NULL) {
			*nl = '\0';
			for (char *p = c->line; *p != '\0'; p++)
				FUZZ_CHECK(*p >= 0x20 && *p < 0x7f);
			if (strcmp(c->line, ".") == 0)
				FUZZ_CHECK(++c->ends <= c->requests);
			c->len -= (size_t)(nl + 1 - c->line);
			memmove(c->line, nl + 1, c->len);
		}
		/* one line longer than any the listener writes */
		FUZZ_CHECK(c->len < sizeof c->line);
	}
}

/* The loop's turns until nothing moves (the agents answer in between). */
static void
turn(struct fz_client *cl, int n)
{
	int i, k;

	for (k = 0; k < 64; k++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		for (i = 0; i < n; i++)
			if (cl[i].how != 2)
				fz_client_read(&cl[i]);
		if (!agents_answer()) {
			event_base_loop(base, EVLOOP_NONBLOCK);
			for (i = 0; i < n; i++)
				if (cl[i].how != 2)
					fz_client_read(&cl[i]);
			return;
		}
	}
}

static struct fz_client *
fz_client_new(struct fz_client *c, int how)
{
	struct sockaddr_un sun;

	memset(c, 0, sizeof *c);
	c->how = how;
	c->lists_only = true;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	FUZZ_CHECK((c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) != -1);
	FUZZ_CHECK(connect(c->fd, (struct sockaddr *)&sun, sizeof sun) == 0);
	return c;
}

/* c sends p[0..n) in pieces of piece bytes, the loop turning between. */
static void
fz_client_send(struct fz_client *cl, int ncl, struct fz_client *c,
    const uint8_t *p, size_t n, size_t piece)
{
	const uint8_t *q, *line = p;
	size_t k;
	ssize_t w;
	bool full;
	int stuck = 0;

	for (q = p; q < p + n; q++)
		if (*q == '\n') {
			c->requests++;
			if ((size_t)(q - line) != 4 || memcmp(line, "list",
			    4) != 0)
				c->lists_only = false;
			line = q + 1;
		}
	if (line != p + n)
		c->lists_only = false;
	while (n > 0 && c->fd != -1) {
		k = n < piece ? n : piece;
		w = send(c->fd, p, k, MSG_NOSIGNAL);
		if (w == -1) {
			/* closed by the listener, or its buffer full */
			full = errno == EAGAIN;
			FUZZ_CHECK(full || errno == EPIPE ||
			    errno == ECONNRESET);
			turn(cl, ncl);
			/* a listener that reads no more (its answers to
			   this client unread): the client stops writing */
			if (!full || ++stuck > 16)
				break;
			continue;
		}
		stuck = 0;
		p += w;
		n -= (size_t)w;
		turn(cl, ncl);
	}
}

static void
fatal_hook(void)
{
	FUZZ_CHECK(!"fatal() on a control client's input");
}

static void
cleanup(void)
{
	control_free();
	rmdir(dir);
}

static void
setup(void)
{
	char err[256];

	verbose = getenv("FUZZ_VERBOSE") != NULL;
	/* as tdlisten: a client gone makes a write fail, not a signal */
	signal(SIGPIPE, SIG_IGN);
	log_init("tdlisten", verbose ? 2 : -1, 0);
	log_set_fatal_hook(fatal_hook);
	dir = fuzz_tmpdir("fuzz-control");
	FUZZ_CHECK(asprintf(&path, "%s/control.sock", dir) > 0);
	FUZZ_CHECK((base = event_base_new()) != NULL);
	/* as tdlisten.c: the client layer control.c's clients live in */
	client_init(base, &cfg);
	FUZZ_CHECK(control_start(base, path, (uid_t)-1, (gid_t)-1, err,
	    sizeof err) == 0);
	control_set_reload(reload_cb);
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct budget_caps caps = { TD_SESSION_MEM, TD_IDENTITY_MEM,
	    TD_LISTENER_MEM, 1024, TD_FD_RESERVE, 0 };
	static bool once;
	struct fz_client cl[FUZZ_CTL_CLIENTS];
	const uint8_t *sep;
	size_t pos = 0, end, piece = 64;
	int n = 0, i, how = 0, lowfd;

	if (!once) {
		once = true;
		setup();
	}
	lowfd = fuzz_lowest_fd();
	cfg = (struct listener_config){ .dir = "/nonexistent",
	    .insecure = true, .file_version = 7, .max_sessions = 64,
	    .handshake_timeout = 10, .tsync_interval = TD_TSYNC_OFF,
	    .idle_timeout = 60, .max_per_identity = 64,
	    .max_standby_per_identity = 2, .dir_mode = 0700,
	    .file_mode = 0600, .gid = (gid_t)-1 };
	budget_init(&caps);
	agents_new();
	while (n < FUZZ_CTL_CLIENTS) {
		sep = memmem(data + pos, size - pos, FUZZ_CONN_SEP,
		    FUZZ_CONN_SEP_LEN);
		end = sep == NULL ? size : (size_t)(sep - data);
		if (sep != NULL && end + FUZZ_CONN_SEP_LEN < size) {
			how = data[end + FUZZ_CONN_SEP_LEN] % 4;
		} else
			how = 0;
		fz_client_new(&cl[n], how);
		n++;
		fz_client_send(cl, n, &cl[n - 1], data + pos, end - pos, piece);
		if (how == 1) {
			close(cl[n - 1].fd);
			cl[n - 1].fd = -1;
		} else if (how == 3)
			shutdown(cl[n - 1].fd, SHUT_WR);
		turn(cl, n);
		if (sep == NULL || end + FUZZ_CONN_SEP_LEN >= size)
			break;
		piece = 1 + data[end + FUZZ_CONN_SEP_LEN] % 509;
		pos = end + FUZZ_CONN_SEP_LEN + 1;
	}
	/* the silent ones read now: everything answered is there */
	for (i = 0; i < n; i++)
		cl[i].how = 0;
	turn(cl, n);
	for (i = 0; i < n; i++) {
		/* only "list": one answer each, all read by now */
		if (cl[i].fd != -1 && cl[i].lists_only)
			FUZZ_CHECK(cl[i].ends == cl[i].requests);
	}
	/* the agents hang up (those waited for settle), the clients go */
	agents_free();
	turn(cl, n);
	/* each request of a client still there is answered */
	for (i = 0; i < n; i++)
		if (cl[i].fd != -1 && !cl[i].closed)
			FUZZ_CHECK(cl[i].ends == cl[i].requests);
	for (i = 0; i < n; i++)
		if (cl[i].fd != -1) {
			fz_client_read(&cl[i]);
			close(cl[i].fd);
		}
	turn(cl, 0);
	FUZZ_CHECK(fuzz_lowest_fd() == lowfd);
	return 0;
}
