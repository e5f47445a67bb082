/*
 * seedgen-standby.c: the seeds of fuzz-standby (tests/fuzz/mkseeds.sh):
 * seedgen-standby DIR writes the same bytes every time.  Listener side
 * (first byte even): standby agents that say STANDBY, are asked to start
 * and stop, answer READY, STARTED, REFUSED, FINISHED, hang up, or come
 * twice with one identity.  Agent side (first byte odd): a policy line
 * and a collector's START (allowed, and refused for each of the policy's
 * reasons), STOP and GO.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tdproto.h"
#include "fuzz.h"

/* fuzz-standby.c's actions (enum fuzz_sb_action) */
enum { NOTHING, START_ALL, START_ONE, STOP_ALL, STOP_NAME, LIST, FORGET,
    HANGUP };

static struct td_buf seed;

static void
save(const char *dir, const char *name)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL ||
	    fwrite(seed.data, 1, seed.len, fp) != seed.len || fclose(fp) != 0) {
		fprintf(stderr, "seedgen-standby: %s: %s\n", path,
		    strerror(errno));
		exit(1);
	}
	td_buf_reset(&seed);
}

static void
add(const void *p, size_t n)
{
	FUZZ_CHECK(td_buf_add(&seed, p, n) == 0);
}

/* The next segment: connection conn, after the asker's action. */
static void
seg(int conn, int action)
{
	uint8_t b = (uint8_t)(conn << 3 | action);

	add(FUZZ_CONN_SEP, FUZZ_CONN_SEP_LEN);
	add(&b, 1);
}

static void
standby(const char *host, const char *kernel, const char *recording)
{
	struct td_standby s;

	memset(&s, 0, sizeof s);
	s.version = TD_STANDBY_VERSION;
	s.ncpus = 4;
	snprintf(s.host, sizeof s.host, "%s", host);
	snprintf(s.kernel, sizeof s.kernel, "%s", kernel);
	snprintf(s.clocks, sizeof s.clocks, "local global [mono] x86-tsc");
	snprintf(s.recording, sizeof s.recording, "%s", recording);
	snprintf(s.allow, sizeof s.allow, "sched,irq");
	s.max_buffer = 8192;
	s.max_duration = 3600;
	FUZZ_CHECK(td_msg_pack_standby(&seed, &s) == 0);
}

static void
answer(uint32_t req, uint16_t what, const char *text)
{
	struct td_answer a;

	memset(&a, 0, sizeof a);
	a.req = req;
	a.what = what;
	snprintf(a.text, sizeof a.text, "%s", text);
	FUZZ_CHECK(td_msg_pack_answer(&seed, &a) == 0);
}

static void
keepalive(void)
{
	FUZZ_CHECK(td_frame_header(&seed, TD_MSG_KEEPALIVE, 0, 0) == 0);
}

static void
start(uint32_t req, uint32_t kb, uint32_t secs, const char *name,
    const char *clock, const char *events, const char *filter)
{
	struct td_start *s = calloc(1, sizeof *s);

	FUZZ_CHECK(s != NULL);
	s->req = req;
	s->buffer_kb = kb;
	s->seconds = secs;
	snprintf(s->name, sizeof s->name, "%s", name);
	snprintf(s->clock, sizeof s->clock, "%s", clock);
	snprintf(s->events, sizeof s->events, "%s", events);
	snprintf(s->filter, sizeof s->filter, "%s", filter);
	FUZZ_CHECK(td_msg_pack_start(&seed, s) == 0);
	free(s);
}

static void
listener_seeds(const char *dir)
{
	/* two agents started together: GO to both once both are READY */
	add("\0", 1);
	standby("web1", "6.1.0-13-amd64", "");
	seg(1, NOTHING);
	standby("web2", "6.1.0", "");
	seg(0, START_ALL);
	answer(1, TD_ANSWER_STARTED, "ctl1 pid 100");
	answer(1, TD_ANSWER_READY, "ctl1");
	seg(1, LIST);
	answer(1, TD_ANSWER_STARTED, "ctl1 pid 200");
	answer(1, TD_ANSWER_READY, "ctl1");
	seg(0, LIST);
	keepalive();
	seg(0, STOP_ALL);
	answer(2, TD_ANSWER_FINISHED, "ctl1 exit 0");
	seg(1, NOTHING);
	answer(2, TD_ANSWER_FINISHED, "ctl1 exit 0");
	seg(2, LIST);
	standby("db 1", "6.1 recording=x peer=y", "");
	seg(3, LIST);
	standby("web1-again", "6.1", "");
	save(dir, "listener-start-stop");

	/* one refuses, one never answers (the asker gives up), a hang-up */
	add("\x80", 1);
	standby("a", "6.1", "");
	seg(1, NOTHING);
	standby("b", "6.1", "running");
	seg(2, NOTHING);
	standby("c", "6.1", "");
	seg(0, START_ALL | 0x40);
	answer(1, TD_ANSWER_REFUSED, "event 'x' not allowed");
	seg(2, NOTHING);
	answer(1, TD_ANSWER_STARTED, "rec pid 3");
	seg(0, FORGET);
	answer(1, TD_ANSWER_READY, "rec");
	seg(2, HANGUP);
	seg(1, STOP_NAME);
	answer(2, TD_ANSWER_FINISHED, "rec signal 2");
	seg(0, START_ONE);
	answer(99, TD_ANSWER_READY, "late");
	seg(3, NOTHING);
	standby("d", "6.1", "");
	seg(3, LIST);
	save(dir, "listener-refuse-forget");

	/* frames a standby agent may not send */
	add("\0", 1);
	standby("e", "6.1", "");
	start(1, 0, 0, "", "", "sched", "");
	save(dir, "listener-bad-frame");
}

static void
agent_seeds(const char *dir)
{
	static const char policy[] = "\001sched,irq:irq_handler_*\t4096\t60\t"
	    "local global x86-tsc\n";
	static const struct {
		const char *name;
		uint32_t kb, secs;
		const char *rec, *clock, *events;
	} starts[] = {
		{ "agent-allowed", 1024, 10, "web.1", "global",
		    "sched:sched_switch,sched,irq:irq_handler_entry" },
		{ "agent-event", 0, 0, "", "", "sched,syscalls" },
		{ "agent-event-dash", 0, 0, "", "", "-o" },
		{ "agent-buffer", 8192, 0, "", "", "sched" },
		{ "agent-duration", 0, 61, "", "", "sched" },
		{ "agent-name", 0, 0, "../x", "", "sched" },
		{ "agent-clock", 0, 0, "", "mono", "sched" },
	};
	size_t i;

	for (i = 0; i < sizeof starts / sizeof starts[0]; i++) {
		add(policy, sizeof policy - 1);
		start((uint32_t)i + 1, starts[i].kb, starts[i].secs,
		    starts[i].rec, starts[i].clock, starts[i].events,
		    "prev_pid > 0");
		FUZZ_CHECK(td_msg_pack_go(&seed, (uint32_t)i + 1) == 0);
		FUZZ_CHECK(td_msg_pack_stop(&seed, (uint32_t)i + 2) == 0);
		save(dir, starts[i].name);
	}
	/* the defaults (no flags) */
	add("\001\t\t\t\n", 5);
	start(1, 0, 0, "", "", "sched,irq", "");
	save(dir, "agent-defaults");
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seedgen-standby DIR\n");
		return 2;
	}
	td_buf_init(&seed, 1 << 20);
	listener_seeds(argv[1]);
	agent_seeds(argv[1]);
	td_buf_free(&seed);
	return 0;
}
