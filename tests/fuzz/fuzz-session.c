/*
 * fuzz-session.c: libFuzzer target for tdlisten's handling of a peer's
 * bytes, end to end, with the real listener code.
 *
 * listener/session.c and listener/output.c are linked as they are; what they
 * need from libevent is replaced by the small fake below, which holds the
 * input in memory, records what the session writes and calls the session's
 * callbacks the way libevent would on a fast network.  The input is the
 * byte stream an agent sends.  It arrives in pieces (1 + size % 4093 bytes
 * each) and the read callback runs whenever the low watermark the session
 * asked for is reached; after each read the write callback runs (the output
 * drained), or for odd pieces only at the end (so that frames after END
 * meet the session before it sent DONE).  When the input is exhausted the
 * peer hangs up (EOF; an
 * input of odd length that never got past HELLO meets the HELLO deadline
 * instead), and a session that sent ERROR is freed by its write callback
 * or, for odd lengths, by its two-second timer.  A session must then be
 * gone: server_session_closed() called, every timer freed.
 *
 * The writer calls of session.c pass through wrappers (ld --wrap) that
 * check tdfile.h's promises and keep a digest of what was handed over
 * (PAGES_Z blocks stored as they came are decompressed for it).
 * listener/checkpoint.c is linked too: checkpoints land beside the
 * recording in the temporary output directory.
 *
 * One input can be several connections of the same agent (protocol v2:
 * resuming), separated by FUZZ_CONN_SEP (fuzz.h) and one byte saying how
 * the connection before it ends (% 5): 0 the agent hangs up (EOF), 1 the
 * idle timeout strikes, 2 it stays open and silent (the next one takes
 * over), 3 tdlisten restarts (session_shutdown_all(), the ERRORs it wrote
 * go out for even lengths, session_free_all(), then session_recover_all()
 * restores what was left from its checkpoint), 4 the
 * agent hangs up and never comes back in time (the resume deadlines
 * expire).  A later connection that starts with a new (not resuming) HELLO
 * once a recording exists ends the input: one recording per input.  Every
 * input has its own identity, so tdlisten's memory of finished recordings
 * never mixes inputs.
 *
 * tdlisten's own settings are taken from the input's first frame when it
 * is a HELLO, so that the fuzzer reaches every writer: file_version 6 gives
 * --file-version 6, anything else 7 with the codec recording_id % 3 (none,
 * zstd, zlib); (recording_id / 3) % 2 == 1 turns time sync off
 * (--tsync-interval -1), else it is 1000 ms; (recording_id / 6) % 2 == 1
 * gives --resume-wait 0 (no resuming), else 600 s.  The HELLO's trace_id,
 * which tdlisten does not use, holds two more knobs: bit 0 runs the
 * checkpoint tick (checkpoint and ACK) after every read, bit 1 sets
 * --quota to 1 + (trace_id >> 32) % 2^24 bytes.
 *
 * Properties, besides "no crash, no leak, no fatal()":
 *   - the writer accepts what tdfile.h says it accepts, and
 *     td_file_has_section() and td_file_cpu_pages() agree with what was
 *     handed over;
 *   - a writer restored from the listener's own checkpoint (resume after a
 *     pause, a restart) comes back, and holds exactly what the last
 *     td_file_checkpoint() described: the digest rolls back to it;
 *   - output_path() stays inside DIR/<identity>/;
 *   - the TIME_SHIFT option session.c builds at END has exactly the layout
 *     trace-cmd reads (peer, flags, CPU count, per CPU count, ts[],
 *     offset[], scaling[], then per CPU frac[]), its DATE and tsync text
 *     are NUL-terminated strings (options the peer sends pass as sent);
 *   - every frame the listener sends parses and unpacks (WELCOME first,
 *     RESUMED exactly when the HELLO asked to resume, nothing after DONE or
 *     ERROR), ACK offsets grow and never pass the bytes that came, and
 *     DONE names the file's real size;
 *   - every connection's slot is given back once, every session is freed
 *     (no bufferevent, no timer left);
 *   - a finished file (complete or .incomplete.dat) is the only file left
 *     and, for v7, opens with tdread and gives back exactly the sections,
 *     options (the first 16) and pages of every CPU handed to the writer;
 *     for v6 too when tdread finds the sections the peer sent (a v6 header
 *     is parsed, so garbage sections make it unreadable: the peer's
 *     problem); without a finished file nothing is left (no checkpoint, no
 *     spool);
 *   - no file descriptor is left open.
 * The output directory is emptied after every input.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "buf.h"
#include "compress.h"
#include "listener.h"
#include "log.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "fuzz.h"

#define MAX_CONNS	8
#define NSECT		(TD_OPT_CMDLINES + 1)
#define MAX_OPTS	16
#define MAX_OUT		(4 * 1024 * 1024)

static bool verbose;
static char *topdir;
static char *hostdir;
static char identity[64];
static unsigned int input_no;

/*
 * The fake libevent: a bufferevent per connection whose input is that
 * connection's part of the fuzz input, shown up to "avail" bytes;
 * evbuffer_pullup() hands out a heap copy of exactly the bytes asked for,
 * so ASan sees a read past them.  Timers run when the target fires them.
 */
struct evbuffer {
	const uint8_t		*data;
	size_t			 size;
	size_t			 avail;
	size_t			 pos;
	uint8_t			*pulled;
	size_t			 pulled_len;
};

struct bufferevent {
	struct evbuffer		 input;
	struct evbuffer		 output;	/* empty: "drained" at once */
	struct td_buf		 out;
	bufferevent_data_cb	 readcb;
	bufferevent_data_cb	 writecb;
	bufferevent_event_cb	 eventcb;
	void			*arg;
	short			 enabled;
	size_t			 low;
	bool			 wrote;
	bool			 freed;
	bool			 resume;	/* its HELLO asks to resume */
	size_t			 hello_len;	/* bytes of that HELLO */
};

struct event {
	event_callback_fn	 cb;
	void			*arg;
	struct event		*next;
	short			 what;
	bool			 added;
};

static struct bufferevent *fake_bev;	/* the connection being fed */
static struct bufferevent *fake_bevs[MAX_CONNS];
static int fake_nbevs;
static struct event *fake_events;
static int fake_nevents;
static int slots_closed;
static struct event_base *fake_base = (struct event_base *)&fake_base;

struct bufferevent *
bufferevent_socket_new(struct event_base *base, evutil_socket_t fd,
    int options)
{
	struct bufferevent *b;

	FUZZ_CHECK(fake_nbevs < MAX_CONNS);
	b = calloc(1, sizeof *b);
	FUZZ_CHECK(b != NULL);
	td_buf_init(&b->out, MAX_OUT);
	fake_bevs[fake_nbevs++] = b;
	fake_bev = b;
	return b;
}

struct bufferevent *
bufferevent_openssl_socket_new(struct event_base *base, evutil_socket_t fd,
    struct ssl_st *ssl, enum bufferevent_ssl_state state, int options)
{
	FUZZ_CHECK(!"the fuzz session is plain TCP");
	return NULL;
}

void
bufferevent_openssl_set_allow_dirty_shutdown(struct bufferevent *bev,
    int allow)
{
}

struct ssl_st *
bufferevent_openssl_get_ssl(struct bufferevent *bev)
{
	return NULL;
}

unsigned long
bufferevent_get_openssl_error(struct bufferevent *bev)
{
	return 0;
}

void
bufferevent_setcb(struct bufferevent *b, bufferevent_data_cb readcb,
    bufferevent_data_cb writecb, bufferevent_event_cb eventcb, void *arg)
{
	FUZZ_CHECK(!b->freed);
	b->readcb = readcb;
	b->writecb = writecb;
	b->eventcb = eventcb;
	b->arg = arg;
}

int
bufferevent_write(struct bufferevent *b, const void *data, size_t size)
{
	FUZZ_CHECK(!b->freed);
	if (td_buf_add(&b->out, data, size) == -1)
		return -1;
	b->wrote = true;
	return 0;
}

int
bufferevent_enable(struct bufferevent *b, short what)
{
	b->enabled |= what;
	return 0;
}

int
bufferevent_disable(struct bufferevent *b, short what)
{
	b->enabled &= ~what;
	return 0;
}

void
bufferevent_free(struct bufferevent *b)
{
	FUZZ_CHECK(!b->freed);
	b->freed = true;
}

int
bufferevent_flush(struct bufferevent *b, short iotype,
    enum bufferevent_flush_mode mode)
{
	FUZZ_CHECK(!b->freed);
	return 0;
}

/*
 * A session that used its turn asks to be read again later: the input left
 * then is not taken (the target's inputs are far below a turn's 8 MiB but
 * for PAGES_Z blocks that expand past it).
 */
void
bufferevent_trigger(struct bufferevent *b, short iotype, int options)
{
	FUZZ_CHECK(!b->freed);
}

struct event_base *
bufferevent_get_base(struct bufferevent *b)
{
	return fake_base;
}

struct evbuffer *
bufferevent_get_input(struct bufferevent *b)
{
	return &b->input;
}

struct evbuffer *
bufferevent_get_output(struct bufferevent *b)
{
	return &b->output;
}

int
bufferevent_set_timeouts(struct bufferevent *b, const struct timeval *r,
    const struct timeval *w)
{
	return 0;
}

void
bufferevent_setwatermark(struct bufferevent *b, short events, size_t low,
    size_t high)
{
	if (events & EV_READ)
		b->low = low;
}

size_t
evbuffer_get_length(const struct evbuffer *in)
{
	return in->avail - in->pos;
}

size_t
evbuffer_get_contiguous_space(const struct evbuffer *in)
{
	return in->avail - in->pos;
}

unsigned char *
evbuffer_pullup(struct evbuffer *in, ev_ssize_t size)
{
	size_t n = size < 0 ? in->avail - in->pos : (size_t)size;

	if (n > in->avail - in->pos)
		return NULL;
	free(in->pulled);
	in->pulled = malloc(n ? n : 1);
	in->pulled_len = n;
	FUZZ_CHECK(in->pulled != NULL);
	memcpy(in->pulled, in->data + in->pos, n);
	return in->pulled;
}

int
evbuffer_drain(struct evbuffer *in, size_t n)
{
	FUZZ_CHECK(n <= in->avail - in->pos);
	in->pos += n;
	free(in->pulled);
	in->pulled = NULL;
	in->pulled_len = 0;
	return 0;
}

struct event *
event_new(struct event_base *base, evutil_socket_t fd, short what,
    event_callback_fn cb, void *arg)
{
	struct event *ev = calloc(1, sizeof *ev);

	FUZZ_CHECK(ev != NULL);
	ev->cb = cb;
	ev->arg = arg;
	ev->what = what;
	ev->next = fake_events;
	fake_events = ev;
	fake_nevents++;
	return ev;
}

int
event_add(struct event *ev, const struct timeval *tv)
{
	ev->added = true;
	return 0;
}

int
event_del(struct event *ev)
{
	ev->added = false;
	return 0;
}

void
event_free(struct event *ev)
{
	struct event **pp;

	for (pp = &fake_events; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == ev) {
			*pp = ev->next;
			free(ev);
			fake_nevents--;
			return;
		}
	}
	FUZZ_CHECK(!"event_free of an unknown event");
}

/* reader.c: the fake input is all there is; nothing more to read. */
void
reader_pump(struct bufferevent *bev, bool big, const char *label)
{
}

bool
reader_big(void)
{
	return false;
}

void
reader_tls(SSL *ssl)
{
}

/* reader.c: a probe's reply goes out as any other output here. */
void
reader_send(struct bufferevent *bev, const void *data, size_t len)
{
	bufferevent_write(bev, data, len);
}

/* server.c: the connections open (for the descriptor budget). */
int
server_sessions(void)
{
	return 1;
}

/* server.c: a connection's slot is free again (once per connection). */
void
server_session_closed(struct session *s)
{
	slots_closed++;
	FUZZ_CHECK(slots_closed <= fake_nbevs);
}

/* log.c: format (so bad arguments show) but print only when verbose. */
static void
fake_log(const char *what, const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (verbose)
		fprintf(stderr, "tdlisten %s: %s\n", what, msg);
}

/* server.c: a TLS session is through its handshake (never: plain TCP). */
int
server_handshake_done(struct session *s, const char *label)
{
	FUZZ_CHECK(!"server_handshake_done without TLS");
	return -1;
}

/* admit.c: a refusal, logged at a bounded rate; here as any line. */
void
admit_refused(enum admit_kind kind, const char *fmt, ...)
{
	va_list ap;

	FUZZ_CHECK((unsigned)kind < ADMIT_R_NKINDS);
	va_start(ap, fmt);
	fake_log("warning", fmt, ap);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fake_log("warning", fmt, ap);
	va_end(ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fake_log("warning", fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fake_log("info", fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fake_log("debug", fmt, ap);
	va_end(ap);
}

/* A peer must never make tdlisten exit. */
void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	FUZZ_CHECK(!"fatal() on peer input");
	abort();
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	FUZZ_CHECK(!"fatalx() on peer input");
	abort();
}

/*
 * What session.c handed to the writer (through the ld --wrap wrappers).
 */
struct cpu {
	uint64_t	 pages;
	uint64_t	 hash;
};

struct opt {
	uint16_t	 id;
	size_t		 len;
	uint64_t	 hash;
};

static struct rec {
	struct td_file		*file;
	char			*path;
	struct td_file_params	 p;
	struct cpu		*cpu;
	bool			 finished;
	int			 open_id;	/* section being written, -1 */
	uint64_t		 open_hash;
	uint64_t		 open_len;
	bool			 sect_done[NSECT];
	uint64_t		 sect_hash[NSECT];
	uint64_t		 sect_len[NSECT];
	struct opt		 opts[MAX_OPTS];
	size_t			 nopts;
	size_t			 alloptions;
} rec;

/* rec as the last td_file_checkpoint() described the writer. */
static struct rec rec_ck;
static bool have_ck;

struct td_file *__real_td_file_create(const char *,
    const struct td_file_params *);
int __real_td_file_section_begin(struct td_file *, enum td_opt);
int __real_td_file_section_write(struct td_file *, const void *, size_t);
int __real_td_file_section_end(struct td_file *);
int __real_td_file_section_cancel(struct td_file *);
int __real_td_file_section_add(struct td_file *, enum td_opt, const void *,
    size_t);
int __real_td_file_add_option(struct td_file *, enum td_opt, const void *,
    size_t);
int __real_td_file_cpu_page(struct td_file *, int, const void *, size_t);
int __real_td_file_cpu_chunk(struct td_file *, int, const void *, size_t,
    uint32_t);
int __real_td_file_finish(struct td_file *);
void __real_td_file_free(struct td_file *);
int __real_td_file_checkpoint(struct td_file *, struct td_buf *);
struct td_file *__real_td_file_restore(const char *, const void *, size_t);
void __real_td_file_release(struct td_file *);

struct td_file *__wrap_td_file_create(const char *,
    const struct td_file_params *);
int __wrap_td_file_section_begin(struct td_file *, enum td_opt);
int __wrap_td_file_section_write(struct td_file *, const void *, size_t);
int __wrap_td_file_section_end(struct td_file *);
int __wrap_td_file_section_cancel(struct td_file *);
int __wrap_td_file_section_add(struct td_file *, enum td_opt, const void *,
    size_t);
int __wrap_td_file_add_option(struct td_file *, enum td_opt, const void *,
    size_t);
int __wrap_td_file_cpu_page(struct td_file *, int, const void *, size_t);
int __wrap_td_file_cpu_chunk(struct td_file *, int, const void *, size_t,
    uint32_t);
int __wrap_td_file_finish(struct td_file *);
void __wrap_td_file_free(struct td_file *);
int __wrap_td_file_checkpoint(struct td_file *, struct td_buf *);
struct td_file *__wrap_td_file_restore(const char *, const void *, size_t);
void __wrap_td_file_release(struct td_file *);

static void
rec_check_sections(void)
{
	int i;

	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		FUZZ_CHECK(!!td_file_has_section(rec.file, i) ==
		    rec.sect_done[i]);
	FUZZ_CHECK(!!td_file_in_section(rec.file) == (rec.open_id != -1));
}

struct td_file *
__wrap_td_file_create(const char *path, const struct td_file_params *p)
{
	struct td_file *f;
	size_t n;
	int i;

	FUZZ_CHECK(rec.file == NULL && rec.path == NULL);
	/* output_path(): DIR/IDENTITY/one-component.dat */
	n = strlen(hostdir);
	FUZZ_CHECK(strncmp(path, hostdir, n) == 0 && path[n] == '/');
	FUZZ_CHECK(strchr(path + n + 1, '/') == NULL);
	FUZZ_CHECK(path[n + 1] != '.' && path[n + 1] != '-');
	FUZZ_CHECK(strlen(path) > n + 5 &&
	    strcmp(path + strlen(path) - 4, ".dat") == 0);

	f = __real_td_file_create(path, p);
	/* session.c checked the HELLO: the writer must take it */
	FUZZ_CHECK(f != NULL);
	rec.file = f;
	FUZZ_CHECK((rec.path = strdup(path)) != NULL);
	rec.p = *p;
	rec.p.clock = strdup(p->clock);
	rec.cpu = calloc(p->ncpus, sizeof *rec.cpu);
	FUZZ_CHECK(rec.cpu != NULL && rec.p.clock != NULL);
	for (i = 0; i < p->ncpus; i++)
		rec.cpu[i].hash = FUZZ_FNV_INIT;
	return f;
}

int
__wrap_td_file_section_begin(struct td_file *f, enum td_opt id)
{
	int ndone = 0, i, r;
	bool want;

	FUZZ_CHECK(f == rec.file);
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		ndone += rec.sect_done[i];
	want = !rec.finished && rec.open_id == -1 &&
	    id >= TD_OPT_HEADER_INFO && id <= TD_OPT_CMDLINES &&
	    !rec.sect_done[id];
	if (rec.p.version == 6)
		want = want && (int)id == TD_OPT_HEADER_INFO + ndone;
	r = __real_td_file_section_begin(f, id);
	FUZZ_CHECK((r == 0) == want);
	if (r == 0) {
		rec.open_id = id;
		rec.open_hash = FUZZ_FNV_INIT;
		rec.open_len = 0;
	}
	rec_check_sections();
	return r;
}

int
__wrap_td_file_section_write(struct td_file *f, const void *p, size_t n)
{
	int r = __real_td_file_section_write(f, p, n);

	FUZZ_CHECK(f == rec.file);
	if (rec.open_id == -1)
		FUZZ_CHECK(r == -1 && errno == EINVAL);
	if (r == 0) {
		rec.open_hash = fuzz_fnv(rec.open_hash, p, n);
		rec.open_len += n;
	}
	return r;
}

int
__wrap_td_file_section_end(struct td_file *f)
{
	int r = __real_td_file_section_end(f);

	FUZZ_CHECK(f == rec.file);
	FUZZ_CHECK((r == 0) == (rec.open_id != -1));
	if (r == 0) {
		rec.sect_done[rec.open_id] = true;
		rec.sect_hash[rec.open_id] = rec.open_hash;
		rec.sect_len[rec.open_id] = rec.open_len;
		rec.open_id = -1;
	}
	rec_check_sections();
	return r;
}

int
__wrap_td_file_section_cancel(struct td_file *f)
{
	int r = __real_td_file_section_cancel(f);

	FUZZ_CHECK(f == rec.file);
	FUZZ_CHECK((r == 0) == (rec.open_id != -1));
	rec.open_id = -1;
	rec_check_sections();
	return r;
}

int
__wrap_td_file_section_add(struct td_file *f, enum td_opt id, const void *p,
    size_t n)
{
	int r;

	FUZZ_CHECK(f == rec.file);
	/* begin, write, end inside tdfile.c are not wrapped: do it here */
	r = __wrap_td_file_section_begin(f, id);
	if (r == 0)
		r = __wrap_td_file_section_write(f, p, n);
	if (r == 0)
		r = __wrap_td_file_section_end(f);
	return r;
}

/* Type of the frame session.c is handling (the one it pulled up). */
static int
current_frame(void)
{
	const uint8_t *p = fake_bev != NULL ? fake_bev->input.pulled : NULL;

	if (p == NULL || fake_bev->input.pulled_len < TD_FRAME_HEADER)
		return -1;
	return p[4] << 8 | p[5];
}

/* TIME_SHIFT as trace-cmd reads it, exactly. */
static void
check_time_shift(const uint8_t *p, size_t n, int ncpus)
{
	uint32_t cpus, *count, i;
	size_t pos = 16;

	FUZZ_CHECK(n >= 16);
	memcpy(&cpus, p + 12, 4);
	FUZZ_CHECK(cpus == (uint32_t)ncpus);
	count = calloc(cpus, sizeof *count);
	FUZZ_CHECK(count != NULL);
	for (i = 0; i < cpus; i++) {
		FUZZ_CHECK(n - pos >= 4);
		memcpy(&count[i], p + pos, 4);
		pos += 4;
		FUZZ_CHECK((n - pos) / 24 >= count[i]);
		pos += 24 * (size_t)count[i];
	}
	for (i = 0; i < cpus; i++) {
		FUZZ_CHECK((n - pos) / 8 >= count[i]);
		pos += 8 * (size_t)count[i];
	}
	free(count);
	if (pos != n)
		fprintf(stderr, "TIME_SHIFT: %zu bytes, the layout needs %zu\n",
		    n, pos);
	FUZZ_CHECK(pos == n);
}

int
__wrap_td_file_add_option(struct td_file *f, enum td_opt id, const void *p,
    size_t n)
{
	/*
	 * the option records of one file share TD_MAX_SECTION_SIZE, and a
	 * writer takes at most TD_MAX_OPTIONS_TOTAL of them (issue 13)
	 */
	size_t all = TD_MAX_SECTION_SIZE < TD_MAX_OPTIONS_TOTAL ?
	    TD_MAX_SECTION_SIZE : TD_MAX_OPTIONS_TOTAL;
	bool want = !rec.finished && id != TD_OPT_DONE &&
	    id != TD_OPT_BUFFER && id != TD_OPT_CPUCOUNT &&
	    !(id >= TD_OPT_STRINGS && id <= TD_OPT_CMDLINES) &&
	    n <= TD_MAX_OPTION_SIZE && rec.alloptions + 6 + n <= all;
	int r;

	FUZZ_CHECK(f == rec.file);
	/* the listener's own options, made at END (the peer's pass as sent) */
	if (current_frame() == TD_MSG_END) {
		if (id == TD_OPT_TIME_SHIFT)
			check_time_shift(p, n, rec.p.ncpus);
		if (id == TD_OPT_DATE || id == TD_OPT_TD_TSYNC)
			FUZZ_CHECK(n >= 1 && memchr(p, '\0', n) ==
			    (const uint8_t *)p + n - 1);
	}
	r = __real_td_file_add_option(f, id, p, n);
	FUZZ_CHECK((r == 0) == want);
	if (r == 0) {
		rec.alloptions += 6 + n;
		if (rec.nopts < MAX_OPTS) {
			rec.opts[rec.nopts].id = id;
			rec.opts[rec.nopts].len = n;
			rec.opts[rec.nopts].hash = fuzz_fnv(FUZZ_FNV_INIT, p,
			    n);
			rec.nopts++;
		}
	}
	return r;
}

int
__wrap_td_file_cpu_page(struct td_file *f, int cpu, const void *p, size_t n)
{
	int r = __real_td_file_cpu_page(f, cpu, p, n);

	FUZZ_CHECK(f == rec.file);
	/* session.c checks the CPU; pages are whole */
	FUZZ_CHECK(cpu >= 0 && cpu < rec.p.ncpus && n == rec.p.page_size);
	FUZZ_CHECK(r == 0);
	rec.cpu[cpu].pages++;
	rec.cpu[cpu].hash = fuzz_fnv(rec.cpu[cpu].hash, p, n);
	FUZZ_CHECK(td_file_cpu_pages(f, cpu) == rec.cpu[cpu].pages);
	return r;
}

/*
 * A PAGES_Z block stored as it came: session.c checked that it gives
 * npages pages; the digest takes those pages.
 */
int
__wrap_td_file_cpu_chunk(struct td_file *f, int cpu, const void *z,
    size_t zlen, uint32_t npages)
{
	int r = __real_td_file_cpu_chunk(f, cpu, z, zlen, npages);
	size_t want = (size_t)npages * rec.p.page_size, i;
	struct td_codec *c;
	uint8_t *pages;

	FUZZ_CHECK(f == rec.file);
	FUZZ_CHECK(cpu >= 0 && cpu < rec.p.ncpus);
	FUZZ_CHECK(npages >= 1 && npages <= TD_CHUNK_PAGES);
	FUZZ_CHECK(td_file_chunk_codec(f) == rec.p.codec &&
	    rec.p.codec != TD_CODEC_NONE);
	FUZZ_CHECK(r == 0);
	c = td_codec_new(rec.p.codec, 0);
	pages = malloc(want);
	FUZZ_CHECK(c != NULL && pages != NULL);
	FUZZ_CHECK(td_codec_decompress(c, z, zlen, pages, want) ==
	    (ssize_t)want);
	for (i = 0; i < npages; i++) {
		rec.cpu[cpu].pages++;
		rec.cpu[cpu].hash = fuzz_fnv(rec.cpu[cpu].hash,
		    pages + i * rec.p.page_size, rec.p.page_size);
	}
	FUZZ_CHECK(td_file_cpu_pages(f, cpu) == rec.cpu[cpu].pages);
	free(pages);
	td_codec_free(c);
	return r;
}

int
__wrap_td_file_finish(struct td_file *f)
{
	int r = __real_td_file_finish(f);

	FUZZ_CHECK(f == rec.file);
	if (r == 0)
		rec.finished = true;
	return r;
}

void
__wrap_td_file_free(struct td_file *f)
{
	FUZZ_CHECK(f == rec.file);
	__real_td_file_free(f);
	rec.file = NULL;
}

/*
 * A checkpoint describes the writer as it is, an open section included
 * (not with zlib: EBUSY): keep a copy of the digest to roll back to when
 * the writer is restored.
 */
int
__wrap_td_file_checkpoint(struct td_file *f, struct td_buf *b)
{
	int r = __real_td_file_checkpoint(f, b);

	FUZZ_CHECK(f == rec.file && !rec.finished);
	if (r == -1) {
		FUZZ_CHECK(errno == EBUSY && rec.open_id != -1 &&
		    rec.p.codec == TD_CODEC_ZLIB && rec.p.version == 7);
		return r;
	}
	FUZZ_CHECK(rec.open_id == -1 || rec.p.codec != TD_CODEC_ZLIB ||
	    rec.p.version == 6);
	free(rec_ck.cpu);
	rec_ck = rec;
	rec_ck.cpu = calloc(rec.p.ncpus, sizeof *rec.cpu);
	FUZZ_CHECK(rec_ck.cpu != NULL);
	memcpy(rec_ck.cpu, rec.cpu, rec.p.ncpus * sizeof *rec.cpu);
	have_ck = true;
	return r;
}

/* The listener's own checkpoint must restore, to exactly what it said. */
struct td_file *
__wrap_td_file_restore(const char *path, const void *state, size_t len)
{
	struct td_file *f = __real_td_file_restore(path, state, len);
	struct cpu *cpu = rec.cpu;
	int i;

	if (f == NULL)
		fprintf(stderr, "td_file_restore '%s': %s\n", path,
		    strerror(errno));
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(rec.file == NULL && have_ck);
	FUZZ_CHECK(strcmp(path, rec.path) == 0);
	memcpy(cpu, rec_ck.cpu, rec.p.ncpus * sizeof *cpu);
	rec = rec_ck;
	rec.cpu = cpu;
	rec.file = f;
	rec_check_sections();
	for (i = 0; i < rec.p.ncpus; i++)
		FUZZ_CHECK(td_file_cpu_pages(f, i) == rec.cpu[i].pages);
	return f;
}

void
__wrap_td_file_release(struct td_file *f)
{
	if (f != NULL) {
		FUZZ_CHECK(f == rec.file && !rec.finished);
		rec.file = NULL;
	}
	__real_td_file_release(f);
}

static void
rec_reset(void)
{
	free(rec.path);
	free(rec.cpu);
	free((char *)(uintptr_t)rec.p.clock);
	free(rec_ck.cpu);
	memset(&rec, 0, sizeof rec);
	memset(&rec_ck, 0, sizeof rec_ck);
	rec.open_id = -1;
	have_ck = false;
}

/*
 * Directories, descriptors, the file left behind.
 */
static void
cleanup_dirs(void)
{
	if (hostdir != NULL)
		rmdir(hostdir);
	if (topdir != NULL)
		rmdir(topdir);
}

static void
setup_dirs(void)
{
	const char *base = getenv("FUZZ_TMPDIR");
	char *t;

	/* scripts/fuzz.sh gives a directory it removes, even after a crash */
	if (base == NULL && access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	if (base == NULL)
		base = getenv("TMPDIR");
	if (base == NULL)
		base = "/tmp";
	FUZZ_CHECK(asprintf(&t, "%s/fuzz-session.XXXXXX", base) > 0);
	FUZZ_CHECK(mkdtemp(t) != NULL);
	topdir = t;
	atexit(cleanup_dirs);
	verbose = getenv("FUZZ_VERBOSE") != NULL;
}

/* The lowest free file descriptor, to see leaks. */
static int
lowest_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	FUZZ_CHECK(fd != -1);
	close(fd);
	return fd;
}

/* The one file left in hostdir (NULL if none); any other is a stray. */
static char *
left_file(void)
{
	struct dirent *de;
	char *found = NULL, *p;
	DIR *d;

	if ((d = opendir(hostdir)) == NULL) {
		FUZZ_CHECK(errno == ENOENT);
		return NULL;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		FUZZ_CHECK(asprintf(&p, "%s/%s", hostdir, de->d_name) > 0);
		if (found != NULL) {
			fprintf(stderr, "stray files '%s', '%s'\n", found, p);
			FUZZ_CHECK(!"more than one file left");
		}
		found = p;
	}
	closedir(d);
	return found;
}

static void
wipe_dir(void)
{
	struct dirent *de;
	DIR *d;

	if ((d = opendir(hostdir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char *p;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		FUZZ_CHECK(asprintf(&p, "%s/%s", hostdir, de->d_name) > 0);
		unlink(p);
		free(p);
	}
	closedir(d);
	rmdir(hostdir);
}

static int
check_page_cb(void *arg, const void *page, size_t len)
{
	uint64_t *h = arg;

	h[0] = fuzz_fnv(h[0], page, len);
	h[1]++;
	return 0;
}

/* Read the file back and compare it with what the writer was given. */
static void
check_file(const char *path)
{
	struct td_read *r;
	struct td_buf b;
	uint64_t h[2];
	size_t i, j;
	int id, nth, cpu;
	bool same = true;

	r = td_read_open(path);
	if (rec.p.version == 6 && r == NULL)
		return;		/* the peer's sections do not parse as v6 */
	if (r == NULL)
		fprintf(stderr, "td_read_open '%s': %s\n", path,
		    strerror(errno));
	FUZZ_CHECK(r != NULL);
	FUZZ_CHECK(td_read_version(r) == rec.p.version);
	FUZZ_CHECK(rec.p.version == 6 || td_read_codec(r) == rec.p.codec);

	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		FUZZ_CHECK(rec.sect_done[id]);	/* finishing needs all six */
		if (td_read_section(r, id, &b) == -1 ||
		    b.len != rec.sect_len[id] ||
		    fuzz_fnv(FUZZ_FNV_INIT, b.data, b.len) != rec.sect_hash[id])
			same = false;
		FUZZ_CHECK(same || rec.p.version == 6);
	}
	td_buf_free(&b);
	if (!same)
		goto out;

	FUZZ_CHECK(td_read_page_size(r) == rec.p.page_size);
	FUZZ_CHECK(td_read_long_size(r) == rec.p.long_size);
	FUZZ_CHECK(td_read_ncpus(r) == rec.p.ncpus);
	if (rec.p.version == 7)
		FUZZ_CHECK(strcmp(td_read_clock(r), rec.p.clock) == 0);

	td_buf_init(&b, TD_MAX_OPTION_SIZE);
	for (i = 0; i < rec.nopts; i++) {
		for (nth = 0, j = 0; j < i; j++)
			nth += rec.opts[j].id == rec.opts[i].id;
		FUZZ_CHECK(td_read_option(r, rec.opts[i].id, nth, &b) == 0);
		FUZZ_CHECK(b.len == rec.opts[i].len);
		FUZZ_CHECK(fuzz_fnv(FUZZ_FNV_INIT, b.data, b.len) ==
		    rec.opts[i].hash);
	}
	td_buf_free(&b);

	for (cpu = 0; cpu < rec.p.ncpus; cpu++) {
		h[0] = FUZZ_FNV_INIT;
		h[1] = 0;
		FUZZ_CHECK(td_read_cpu_pages(r, cpu, check_page_cb, h) == 0);
		FUZZ_CHECK(h[1] == rec.cpu[cpu].pages);
		FUZZ_CHECK(h[0] == rec.cpu[cpu].hash);
	}
out:
	td_read_close(r);
}

/*
 * Every frame the listener wrote on one connection must parse and unpack:
 * WELCOME first (RESUMED when the HELLO asked to resume), ACKs growing
 * within what came, nothing after DONE or ERROR.  Returns DONE's file size
 * (0: no DONE).
 */
static uint64_t
check_output(const struct bufferevent *b, const struct listener_config *cfg)
{
	static struct td_done d;
	struct td_welcome w;
	struct td_tsync_probe p;
	struct td_error e;
	struct td_frame f;
	const struct td_buf *out = &b->out;
	uint64_t done_size = 0, ack = 0, came, off;
	size_t pos = 0, n = 0;
	bool last = false;

	came = b->input.pos > b->hello_len ? b->input.pos - b->hello_len : 0;
	while (pos < out->len) {
		FUZZ_CHECK(!last);
		FUZZ_CHECK(td_frame_parse(out->data + pos, out->len - pos,
		    &f) == 1);
		FUZZ_CHECK(n > 0 || f.type == TD_MSG_WELCOME ||
		    f.type == TD_MSG_ERROR);
		switch (f.type) {
		case TD_MSG_WELCOME:
			FUZZ_CHECK(n == 0);
			FUZZ_CHECK(td_msg_unpack_welcome(&f, &w) == 0);
			FUZZ_CHECK(strcmp(w.identity, identity) == 0);
			FUZZ_CHECK(w.version == TD_PROTO_VERSION);
			FUZZ_CHECK(w.flags == (b->resume ? TD_WELCOME_RESUMED :
			    0));
			FUZZ_CHECK(b->resume || w.resume_offset == 0);
			FUZZ_CHECK(w.tsync_interval == cfg->tsync_interval);
			FUZZ_CHECK(w.idle_timeout ==
			    (uint32_t)cfg->idle_timeout);
			ack = w.resume_offset;
			came += w.resume_offset;
			break;
		case TD_MSG_ACK:
			FUZZ_CHECK(n > 0);
			FUZZ_CHECK(td_msg_unpack_ack(&f, &off) == 0);
			FUZZ_CHECK(off > ack && off <= came);
			ack = off;
			break;
		case TD_MSG_TSYNC_REPLY:
			FUZZ_CHECK(td_msg_unpack_tsync_reply(&f, &p) == 0);
			break;
		case TD_MSG_DONE:
			FUZZ_CHECK(td_msg_unpack_done(&f, &d) == 0);
			done_size = d.file_size;
			FUZZ_CHECK(done_size != 0);
			last = true;
			break;
		case TD_MSG_ERROR:
			FUZZ_CHECK(td_msg_unpack_error(&f, &e) == 0);
			FUZZ_CHECK(e.code == TD_ERR_FATAL ||
			    e.code == TD_ERR_RETRY);
			if (verbose)
				fprintf(stderr, "ERROR %u to the agent: %s\n",
				    e.code, e.text);
			last = true;
			break;
		default:
			FUZZ_CHECK(!"the listener sent an unexpected frame");
		}
		pos += f.total;
		n++;
	}
	return done_size;
}

/* The HELLO a connection's bytes start with, if they do. */
static bool
first_hello(const uint8_t *data, size_t size, struct td_hello *h,
    size_t *len)
{
	struct td_frame f;

	if (td_frame_parse(data, size, &f) != 1 ||
	    td_msg_unpack_hello(&f, h) == -1)
		return false;
	*len = f.total;
	return true;
}

/* tdlisten's settings for this input, from its HELLO if it starts so. */
static void
pick_config(const uint8_t *data, size_t size, struct listener_config *cfg,
    bool *tick)
{
	struct td_hello h;
	size_t n;

	memset(cfg, 0, sizeof *cfg);
	cfg->dir = topdir;
	cfg->insecure = true;
	cfg->file_version = 7;
	cfg->codec = TD_CODEC_ZSTD;
	cfg->max_sessions = 1;
	cfg->handshake_timeout = 10;
	cfg->tsync_interval = 1000;
	cfg->resume_wait = 600;
	cfg->idle_timeout = 60;
	cfg->max_per_identity = 64;
	*tick = false;
	if (!first_hello(data, size, &h, &n))
		return;
	if (h.file_version == 6) {
		cfg->file_version = 6;
		cfg->codec = TD_CODEC_NONE;
	} else
		cfg->codec = (enum td_codec_id)(h.recording_id % 3);
	if ((h.recording_id / 3) % 2 == 1)
		cfg->tsync_interval = TD_TSYNC_OFF;
	if ((h.recording_id / 6) % 2 == 1)
		cfg->resume_wait = 0;
	*tick = (h.trace_id & 1) != 0;
	if (h.trace_id & 2)
		cfg->quota = 1 + ((h.trace_id >> 32) & 0xffffff);
}

/* Run an armed timer: of session arg (NULL: any but the tick). */
static bool
fire_timer(void *arg)
{
	struct event *ev;

	for (ev = fake_events; ev != NULL; ev = ev->next) {
		if (ev->added && !(ev->what & EV_PERSIST) &&
		    (arg == NULL || ev->arg == arg)) {
			ev->added = false;
			ev->cb(-1, EV_TIMEOUT, ev->arg);
			return true;
		}
	}
	return false;
}

/* The checkpoint tick (session.c's, EV_PERSIST), when there is one. */
static void
fire_tick(void)
{
	struct event *ev;

	for (ev = fake_events; ev != NULL; ev = ev->next)
		if ((ev->what & EV_PERSIST) && ev->added) {
			ev->cb(-1, EV_TIMEOUT, ev->arg);
			return;
		}
}

/*
 * The agent goes (EOF) or stays silent (the idle timeout, what: TIMEOUT):
 * a closing session goes on its own, after its ERROR was written or its
 * timer struck.  The connection must be gone then.
 */
static void
hang_up(struct bufferevent *b, short what, bool odd)
{
	int steps;

	for (steps = 0; !b->freed && steps < 4; steps++) {
		if (b->writecb != NULL && b->wrote && !odd) {
			b->wrote = false;
			b->writecb(b, b->arg);
		} else if (odd && (steps > 0 || rec.path == NULL) &&
		    fire_timer(b->arg))
			;
		else if (b->eventcb != NULL)
			b->eventcb(b, what | BEV_EVENT_READING, b->arg);
		else
			fire_timer(b->arg);
	}
	FUZZ_CHECK(b->freed);
}

/*
 * One connection: its bytes arrive piece by piece.  With odd pieces the
 * output drains only once all input is in, so frames after END find the
 * session before it could send DONE.
 */
static void
feed(struct listener_config *cfg, const uint8_t *data, size_t size,
    size_t chunk, bool tick)
{
	struct td_hello h;
	struct bufferevent *b;
	struct session *s;
	char peer[96];

	snprintf(peer, sizeof peer, "%s:4000", identity);
	s = session_new(fake_base, cfg, -1, NULL, peer);
	FUZZ_CHECK(s != NULL && fake_bev != NULL);
	b = fake_bev;
	b->input.data = data;
	b->input.size = size;
	if (first_hello(data, size, &h, &b->hello_len))
		b->resume = (h.flags & TD_HELLO_RESUME) != 0;
	while (!b->freed && b->input.avail < size) {
		b->input.avail += size - b->input.avail < chunk ?
		    size - b->input.avail : chunk;
		if (b->readcb == NULL || !(b->enabled & EV_READ) ||
		    evbuffer_get_length(&b->input) < b->low)
			continue;
		b->readcb(b, b->arg);
		if (tick && !b->freed)
			fire_tick();
		if (chunk % 2 == 0 && !b->freed && b->wrote &&
		    b->writecb != NULL) {
			b->wrote = false;
			b->writecb(b, b->arg);
		}
	}
}

/* Where the next connection starts, and how the one before ends. */
static size_t
next_conn(const uint8_t *data, size_t size, size_t pos, size_t *end,
    int *how)
{
	const uint8_t *sep;

	sep = memmem(data + pos, size - pos, FUZZ_CONN_SEP,
	    FUZZ_CONN_SEP_LEN);
	if (sep == NULL || (size_t)(sep - data) + FUZZ_CONN_SEP_LEN >= size) {
		*end = size;
		*how = FUZZ_END_EOF;
		return size;
	}
	*end = (size_t)(sep - data);
	*how = sep[FUZZ_CONN_SEP_LEN] % FUZZ_END_COUNT;
	return *end + FUZZ_CONN_SEP_LEN + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct listener_config cfg;
	struct td_hello h;
	struct stat st;
	size_t chunk = 1 + size % 4093, pos = 0, end, n;
	uint64_t done_size = 0, d;
	bool tick, odd = size % 2 == 1;
	char *left;
	int fd0, how = FUZZ_END_EOF, i;

	if (topdir == NULL)
		setup_dirs();
	fd0 = lowest_fd();
	rec_reset();
	slots_closed = 0;
	fake_nbevs = 0;
	/* a fresh identity: tdlisten remembers finished recordings by it */
	snprintf(identity, sizeof identity, "fuzz-agent-%u", input_no++);
	free(hostdir);
	FUZZ_CHECK(asprintf(&hostdir, "%s/%s", topdir, identity) > 0);
	pick_config(data, size, &cfg, &tick);

	while (pos < size || fake_nbevs == 0) {
		size_t start = pos;

		pos = next_conn(data, size, start, &end, &how);
		/* one recording per input */
		if (rec.path != NULL && first_hello(data + start, end - start,
		    &h, &n) && !(h.flags & TD_HELLO_RESUME))
			break;
		feed(&cfg, data + start, end - start, chunk, tick);
		if (pos >= size || fake_nbevs == MAX_CONNS)
			break;
		switch (how) {
		case FUZZ_END_KEEP:
			break;
		case FUZZ_END_RESTART:
			/*
			 * tdlisten's last second of loop: the ERRORs go out
			 * (even inputs; odd ones are cut short), then
			 * session_free_all(), a new tdlisten recovers
			 */
			session_shutdown_all();
			for (i = 0; !odd && i < fake_nbevs; i++)
				if (!fake_bevs[i]->freed &&
				    fake_bevs[i]->wrote &&
				    fake_bevs[i]->writecb != NULL) {
					fake_bevs[i]->wrote = false;
					fake_bevs[i]->writecb(fake_bevs[i],
					    fake_bevs[i]->arg);
				}
			session_free_all();
			session_recover_all(fake_base, &cfg);
			break;
		case FUZZ_END_IDLE:
			if (!fake_bev->freed)
				hang_up(fake_bev, BEV_EVENT_TIMEOUT, odd);
			break;
		default:
			if (!fake_bev->freed)
				hang_up(fake_bev, BEV_EVENT_EOF, odd);
			if (how == FUZZ_END_EXPIRE)
				while (fire_timer(NULL))
					;
			break;
		}
	}
	/* the agent hangs up everywhere and does not come back */
	for (i = 0; i < fake_nbevs; i++)
		if (!fake_bevs[i]->freed)
			hang_up(fake_bevs[i], BEV_EVENT_EOF, odd);
	while (fire_timer(NULL))
		;
	FUZZ_CHECK(slots_closed == fake_nbevs);
	for (i = 0; i < fake_nbevs; i++)
		FUZZ_CHECK(fake_bevs[i]->freed);
	/* only the tick is left; it goes with the (empty) session list */
	session_shutdown_all();
	FUZZ_CHECK(fake_events == NULL && fake_nevents == 0);

	for (i = 0; i < fake_nbevs; i++) {
		d = check_output(fake_bevs[i], &cfg);
		FUZZ_CHECK(d == 0 || done_size == 0 || d == done_size);
		if (d != 0)
			done_size = d;
	}
	left = left_file();
	if (verbose)
		fprintf(stderr, "session: v%d codec %d, %d CPUs, %d "
		    "connections, finished %d, left '%s'\n", rec.p.version,
		    (int)rec.p.codec, rec.p.ncpus, fake_nbevs, rec.finished,
		    left ? left : "");
	if (rec.finished) {
		FUZZ_CHECK(left != NULL);
		FUZZ_CHECK(stat(left, &st) == 0);
		if (done_size != 0) {
			FUZZ_CHECK(strcmp(left, rec.path) == 0);
			FUZZ_CHECK((uint64_t)st.st_size == done_size);
		}
		check_file(left);
	} else {
		if (left != NULL)
			fprintf(stderr, "left without a finished file: '%s'\n",
			    left);
		FUZZ_CHECK(left == NULL);
	}
	free(left);
	wipe_dir();

	for (i = 0; i < fake_nbevs; i++) {
		free(fake_bevs[i]->input.pulled);
		td_buf_free(&fake_bevs[i]->out);
		free(fake_bevs[i]);
	}
	fake_nbevs = 0;
	fake_bev = NULL;
	rec_reset();
	FUZZ_CHECK(lowest_fd() == fd0);
	return 0;
}
