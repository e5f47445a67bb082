/*
 * testlisten.c: the listener fixture the producer tests share (see
 * testlisten.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "log.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "testlisten.h"

static struct testlisten testlisten;

struct testlisten *
testlisten_setup(const char *prog)
{
	struct budget_caps caps = { TD_SESSION_MEM, TD_IDENTITY_MEM,
	    TD_LISTENER_MEM, 1024, TD_FD_RESERVE, 0 };
	struct testlisten *tl = &testlisten;

	log_init(prog, -1, 0);
	tl->dir = testdata_tmpdir();
	tl->zstd = td_codec_new(TD_CODEC_ZSTD, 0);
	if (tl->zstd == NULL)
		return NULL;
	testdata_meta_init(&tl->meta);
	budget_init(&caps);
	finished_load(tl->dir);
	testlisten_config();
	return tl;
}

int
testlisten_teardown(void **state)
{
	struct testlisten *tl = &testlisten;

	(void)state;
	recording_leave_all();
	finished_free();
	testdata_meta_free(&tl->meta);
	td_codec_free(tl->zstd);
	testdata_rmdir(tl->dir);
	free(tl->dir);
	memset(tl, 0, sizeof *tl);
	return 0;
}

void
testlisten_config(void)
{
	struct testlisten *tl = &testlisten;

	tl->cfg = (struct listener_config){ .dir = tl->dir, .insecure = true,
	    .file_version = 7, .codec = TD_CODEC_ZSTD, .max_sessions = 8,
	    .handshake_timeout = 10, .tsync_interval = TD_TSYNC_OFF,
	    .resume_wait = 0, .idle_timeout = 60, .max_per_identity = 64,
	    .max_standby_per_identity = 2, .dir_mode = 0700,
	    .file_mode = 0600, .gid = (gid_t)-1, .codec_ctx = tl->zstd };
}

void
testlisten_agent_head(struct td_buf *in, int ncpus, uint64_t rid,
    const char *name)
{
	const struct td_buf *b;
	struct td_hello h;
	int id;

	memset(&h, 0, sizeof h);
	h.version_min = TD_PROTO_VERSION_MIN;
	h.version_max = TD_PROTO_VERSION;
	h.ncpus = (uint32_t)ncpus;
	h.page_size = TESTDATA_PAGE_SIZE;
	h.long_size = 8;
	h.commit_size = 8;
	h.file_version = 7;
	h.recording_id = rid;
	h.trace_id = 0x7700 + rid;
	snprintf(h.name, sizeof h.name, "%s", name);
	snprintf(h.clock, sizeof h.clock, "local");
	assert_int_equal(td_msg_pack_hello(in, &h), 0);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		b = testdata_meta_section(&testlisten.meta, id);
		assert_int_equal(td_msg_pack_section(in, (uint16_t)id), 0);
		assert_int_equal(td_msg_pack_section_data(in, b->data,
		    b->len), 0);
		assert_int_equal(td_msg_pack_section_end(in), 0);
	}
}

void
testlisten_agent_pages(struct td_buf *in, int cpu, unsigned int first,
    unsigned int count, struct testdata_expect *exp)
{
	uint8_t page[TESTDATA_PAGE_SIZE];
	unsigned int n;

	assert_int_equal(td_msg_pack_pages_head(in, (uint32_t)cpu, count,
	    first, sizeof page), 0);
	for (n = first; n < first + count; n++) {
		testdata_cpu_page(&testlisten.meta, cpu, n, page, exp);
		if (exp != NULL)
			exp->pages[cpu]++;
		assert_int_equal(td_buf_add(in, page, sizeof page), 0);
	}
}

void
testlisten_agent_end(struct td_buf *in, int ncpus, unsigned int npages)
{
	struct td_end *e;
	int cpu;

	e = calloc(1, sizeof *e);
	assert_non_null(e);
	e->ncpus = (uint32_t)ncpus;
	for (cpu = 0; cpu < ncpus; cpu++)
		e->pages[cpu] = npages;
	assert_int_equal(td_msg_pack_end(in, e), 0);
	free(e);
}

uint16_t
testlisten_replies(const struct td_buf *out, const char *identity,
    bool welcome_first, size_t sent, struct td_done *d, struct td_error *err,
    int *nacks)
{
	struct td_welcome w;
	struct td_frame f;
	uint64_t ack = 0, off;
	size_t at;
	int i, acks = 0;

	for (i = 0, at = 0; at < out->len; at += f.total, i++) {
		assert_int_equal(td_frame_parse(out->data + at,
		    out->len - at, &f), 1);
		if (i == 0 && welcome_first)
			assert_int_equal(f.type, TD_MSG_WELCOME);
		if (i == 0 && f.type == TD_MSG_WELCOME) {
			assert_int_equal(td_msg_unpack_welcome(&f, &w), 0);
			assert_string_equal(w.identity, identity);
			assert_int_equal(w.resume_offset, 0);
			continue;
		}
		switch (f.type) {
		case TD_MSG_ACK:
			assert_int_equal(td_msg_unpack_ack(&f, &off), 0);
			assert_true(off > ack && off <= sent);
			ack = off;
			acks++;
			break;
		case TD_MSG_DONE:
			assert_int_equal(td_msg_unpack_done(&f, d), 0);
			assert_int_equal(at + f.total, out->len);
			goto out_last;
		case TD_MSG_ERROR:
			assert_int_equal(td_msg_unpack_error(&f, err), 0);
			assert_int_equal(at + f.total, out->len);
			goto out_last;
		default:
			fail_msg("the listener sent frame type %u", f.type);
		}
	}
	f.type = 0;
out_last:
	if (nacks != NULL)
		*nacks = acks;
	return f.type;
}

char *
testlisten_path(const char *rel)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", testlisten.dir, rel) > 0);
	return p;
}

void
testlisten_finish(struct recording *r, const uint64_t *sent, int ncpus,
    struct finished *fin)
{
	if (recording_finish(r, sent, (uint32_t)ncpus, fin) == -1)
		fail_msg("recording_finish: %s", recording_why(r));
	recording_close(r);
}
