/*
 * testlisten.h: the listener fixture of the producer tests (test-agentconn,
 * test-session, test-recording, test-tcproducer): one directory, one
 * zstd codec, tests/data's sections and pages, the budget and the
 * finished list as tdlisten sets them up, and tdlisten's options as
 * those tests start from them; the fake agent's side of tdproto (HELLO
 * and the six sections, PAGES, END) and a reader of what the listener
 * answered it; a recording finished as a producer finishes it.
 *
 * One fixture a test program: testlisten_setup() in the group's setup,
 * testlisten_teardown() in its teardown.  Every helper fails the running
 * test (cmocka) when something is not as it should be; nothing here
 * fakes a listener function.
 */
#ifndef TD_TESTLISTEN_H
#define TD_TESTLISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "compress.h"
#include "finished.h"
#include "listener.h"
#include "recording.h"
#include "tdproto.h"
#include "testdata.h"

/* What the tests share: the listener's options, its directory, the data. */
struct testlisten {
	struct listener_config	 cfg;	/* the options, a test may change */
	struct testdata_meta	 meta;	/* the sections and pages sent */
	char			*dir;	/* the listener's directory (-d) */
	struct td_codec		*zstd;	/* cfg.codec_ctx */
};

/*
 * The group's setup: logs as prog, a fresh directory, the codec, the
 * data, budget_init() with tdlimits.h's caps, finished_load() and
 * testlisten_config().  NULL if the codec cannot be made.
 */
struct testlisten *testlisten_setup(const char *prog);
/*
 * The group's teardown (cmocka's, state unused): recordings left, the
 * directory removed.  0.
 */
int	testlisten_teardown(void **state);
/*
 * tdlisten's options the tests start from: --insecure, v7 zstd, 8
 * sessions, no time sync, no resume wait, the directory's modes.
 */
void	testlisten_config(void);

/* An agent's HELLO (recording rid, name) and the six sections into in. */
void	testlisten_agent_head(struct td_buf *in, int ncpus, uint64_t rid,
	    const char *name);
/*
 * An agent's PAGES of one CPU into in: count pages from first, their
 * events and pages counted into exp (NULL: a page not to be counted).
 */
void	testlisten_agent_pages(struct td_buf *in, int cpu, unsigned int first,
	    unsigned int count, struct testdata_expect *exp);
/* An agent's END: npages sent on each of ncpus CPUs. */
void	testlisten_agent_end(struct td_buf *in, int ncpus,
	    unsigned int npages);
/*
 * What the listener sent an agent (out): a WELCOME to identity at offset
 * 0 (the first frame; with welcome_first it must be there), ACKs growing
 * within the sent bytes (*nacks of them, nacks may be NULL), and DONE or
 * ERROR as the last frame, decoded into d or err.  Returns the last
 * frame's type, 0 when neither came.
 */
uint16_t testlisten_replies(const struct td_buf *out, const char *identity,
	    bool welcome_first, size_t sent, struct td_done *d,
	    struct td_error *err, int *nacks);

/* A path under the directory (as DONE and struct finished name files). */
char	*testlisten_path(const char *rel);
/* A producer's end: recording_finish() (sent[cpu] pages), then closed. */
void	testlisten_finish(struct recording *r, const uint64_t *sent,
	    int ncpus, struct finished *fin);

#endif
