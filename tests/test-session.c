/*
 * test-session.c: the tdproto producer (listener/producers/session.c) against
 * the real recording, registry, checkpoint and writer, driven as
 * listener/producers/agentconn.c drives it and as tests/fuzz/fuzz-session.c
 * does: a
 * connection's bytes go in as session_want() asks, the output is read after
 * every call, the verdict acted on. Nothing faked.
 *
 *   - three agents stream at once (HELLO, the six sections, PAGES of
 *     real ring-buffer pages, END), their bytes interleaved: each gets
 *     WELCOME and growing ACKs;
 *   - a bad frame in the middle (pages out of sequence; a frame type no
 *     agent sends) closes that session alone, with an ERROR saying why,
 *     its recording kept as NAME.incomplete.dat;
 *   - the good agent goes on: DONE names its file, which libtracecmd
 *     reads with exactly the events sent.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "budget.h"
#include "buf.h"
#include "listener.h"
#include "recording.h"
#include "registry.h"
#include "session.h"
#include "tdproto.h"
#include "testdata.h"
#include "testlisten.h"
#include "timesync.h"

#define NCPUS		2
#define NPAGES		24	/* per CPU */

static struct testlisten *tl;

/* One agent's connection. */
struct agent {
	const char		*identity;
	uint64_t		 rid;
	struct td_buf		 in;	/* what it sends */
	size_t			 pos;	/* taken in by the session */
	struct session		*s;	/* NULL: closed */
	struct td_buf		 out;	/* what the listener sent it */
	struct testdata_expect	 exp;
	enum session_verdict	 verdict;
	size_t			 bad_at;	/* its bad frame, 0: none */
};

static void
gone_cb(void *arg)
{
	(void)arg;
	fail_msg("a session was taken over");
}

/*
 * An agent's whole stream; in the middle, with bad 1 a PAGES frame whose
 * sequence skips one, with bad 2 an ACK (a frame only the listener sends).
 */
static void
agent_init(struct agent *a, const char *identity, uint64_t rid, int bad)
{
	unsigned int n;
	int cpu;

	memset(a, 0, sizeof *a);
	a->identity = identity;
	a->rid = rid;
	a->exp.ncpus = NCPUS;
	td_buf_init(&a->in, 64 << 20);
	td_buf_init(&a->out, 1 << 20);
	testlisten_agent_head(&a->in, NCPUS, rid, identity);
	for (n = 0; n < NPAGES; n += 4) {
		for (cpu = 0; cpu < NCPUS; cpu++)
			testlisten_agent_pages(&a->in, cpu, n, 4, &a->exp);
		if (bad != 0 && n == NPAGES / 2) {
			a->bad_at = a->in.len;
			/* CPU 0's next page is NPAGES / 2 + 4, not + 5 */
			if (bad == 1)
				testlisten_agent_pages(&a->in, 0, n + 5, 1,
				    NULL);
			else
				assert_int_equal(td_msg_pack_ack(&a->in, 1),
				    0);
		}
	}
	testlisten_agent_end(&a->in, NCPUS, NPAGES);
	a->s = session_new(&tl->cfg, identity, "192.0.2.1:4000", gone_cb, a);
	assert_non_null(a->s);
}

static void
agent_free(struct agent *a)
{
	if (a->s != NULL)
		session_free(a->s);
	td_buf_free(&a->in);
	td_buf_free(&a->out);
	testdata_expect_free(&a->exp);
}

/* The session's output goes to the agent. */
static void
flush(struct agent *a)
{
	struct td_buf *o;
	bool urgent;

	o = session_output(a->s, &urgent);
	assert_int_equal(td_buf_add(&a->out, o->data, o->len), 0);
	td_buf_reset(o);
}

/* What agentconn.c does with a verdict that ends the connection. */
static void
verdict(struct agent *a, enum session_verdict v)
{
	const struct td_buf *e;

	if (v == SESSION_GO)
		return;
	a->verdict = v;
	if (v == SESSION_CLOSE || v == SESSION_PAUSE) {
		e = session_error(a->s);
		assert_int_equal(td_buf_add(&a->out, e->data, e->len), 0);
	}
	session_free(a->s);
	a->s = NULL;
}

/*
 * Up to upto bytes of the agent's stream arrive (all: SIZE_MAX), handed
 * over as agentconn_read_cb() does.
 */
static void
feed(struct agent *a, size_t upto)
{
	size_t avail = upto < a->in.len ? upto : a->in.len;
	size_t len, want, n, cost;
	enum session_verdict v;
	int nopen = 2;
	ssize_t used;
	bool more;

	while (a->s != NULL && session_phase(a->s) != SESSION_DONE) {
		len = avail - a->pos;
		want = session_want(a->s, &more);
		if (session_phase(a->s) == SESSION_STREAM) {
			v = session_account(a->s, 256 + len);
			flush(a);
			verdict(a, v);
			if (a->s == NULL)
				return;
		}
		if (len < want || len == 0)
			return;
		n = more ? len : want;
		cost = 0;
		used = session_input(a->s, a->in.data + a->pos, n,
		    timesync_now(CLOCK_MONOTONIC), nopen, &cost, &v);
		if (used > 0)
			a->pos += (size_t)used;
		flush(a);
		if (used == -1) {
			verdict(a, v);
			return;
		}
	}
}

/* The frames the agent got: WELCOME first, ACKs growing, then the last. */
static uint16_t
replies(const struct agent *a, struct td_done *d, struct td_error *err)
{
	return testlisten_replies(&a->out, a->identity, true, a->pos, d, err,
	    NULL);
}

/* The one file in DIR/identity/, which must end in suffix. */
static void
one_file(const char *identity, const char *suffix)
{
	struct dirent *de;
	char dir[1024];
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof dir, "%s/%s", tl->dir, identity);
	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		assert_true(strlen(de->d_name) > strlen(suffix));
		assert_string_equal(de->d_name + strlen(de->d_name) -
		    strlen(suffix), suffix);
	}
	closedir(d);
	assert_int_equal(n, 1);
}

/* Three agents at once; a bad frame closes its own session alone. */
static void
test_three_agents(void **unused)
{
	struct agent a, b, c;
	struct td_done d;
	struct td_error e;
	struct stat st;
	size_t step;
	char *path;

	(void)unused;
	agent_init(&a, "web1", 11, 0);
	agent_init(&b, "web2", 22, 1);
	agent_init(&c, "web3", 33, 2);
	/* interleaved, 10 KiB at a time each */
	for (step = 10240; step < a.in.len + 10240; step += 10240) {
		if (a.s != NULL)
			feed(&a, step);
		if (b.s != NULL)
			feed(&b, step);
		if (c.s != NULL)
			feed(&c, step);
	}
	/* web2: closed at its bad frame, with an ERROR, its file kept */
	assert_null(b.s);
	assert_int_equal(b.verdict, SESSION_CLOSE);
	assert_true(b.pos <= b.bad_at);
	assert_int_equal(replies(&b, &d, &e), TD_MSG_ERROR);
	assert_int_equal(e.code, TD_ERR_FATAL);
	assert_string_equal(e.text, "CPU 0: page 17 where 16 was due");
	assert_null(registry_find("web2", 22));
	one_file("web2", ".incomplete.dat");
	/* web3: closed at the ACK */
	assert_null(c.s);
	assert_int_equal(c.verdict, SESSION_CLOSE);
	assert_int_equal(c.pos, c.bad_at);
	assert_int_equal(replies(&c, &d, &e), TD_MSG_ERROR);
	assert_int_equal(e.code, TD_ERR_FATAL);
	assert_null(registry_find("web3", 33));
	one_file("web3", ".incomplete.dat");
	/* web1: DONE, the file whole */
	assert_non_null(a.s);
	assert_int_equal(session_phase(a.s), SESSION_DONE);
	assert_int_equal(a.pos, a.in.len);
	assert_int_equal(replies(&a, &d, &e), TD_MSG_DONE);
	path = testlisten_path(d.path);
	assert_int_equal(strncmp(d.path, "web1/", 5), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, d.file_size);
	assert_int_equal(a.exp.pages[0], NPAGES);
	testdata_check_libtracecmd(path, &a.exp, &tl->meta);
	one_file("web1", ".dat");
	free(path);
	agent_free(&a);
	agent_free(&b);
	agent_free(&c);
	assert_null(registry_any());
	assert_int_equal(budget_held(), 0);
}

static int
setup(void **unused)
{
	(void)unused;
	tl = testlisten_setup("test-session");
	return tl == NULL ? -1 : 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_three_agents),
	};

	return cmocka_run_group_tests(tests, setup, testlisten_teardown);
}
