/*
 * test-agentconn.c: an agent's connection (listener/producers/agentconn.c)
 * driven
 * as tdlisten drives it: a real event base, client_init() and agentconn_init()
 * as listener/tdlisten.c calls them (--insecure: plain TCP), a loopback
 * listening socket on a port the kernel picks whose accepted sockets go
 * to agentconn_accept() (as server.c hands them over), the tick of tdlisten
 * (agentconn_tick()), and fake agents on the other end, each a bufferevent on
 * the same loop writing frames built with proto/ (td_msg_pack_*) and
 * real ring-buffer pages (testdata.c).  Nothing in listener/ is faked.
 *
 *   - HELLO, the six sections, PAGES and END over the socket give a
 *     WELCOME, growing ACKs and a DONE; the file DONE names holds the
 *     very pages sent (tdread, byte for byte) and the events in them
 *     (libtracecmd);
 *   - a garbage first frame closes that connection alone, with an
 *     ERROR: a good agent connected at the same time finishes;
 *   - a connection that sends nothing is closed at its handshake
 *     deadline (1 s), never a millisecond before;
 *   - --max-sessions 1: a second agent (another address: plain TCP's
 *     identity) is closed at accept while the first is open, and
 *     admitted once the first is gone; one from the first's address
 *     takes the slot kept for resumes and gets an ERROR RETRY at its
 *     HELLO.
 *
 * Each test has its own loop, listening socket, client layer and agentconn.c,
 * freed by its teardown however it ended.
 */
#include <netinet/in.h>
#include <arpa/inet.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "admit.h"
#include "buf.h"
#include "client.h"
#include "clock.h"
#include "agentconn.h"
#include "listener.h"
#include "recording.h"
#include "registry.h"
#include "rotate.h"
#include "session.h"
#include "tdproto.h"
#include "tdread.h"
#include "testdata.h"
#include "testlisten.h"

#define NCPUS		2
#define NPAGES		24	/* per CPU */
#define TICK_MS		250	/* tdlisten's TDLISTEN_TICK_MS */
#define BOUND_MS	20000	/* no wait is longer (ASan, a busy box) */

static struct testlisten *tl;
static struct event_base *base;
static struct evconnlistener *lev;
static struct event *tick;
static uint16_t port;

/* One fake agent: a socket to the listener, on the same loop. */
struct agent {
	const char		*addr;	/* its address: its identity */
	uint64_t		 rid;
	struct bufferevent	*bev;
	struct td_buf		 in;	/* what it sends */
	size_t			 sent;	/* of in, handed to bev */
	struct td_buf		 out;	/* what the listener sent it */
	bool			 eof;	/* the listener closed */
	uint64_t		 start_ms;	/* connected */
	uint64_t		 eof_ms;
	size_t			 head;	/* in: HELLO and the sections */
	size_t			 half;	/* in: up to the middle of the pages */
	struct testdata_expect	 exp;
};

#define MAX_AGENTS	4
static struct agent	agents[MAX_AGENTS];
static int		nagents;

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	agentconn_tick();
	recording_expire();
}

/* server.c's accept callback for TCP: the peer named, to agentconn_accept(). */
static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;
	char host[INET_ADDRSTRLEN], peer[64];

	(void)l;
	(void)salen;
	(void)arg;
	assert_int_equal(sa->sa_family, AF_INET);
	inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
	snprintf(peer, sizeof peer, "%s:%u", host, ntohs(sin->sin_port));
	agentconn_accept(fd, sa, peer, NULL);
}

static void
agent_read_cb(struct bufferevent *bev, void *arg)
{
	struct agent *a = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);

	/* no assert here: a failure must not jump out of the loop */
	if (td_buf_add(&a->out, evbuffer_pullup(in, n), n) == -1)
		abort();
	evbuffer_drain(in, n);
}

static void
agent_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct agent *a = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		agent_read_cb(bev, a);
		a->eof = true;
		a->eof_ms = td_clock_now_ms();
		bufferevent_disable(bev, EV_READ | EV_WRITE);
	}
}

/* An agent's whole stream: HELLO, the six sections, PAGES, END. */
static void
agent_stream(struct agent *a, uint64_t rid)
{
	unsigned int n;
	int cpu;
	char name[32];

	a->rid = rid;
	a->exp.ncpus = NCPUS;
	snprintf(name, sizeof name, "conn%llu", (unsigned long long)rid);
	testlisten_agent_head(&a->in, NCPUS, rid, name);
	a->head = a->in.len;
	for (n = 0; n < NPAGES; n += 4) {
		if (n == NPAGES / 2)
			a->half = a->in.len;
		for (cpu = 0; cpu < NCPUS; cpu++)
			testlisten_agent_pages(&a->in, cpu, n, 4, &a->exp);
	}
	testlisten_agent_end(&a->in, NCPUS, NPAGES);
}

/*
 * A connection to the listener from addr (nothing sent yet); the test's
 * teardown frees it, however the test ended.
 */
static struct agent *
agent_connect(const char *addr)
{
	struct sockaddr_in sin;
	struct agent *a;
	int fd;

	assert_true(nagents < MAX_AGENTS);
	a = &agents[nagents++];
	memset(a, 0, sizeof *a);
	a->addr = addr;
	td_buf_init(&a->in, 64 << 20);
	td_buf_init(&a->out, 1 << 20);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	if (strcmp(addr, "127.0.0.1") != 0) {
		/* another identity: the loopback holds all of 127/8 */
		struct sockaddr_in src;

		memset(&src, 0, sizeof src);
		src.sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, addr, &src.sin_addr), 1);
		assert_int_equal(bind(fd, (struct sockaddr *)&src,
		    sizeof src), 0);
	}
	sin.sin_port = htons(port);
	/* loopback: in the listen queue at once, accepted by the loop */
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(evutil_make_socket_nonblocking(fd), 0);
	a->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(a->bev);
	bufferevent_setcb(a->bev, agent_read_cb, NULL, agent_event_cb, a);
	bufferevent_enable(a->bev, EV_READ | EV_WRITE);
	a->start_ms = td_clock_now_ms();
	return a;
}

/* Send in up to upto bytes (SIZE_MAX: all of it). */
static void
agent_send(struct agent *a, size_t upto)
{
	if (upto > a->in.len)
		upto = a->in.len;
	if (upto <= a->sent)
		return;
	assert_int_equal(bufferevent_write(a->bev, a->in.data + a->sent,
	    upto - a->sent), 0);
	a->sent = upto;
}

static void
agent_free(struct agent *a)
{
	if (a->bev != NULL)
		bufferevent_free(a->bev);
	td_buf_free(&a->in);
	td_buf_free(&a->out);
	testdata_expect_free(&a->exp);
}

/* Run the loop until done(arg), failing after BOUND_MS. */
static void
run_until(bool (*done)(void *), void *arg, const char *what)
{
	uint64_t end = td_clock_now_ms() + BOUND_MS;

	while (!done(arg)) {
		if (td_clock_now_ms() > end)
			fail_msg("not within %d ms: %s", BOUND_MS, what);
		/* never blocks past the next tick */
		event_base_loop(base, EVLOOP_ONCE);
	}
}

static bool
is_closed(void *arg)
{
	return ((struct agent *)arg)->eof;
}

/* Whether the listener sent the agent a frame of type. */
static bool
got(const struct agent *a, uint16_t type)
{
	struct td_frame f;
	size_t at;

	for (at = 0; at < a->out.len; at += f.total) {
		if (td_frame_parse(a->out.data + at, a->out.len - at,
		    &f) != 1)
			return false;
		if (f.type == type)
			return true;
	}
	return false;
}

static bool
got_welcome(void *arg)
{
	return got(arg, TD_MSG_WELCOME) || ((struct agent *)arg)->eof;
}

static bool
got_ack(void *arg)
{
	return got(arg, TD_MSG_ACK) || ((struct agent *)arg)->eof;
}

static bool
no_clients(void *arg)
{
	(void)arg;
	return client_listed(CLIENT_TDPROTO) == 0;
}

/*
 * What the listener sent: WELCOME first, ACKs growing (*nacks of them)
 * within what was sent, then DONE or ERROR, the last frame.  Returns its
 * type.
 */
static uint16_t
replies(const struct agent *a, struct td_done *d, struct td_error *err,
    int *nacks)
{
	return testlisten_replies(&a->out, a->addr, false, a->sent, d, err,
	    nacks);
}

/* tdread's walk of one CPU: each page is the one sent, in order. */
struct pagewalk {
	int		 cpu;
	unsigned int	 n;
};

static int
page_cb(void *arg, const void *page, size_t len)
{
	struct pagewalk *w = arg;
	uint8_t want[TESTDATA_PAGE_SIZE];

	assert_int_equal(len, sizeof want);
	assert_true(w->n < NPAGES);
	testdata_cpu_page(&tl->meta, w->cpu, w->n, want, NULL);
	assert_memory_equal(page, want, sizeof want);
	w->n++;
	return 0;
}

/* The agent got DONE (and some ACKs): its file holds what it sent. */
static void
check_done(struct agent *a, int min_acks)
{
	struct pagewalk w;
	struct td_error e;
	struct td_read *r;
	struct td_done d;
	struct stat st;
	char *path;
	int nacks;

	assert_true(a->eof);
	assert_int_equal(a->sent, a->in.len);
	assert_int_equal(replies(a, &d, &e, &nacks), TD_MSG_DONE);
	assert_true(nacks >= min_acks);
	assert_int_equal(strncmp(d.path, a->addr, strlen(a->addr)), 0);
	assert_int_equal(d.path[strlen(a->addr)], '/');
	path = testlisten_path(d.path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, d.file_size);
	assert_non_null(r = td_read_open(path));
	assert_int_equal(td_read_ncpus(r), NCPUS);
	for (w.cpu = 0; w.cpu < NCPUS; w.cpu++) {
		w.n = 0;
		assert_int_equal(td_read_cpu_pages(r, w.cpu, page_cb, &w), 0);
		assert_int_equal(w.n, NPAGES);
		assert_int_equal(a->exp.pages[w.cpu], NPAGES);
	}
	td_read_close(r);
	testdata_check_libtracecmd(path, &a->exp, &tl->meta);
	assert_null(registry_find(a->addr, a->rid));
	free(path);
}

/* The agent was closed with an ERROR of code saying text, no ACK. */
static void
check_error(struct agent *a, uint32_t code, const char *text)
{
	struct td_error e;
	struct td_done d;
	int nacks;

	assert_true(a->eof);
	assert_int_equal(replies(a, &d, &e, &nacks), TD_MSG_ERROR);
	assert_int_equal(e.code, code);
	assert_non_null(strstr(e.text, text));
	assert_int_equal(nacks, 0);
}

/*
 * One agent: HELLO and sections, then half of the pages; an ACK comes
 * (the tick's); the rest and END: DONE, the file whole.
 */
static void
test_stream(void **unused)
{
	struct agent *a;

	(void)unused;
	a = agent_connect("127.0.0.1");
	agent_stream(a, 1);
	agent_send(a, a->head);
	run_until(got_welcome, a, "WELCOME");
	assert_false(a->eof);
	assert_int_equal(agentconn_sessions(), 1);
	agent_send(a, a->half);
	run_until(got_ack, a, "an ACK");
	assert_false(a->eof);
	agent_send(a, SIZE_MAX);
	run_until(is_closed, a, "DONE and the close");
	check_done(a, 1);
	run_until(no_clients, NULL, "the connection freed");
	assert_int_equal(agentconn_sessions(), 0);
}

/* A garbage first frame: that connection closes, the other finishes. */
static void
test_garbage(void **unused)
{
	static const char junk[] = "GET / HTTP/1.1\r\nHost: tdlisten\r\n\r\n";
	struct agent *bad, *good;

	(void)unused;
	bad = agent_connect("127.0.0.1");
	good = agent_connect("127.0.0.2");
	agent_stream(good, 2);
	assert_int_equal(td_buf_add(&bad->in, junk, sizeof junk - 1), 0);
	/* both in the listener, streaming, before the garbage goes */
	agent_send(good, good->half);
	run_until(got_welcome, good, "WELCOME");
	assert_int_equal(client_listed(CLIENT_TDPROTO), 2);
	agent_send(bad, SIZE_MAX);
	run_until(is_closed, bad, "the garbage's close");
	check_error(bad, TD_ERR_FATAL, "bad frame header");
	assert_false(good->eof);
	assert_int_equal(client_listed(CLIENT_TDPROTO), 1);
	agent_send(good, SIZE_MAX);
	run_until(is_closed, good, "DONE and the close");
	check_done(good, 0);
	run_until(no_clients, NULL, "the connections freed");
}

/*
 * A connection that sends nothing goes at its 1 s deadline, never before
 * (libevent's coarse clock is a tick behind at some phases of it: four
 * connections 1.5 ms apart meet several).
 */
static void
test_deadline(void **unused)
{
	struct agent *a[MAX_AGENTS];
	uint64_t took;
	int i;

	(void)unused;
	tl->cfg.handshake_timeout = 1;
	for (i = 0; i < MAX_AGENTS; i++) {
		a[i] = agent_connect("127.0.0.1");
		event_base_loop(base, EVLOOP_NONBLOCK);	/* accepted */
		usleep(1500);
	}
	for (i = 0; i < MAX_AGENTS; i++) {
		run_until(is_closed, a[i], "the deadline's close");
		took = a[i]->eof_ms - a[i]->start_ms;
		print_message("closed after %llu ms\n",
		    (unsigned long long)took);
		assert_int_equal(a[i]->out.len, 0);
		/* never before; the bound is only there for a busy box */
		assert_true(took >= 1000);
		assert_true(took < 10000);
	}
	run_until(no_clients, NULL, "the connections freed");
}

/*
 * --max-sessions 1: a second agent is refused at accept while the first
 * is open (one from the first's address takes the slot kept for resumes
 * and is told to come back later at its HELLO), and admitted once the
 * first is gone.
 */
static void
test_max_sessions(void **unused)
{
	struct agent *first, *second, *again, *third;

	(void)unused;
	tl->cfg.max_sessions = 1;
	first = agent_connect("127.0.0.1");
	agent_stream(first, 3);
	agent_send(first, first->head);
	run_until(got_welcome, first, "WELCOME");
	assert_false(first->eof);
	assert_int_equal(client_count(CLIENT_NKINDS), 1);
	/* another address: refused at accept, closed without a byte */
	second = agent_connect("127.0.0.3");
	agent_stream(second, 4);
	agent_send(second, second->head);
	run_until(is_closed, second, "the refusal");
	assert_int_equal(second->out.len, 0);
	assert_false(first->eof);
	assert_int_equal(client_count(CLIENT_NKINDS), 1);
	assert_int_equal(client_listed(CLIENT_TDPROTO), 1);
	/* the first's address: a resume slot, a HELLO that is no resume */
	again = agent_connect("127.0.0.1");
	agent_stream(again, 6);
	agent_send(again, again->head);
	run_until(is_closed, again, "the ERROR RETRY");
	check_error(again, TD_ERR_RETRY, SESSION_FULL);
	assert_false(first->eof);
	/* the first goes: its slot is free */
	agent_send(first, SIZE_MAX);
	run_until(is_closed, first, "DONE and the close");
	check_done(first, 0);
	run_until(no_clients, NULL, "the first freed");
	assert_int_equal(client_count(CLIENT_NKINDS), 0);
	third = agent_connect("127.0.0.3");
	agent_stream(third, 5);
	agent_send(third, SIZE_MAX);
	run_until(is_closed, third, "DONE and the close");
	check_done(third, 0);
	run_until(no_clients, NULL, "the third freed");
}

/* The options every test starts from (--insecure, as tdlisten's). */
static void
config(void)
{
	testlisten_config();
	tl->cfg.max_handshakes = 64;
	tl->cfg.max_handshakes_addr = 64;
	tl->cfg.no_hcache = true;
	tl->cfg.no_udp_probes = true;
}

/* Each test: a loop, the client layer and agentconn.c, a listening socket. */
static int
setup_test(void **unused)
{
	struct timeval tv = { 0, TICK_MS * 1000 };
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;

	(void)unused;
	config();
	nagents = 0;
	if ((base = event_base_new()) == NULL)
		return -1;
	/* as tdlisten's main() */
	client_init(base, &tl->cfg);
	recording_set_base(base);
	recording_set_policy(&rotate_policy);
	agentconn_init(base, &tl->cfg, NULL);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lev = evconnlistener_new_bind(base, accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128,
	    (struct sockaddr *)&sin, sizeof sin);
	if (lev == NULL || getsockname(evconnlistener_get_fd(lev),
	    (struct sockaddr *)&sin, &len) == -1)
		return -1;
	port = ntohs(sin.sin_port);
	tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(tick, &tv);
	return 0;
}

/* Whatever the test did, or where it failed: all of it goes. */
static int
teardown_test(void **unused)
{
	int i;

	(void)unused;
	for (i = 0; i < nagents; i++)
		agent_free(&agents[i]);
	nagents = 0;
	agentconn_free_all();
	recording_leave_all();
	event_free(tick);
	evconnlistener_free(lev);
	admit_free();
	event_base_free(base);
	base = NULL;
	return 0;
}

static int
setup(void **unused)
{
	(void)unused;
	signal(SIGPIPE, SIG_IGN);
	tl = testlisten_setup("test-agentconn");
	return tl == NULL ? -1 : 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stream, setup_test,
		    teardown_test),
		cmocka_unit_test_setup_teardown(test_garbage, setup_test,
		    teardown_test),
		cmocka_unit_test_setup_teardown(test_deadline, setup_test,
		    teardown_test),
		cmocka_unit_test_setup_teardown(test_max_sessions, setup_test,
		    teardown_test),
	};

	return cmocka_run_group_tests(tests, setup, testlisten_teardown);
}
