/*
 * fuzz-standby.c: the standby frames both ways (docs/tdproto.md
 * "Standby").  The first byte says which way (bit 0):
 *
 * 0, the listener's side: up to FUZZ_SB_CONNS standby agents' byte streams
 * fed to the real listener/producers/session.c (session-standby.c,
 * standbytab.c),
 * as agentconn.c feeds them (what session_want() asks for, a heap copy of
 * exactly
 * those bytes), with a control client's requests (standbytab.h's calls, as
 * control.c makes them) between the pieces. The input is segments, each after
 * FUZZ_CONN_SEP and one byte b (the first segment has none and is connection
 * 0's): connection (b >> 3) % FUZZ_SB_CONNS gets the segment's bytes, after
 * the asker does b & 7 (fuzz_sb_action). Checked: every frame the listener
 * sends parses and unpacks (WELCOME first, then START, STOP, GO, nothing after
 * an ERROR); a START carries the request asked, with a number above every
 * earlier one; a GO goes only to an agent that said READY to that request
 * (never more GOs than READYs); the asker's lines are one printable line each;
 * every agent the asker waits for settles once, no more (all of them by the
 * end); the "list" has the fields it promises and nothing forged; one identity
 * holds at most
 * --max-standby-per-identity entries; at the end no entry, no descriptor
 * is left.
 *
 * 1, the agent's side: standby-agent.c.
 */
#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "buf.h"
#include "listener.h"
#include "log.h"
#include "session.h"
#include "standbytab.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "fuzz.h"

#define FUZZ_SB_CONNS	4
#define FUZZ_SB_MAXREQ	64

void	fuzz_standby_agent(const uint8_t *data, size_t size);
void	fuzz_standby_agent_setup(void);

/* What the asker does before a segment (b & 7). */
enum fuzz_sb_action {
	SB_NOTHING,
	SB_START_ALL,		/* start "*" */
	SB_START_ONE,		/* start the segment's connection's identity */
	SB_STOP_ALL,		/* stop "*", any recording */
	SB_STOP_NAME,		/* stop "*" recording "rec" */
	SB_LIST,		/* list, checked */
	SB_FORGET,		/* the asker gives up (its time is up) */
	SB_HANGUP,		/* the segment's connection goes first */
};

/* One standby agent's connection. */
struct sbconn {
	struct session	*s;
	struct td_buf	 in;		/* its bytes so far */
	size_t		 pos;		/* taken by the session */
	struct td_buf	 out;		/* what the listener sent, unparsed */
	bool		 welcomed, errored, standby, skip;
	uint32_t	 ready[FUZZ_SB_MAXREQ];	/* READY answers per req */
	uint32_t	 gos[FUZZ_SB_MAXREQ];	/* GOs per req */
	char		 identity[32];
};

static struct listener_config cfg;
static struct sbconn conns[FUZZ_SB_CONNS];
static struct standbytab_reply asker;
static int waited;		/* agents the asker waits for */
static int settled;
static uint32_t last_req;	/* the highest request a START carried */
static uint32_t req_base;	/* the request before this input's first */
static struct td_start asked;	/* the last START asked */
static bool verbose;

static void
asker_line(void *arg, const char *text)
{
	const unsigned char *p;

	(void)arg;
	if (verbose)
		fprintf(stderr, "asker: %s\n", text);
	for (p = (const unsigned char *)text; *p != '\0'; p++)
		FUZZ_CHECK(*p >= 0x20 && *p < 0x7f);
}

static void
asker_settle(void *arg)
{
	(void)arg;
	settled++;
	FUZZ_CHECK(settled <= waited);
}

/* The listener's frames to c so far: parsed, unpacked, checked. */
static void
check_output(struct sbconn *c)
{
	struct td_frame f;
	struct td_welcome w;
	struct td_start *st;
	struct td_error e;
	uint32_t req;
	size_t pos = 0;
	int r;

	if (c->out.len == 0)
		return;
	while ((r = td_frame_parse(c->out.data + pos, c->out.len - pos,
	    &f)) == 1) {
		FUZZ_CHECK(!c->errored);
		if (f.type != TD_MSG_ERROR && f.type != TD_MSG_WELCOME)
			FUZZ_CHECK(c->welcomed);
		switch (f.type) {
		case TD_MSG_WELCOME:
			FUZZ_CHECK(!c->welcomed);
			FUZZ_CHECK(td_msg_unpack_welcome(&f, &w) == 0);
			c->welcomed = true;
			break;
		case TD_MSG_ERROR:
			FUZZ_CHECK(td_msg_unpack_error(&f, &e) == 0);
			c->errored = true;
			break;
		case TD_MSG_START:
			FUZZ_CHECK(c->standby);
			FUZZ_CHECK((st = malloc(sizeof *st)) != NULL);
			FUZZ_CHECK(td_msg_unpack_start(&f, st) == 0);
			/* several agents of one request: the same number */
			FUZZ_CHECK(st->req >= last_req);
			last_req = st->req;
			FUZZ_CHECK(strcmp(st->events, asked.events) == 0 &&
			    strcmp(st->name, asked.name) == 0 &&
			    st->buffer_kb == asked.buffer_kb &&
			    st->seconds == asked.seconds);
			free(st);
			break;
		case TD_MSG_STOP:
			FUZZ_CHECK(c->standby);
			FUZZ_CHECK(td_msg_unpack_stop(&f, &req) == 0);
			break;
		case TD_MSG_GO:
			FUZZ_CHECK(c->standby);
			FUZZ_CHECK(td_msg_unpack_go(&f, &req) == 0);
			/* only after its READY to that request */
			req %= FUZZ_SB_MAXREQ;
			FUZZ_CHECK(++c->gos[req] <= c->ready[req]);
			break;
		default:
			FUZZ_CHECK(!"the listener sent an unexpected frame");
		}
		pos += f.total;
	}
	FUZZ_CHECK(r == 0);
	memmove(c->out.data, c->out.data + pos, c->out.len - pos);
	c->out.len -= pos;
}

static void
collect(struct sbconn *c)
{
	struct td_buf *out;
	bool urgent;

	if (c->s == NULL)
		return;
	out = session_output(c->s, &urgent);
	if (out->len > 0)
		FUZZ_CHECK(td_buf_add(&c->out, out->data, out->len) == 0);
	td_buf_reset(out);
	check_output(c);
}

/* A START or STOP queued to c (standbytab.c's send, through the session). */
static void
kick_cb(void *arg)
{
	collect(arg);
}

static void
gone_cb(void *arg)
{
	(void)arg;
	FUZZ_CHECK(!"a standby session taken over");
}

/* The connection ends (agentconn.c's agentconn_free()). */
static void
conn_end(struct sbconn *c, enum session_verdict v)
{
	const struct td_buf *e;

	if (c->s == NULL)
		return;
	if (v == SESSION_CLOSE || v == SESSION_PAUSE) {
		e = session_error(c->s);
		if (e->len > 0)
			FUZZ_CHECK(td_buf_add(&c->out, e->data, e->len) == 0);
	}
	collect(c);
	if (v == SESSION_GO || v == SESSION_PAUSE)
		session_lost(c->s, v == SESSION_GO ? "EOF" : NULL);
	collect(c);
	session_free(c->s);
	c->s = NULL;
}

/* Whether the stream's first frame is a HELLO (fuzz-session's). */
static bool
hello_first(const struct sbconn *c)
{
	struct td_frame f;

	return td_frame_parse(c->in.data, c->in.len, &f) == 1 &&
	    f.type == TD_MSG_HELLO;
}

/*
 * The agent's ANSWERs in p[0..n), before the session takes them: their
 * request numbers count from this input's first (req_base), as if
 * tdlisten had started with it (standbytab.c numbers requests from 1, once
 * per process), so an input does the same alone as among others; their
 * READYs are counted.
 */
static void
answers_in(struct sbconn *c, uint8_t *p, size_t n)
{
	struct td_frame f;
	struct td_answer a;
	size_t pos = 0;
	uint32_t req;

	while (td_frame_parse(p + pos, n - pos, &f) == 1) {
		if (f.type == TD_MSG_ANSWER && f.len >= 4) {
			memcpy(&req, p + pos + TD_FRAME_HEADER, 4);
			req = be32toh(req);
			if (req != 0)
				req = htobe32(req + req_base);
			memcpy(p + pos + TD_FRAME_HEADER, &req, 4);
		}
		if (f.type == TD_MSG_ANSWER && td_msg_unpack_answer(&f,
		    &a) == 0 && a.what == TD_ANSWER_READY)
			c->ready[a.req % FUZZ_SB_MAXREQ]++;
		pos += f.total;
	}
}

/* What agentconn.c does with the bytes that arrived. */
static void
conn_read(struct sbconn *c)
{
	enum session_verdict v;
	size_t len, want, n, cost;
	ssize_t used;
	uint8_t *p;
	bool more;

	/* a recording's session is fuzz-session's: not opened here */
	if (c->s != NULL && session_phase(c->s) == SESSION_HELLO &&
	    hello_first(c))
		c->skip = true;
	while (c->s != NULL && !c->skip) {
		len = c->in.len - c->pos;
		want = session_want(c->s, &more);
		if (len < want || len == 0)
			return;
		n = more ? len : want;
		FUZZ_CHECK((p = malloc(n)) != NULL);
		memcpy(p, c->in.data + c->pos, n);
		cost = 0;
		answers_in(c, p, n);
		used = session_input(c->s, p, n,
		    timesync_now(CLOCK_MONOTONIC), FUZZ_SB_CONNS, &cost, &v);
		FUZZ_CHECK(used <= (ssize_t)n);
		if (used > 0)
			c->pos += (size_t)used;
		free(p);
		if (session_phase(c->s) == SESSION_STANDBY)
			c->standby = true;
		FUZZ_CHECK(session_phase(c->s) != SESSION_STREAM);
		collect(c);
		if (used == -1) {
			conn_end(c, v);
			return;
		}
		if (used == 0 && session_want(c->s, &more) <= want)
			return;
	}
}

/* The "list": the fields it promises, and nothing forged. */
static void
check_list(void)
{
	static const char *const keys[] = { "host=", "state=", "cpus=",
	    "kernel=", "clocks=", "recording=", "peer=", "allow=",
	    "max-buffer=", "max-duration=", "armed=" };
	/* an armed agent's (the flight recorder's), in this order */
	static const char *const armed[] = { "armed-since=", "ring=",
	    "window=" };
	size_t a;
	struct td_buf out;
	char *line, *save, *w, *ws;
	size_t k;
	int lines = 0, i, per[FUZZ_SB_CONNS] = { 0 };

	td_buf_init(&out, 1 << 20);
	standbytab_list(&out);
	FUZZ_CHECK(td_buf_add(&out, "", 1) == 0);
	for (line = strtok_r((char *)out.data, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		lines++;
		if ((w = strstr(line, " refused=")) != NULL)
			*w = '\0';
		w = strtok_r(line, " ", &ws);
		FUZZ_CHECK(w != NULL && strcmp(w, "agent") == 0);
		FUZZ_CHECK((w = strtok_r(NULL, " ", &ws)) != NULL);
		for (i = 0; i < FUZZ_SB_CONNS; i++)
			if (strcmp(w, conns[i].identity) == 0)
				per[i]++;
		for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
			w = strtok_r(NULL, " ", &ws);
			FUZZ_CHECK(w != NULL &&
			    strncmp(w, keys[k], strlen(keys[k])) == 0);
		}
		for (a = 0; (w = strtok_r(NULL, " ", &ws)) != NULL; a++) {
			while (a < sizeof armed / sizeof armed[0] &&
			    strncmp(w, armed[a], strlen(armed[a])) != 0)
				a++;
			FUZZ_CHECK(a < sizeof armed / sizeof armed[0]);
		}
	}
	td_buf_free(&out);
	for (i = 0, k = 0; i < FUZZ_SB_CONNS; i++) {
		k += conns[i].s != NULL && session_phase(conns[i].s) ==
		    SESSION_STANDBY;
		FUZZ_CHECK(per[i] <= cfg.max_standby_per_identity ||
		    strcmp(conns[i].identity, conns[0].identity) == 0);
		FUZZ_CHECK(standbytab_count(conns[i].identity) <=
		    cfg.max_standby_per_identity);
	}
	FUZZ_CHECK((size_t)lines == k);
}

/* The asker's request b & 7, about connection c. */
static void
act(int b, struct sbconn *c)
{
	int n = -1;

	memset(&asked, 0, sizeof asked);
	snprintf(asked.events, sizeof asked.events, "sched,irq:*");
	asked.buffer_kb = 1024;
	asked.seconds = (uint32_t)b;
	switch (b & 7) {
	case SB_START_ALL:
	case SB_START_ONE:
		if (b & 0x40)
			snprintf(asked.name, sizeof asked.name, "rec");
		n = standbytab_start((b & 7) == SB_START_ALL ? "*" :
		    c->identity, &asked, &asker);
		if (asked.name[0] == '\0')
			FUZZ_CHECK(strncmp(asked.name, "ctl", 3) == 0);
		break;
	case SB_STOP_ALL:
	case SB_STOP_NAME:
		n = standbytab_stop("*", (b & 7) == SB_STOP_ALL ? "" : "rec",
		    &asker);
		break;
	case SB_LIST:
		check_list();
		break;
	case SB_FORGET:
		/* control.c's timer: those not answered settle no more */
		standbytab_forget(&asker, true);
		waited = settled;
		break;
	case SB_HANGUP:
		conn_end(c, SESSION_GO);
		break;
	}
	if (n > 0)
		waited += n;
	FUZZ_CHECK(n <= FUZZ_SB_CONNS);
}

static void
listener_side(const uint8_t *data, size_t size)
{
	struct budget_caps caps = { TD_SESSION_MEM, TD_IDENTITY_MEM,
	    TD_LISTENER_MEM, 1024, TD_FD_RESERVE, 0 };
	const uint8_t *sep;
	size_t pos = 0, end;
	int i, b = -1, lowfd = fuzz_lowest_fd();
	struct sbconn *c;

	cfg = (struct listener_config){ .dir = "/nonexistent", .insecure = true,
	    .file_version = 7, .max_sessions = 64, .handshake_timeout = 10,
	    .tsync_interval = TD_TSYNC_OFF, .resume_wait = 0,
	    .idle_timeout = 60, .max_per_identity = 64,
	    .max_standby_per_identity = 1 + (size > 0 && data[0] & 0x80),
	    .dir_mode = 0700, .file_mode = 0600, .gid = (gid_t)-1 };
	budget_init(&caps);
	asker = (struct standbytab_reply){ asker_line, asker_settle, NULL };
	waited = settled = 0;
	/* a request nobody matches: its number is this input's base */
	memset(&asked, 0, sizeof asked);
	snprintf(asked.events, sizeof asked.events, "sched");
	FUZZ_CHECK(standbytab_start("\001", &asked, &asker) == 0);
	req_base = last_req = asked.req;
	for (i = 0; i < FUZZ_SB_CONNS; i++) {
		c = &conns[i];
		memset(c, 0, sizeof *c);
		td_buf_init(&c->in, 1 << 24);
		td_buf_init(&c->out, 1 << 24);
		/* connections 0 and 3 are one identity */
		snprintf(c->identity, sizeof c->identity, "fuzz-sb-%d", i % 3);
		FUZZ_CHECK((c->s = session_new(&cfg, c->identity,
		    "192.0.2.1:4000", gone_cb, c)) != NULL);
		session_set_kick(c->s, kick_cb, c);
	}
	while (pos < size) {
		sep = memmem(data + pos, size - pos, FUZZ_CONN_SEP,
		    FUZZ_CONN_SEP_LEN);
		end = sep == NULL ? size : (size_t)(sep - data);
		c = &conns[b == -1 ? 0 : (b >> 3) % FUZZ_SB_CONNS];
		if (b != -1)
			act(b, c);
		if (c->s != NULL && end > pos) {
			FUZZ_CHECK(td_buf_add(&c->in, data + pos, end - pos) ==
			    0);
			conn_read(c);
		}
		if (sep == NULL || end + FUZZ_CONN_SEP_LEN >= size)
			break;
		b = data[end + FUZZ_CONN_SEP_LEN];
		pos = end + FUZZ_CONN_SEP_LEN + 1;
	}
	check_list();
	/* every agent hangs up: each one waited for settles */
	for (i = 0; i < FUZZ_SB_CONNS; i++)
		conn_end(&conns[i], SESSION_GO);
	FUZZ_CHECK(settled == waited);
	for (i = 0; i < FUZZ_SB_CONNS; i++) {
		FUZZ_CHECK(standbytab_count(conns[i].identity) == 0);
		td_buf_free(&conns[i].in);
		td_buf_free(&conns[i].out);
	}
	standbytab_forget(&asker, false);
	FUZZ_CHECK(fuzz_lowest_fd() == lowfd);
}

static void
fatal_hook(void)
{
	FUZZ_CHECK(!"fatal() on a standby agent's input");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;

	if (!once) {
		once = true;
		verbose = getenv("FUZZ_VERBOSE") != NULL;
		log_init("tdlisten", verbose ? 2 : -1, 0);
		log_set_fatal_hook(fatal_hook);
		fuzz_standby_agent_setup();
	}
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_standby_agent(data + 1, size - 1);
	else
		listener_side(data + 1, size - 1);
	return 0;
}
