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
 * check tdfile.h's promises and keep a digest of what was handed over.
 *
 * tdlisten's own settings are taken from the input's first frame when it
 * is a HELLO, so that the fuzzer reaches every writer: file_version 6 gives
 * --file-version 6, anything else 7 with the codec recording_id % 3 (none,
 * zstd, zlib); (recording_id / 3) % 2 == 1 turns time sync off
 * (--tsync-interval -1), else it is 1000 ms.
 *
 * Properties, besides "no crash, no leak, no fatal()":
 *   - the writer accepts what tdfile.h says it accepts, and
 *     td_file_has_section() and td_file_cpu_pages() agree with what was
 *     handed over;
 *   - output_path() stays inside DIR/<identity>/;
 *   - the TIME_SHIFT option session.c builds at END has exactly the layout
 *     trace-cmd reads (peer, flags, CPU count, per CPU count, ts[],
 *     offset[], scaling[], then per CPU frac[]), its DATE and tsync text
 *     are NUL-terminated strings (options the peer sends pass as sent);
 *   - every frame the listener sends parses and unpacks (WELCOME first,
 *     nothing after DONE or ERROR), and DONE names the file's real size;
 *   - a finished file (complete or .incomplete.dat) is the only file left
 *     and, for v7, opens with tdread and gives back exactly the sections,
 *     options (the first 16) and pages of every CPU handed to the writer;
 *     for v6 too when tdread finds the sections the peer sent (a v6 header
 *     is parsed, so garbage sections make it unreadable: the peer's
 *     problem); without a finished file nothing is left;
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
#include "listener.h"
#include "log.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "fuzz.h"

#define PEER		"fuzz-agent:4000"
#define IDENTITY	"fuzz-agent"
#define NSECT		(TD_OPT_CMDLINES + 1)
#define MAX_OPTS	16
#define MAX_OUT		(4 * 1024 * 1024)

static bool verbose;
static char *topdir;
static char *hostdir;

/*
 * The fake libevent: one bufferevent whose input is the fuzz input, shown
 * up to "avail" bytes; evbuffer_pullup() hands out a heap copy of exactly
 * the bytes asked for, so ASan sees a read past them.
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
	struct td_buf		 out;
	bufferevent_data_cb	 readcb;
	bufferevent_data_cb	 writecb;
	bufferevent_event_cb	 eventcb;
	void			*arg;
	short			 enabled;
	size_t			 low;
	bool			 wrote;
	bool			 freed;
};

struct event {
	event_callback_fn	 cb;
	void			*arg;
	struct event		*next;
	bool			 added;
};

static struct bufferevent *fake_bev;
static struct event *fake_events;
static int fake_nevents;
static bool session_gone;
static struct event_base *fake_base = (struct event_base *)&fake_base;

struct bufferevent *
bufferevent_socket_new(struct event_base *base, evutil_socket_t fd,
    int options)
{
	struct bufferevent *b;

	FUZZ_CHECK(fake_bev == NULL);
	b = calloc(1, sizeof *b);
	FUZZ_CHECK(b != NULL);
	td_buf_init(&b->out, MAX_OUT);
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

/* server.c: the session is gone. */
void
server_session_closed(struct session *s)
{
	FUZZ_CHECK(!session_gone);
	session_gone = true;
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
int __real_td_file_finish(struct td_file *);
void __real_td_file_free(struct td_file *);

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
int __wrap_td_file_finish(struct td_file *);
void __wrap_td_file_free(struct td_file *);

static void
rec_check_sections(void)
{
	int i;

	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		FUZZ_CHECK(!!td_file_has_section(rec.file, i) ==
		    rec.sect_done[i]);
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
	/* the option records of one file share TD_MAX_SECTION_SIZE */
	bool want = !rec.finished && id != TD_OPT_DONE &&
	    id != TD_OPT_BUFFER && id != TD_OPT_CPUCOUNT &&
	    !(id >= TD_OPT_STRINGS && id <= TD_OPT_CMDLINES) &&
	    n <= TD_MAX_OPTION_SIZE &&
	    rec.alloptions + 6 + n <= TD_MAX_SECTION_SIZE;
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

static void
rec_reset(void)
{
	free(rec.path);
	free(rec.cpu);
	free((char *)(uintptr_t)rec.p.clock);
	memset(&rec, 0, sizeof rec);
	rec.open_id = -1;
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
	FUZZ_CHECK(asprintf(&hostdir, "%s/%s", topdir, IDENTITY) > 0);
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
 * Every frame the listener wrote must parse and unpack: WELCOME first,
 * nothing after DONE or ERROR.  Returns DONE's file size (0: no DONE).
 */
static uint64_t
check_output(const struct td_buf *out)
{
	static struct td_done d;
	struct td_welcome w;
	struct td_tsync_probe p;
	struct td_error e;
	struct td_frame f;
	uint64_t done_size = 0;
	size_t pos = 0, n = 0;
	bool last = false;

	while (pos < out->len) {
		FUZZ_CHECK(!last);
		FUZZ_CHECK(td_frame_parse(out->data + pos, out->len - pos,
		    &f) == 1);
		switch (f.type) {
		case TD_MSG_WELCOME:
			FUZZ_CHECK(n == 0);
			FUZZ_CHECK(td_msg_unpack_welcome(&f, &w) == 0);
			FUZZ_CHECK(strcmp(w.identity, IDENTITY) == 0);
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
			if (verbose)
				fprintf(stderr, "ERROR to the agent: %s\n",
				    e.text);
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

/* tdlisten's settings for this input, from its HELLO if it starts so. */
static void
pick_config(const uint8_t *data, size_t size, struct listener_config *cfg)
{
	struct td_hello h;
	struct td_frame f;

	memset(cfg, 0, sizeof *cfg);
	cfg->dir = topdir;
	cfg->insecure = true;
	cfg->file_version = 7;
	cfg->codec = TD_CODEC_ZSTD;
	cfg->max_sessions = 1;
	cfg->handshake_timeout = 10;
	cfg->tsync_interval = 1000;
	if (td_frame_parse(data, size, &f) != 1 ||
	    td_msg_unpack_hello(&f, &h) == -1)
		return;
	if (h.file_version == 6) {
		cfg->file_version = 6;
		cfg->codec = TD_CODEC_NONE;
	} else
		cfg->codec = (enum td_codec_id)(h.recording_id % 3);
	if ((h.recording_id / 3) % 2 == 1)
		cfg->tsync_interval = TD_TSYNC_OFF;
}

/* Run whichever timer is armed (the HELLO deadline or the ERROR's). */
static void
fire_timer(void)
{
	struct event *ev;

	for (ev = fake_events; ev != NULL; ev = ev->next) {
		if (ev->added) {
			ev->added = false;
			ev->cb(-1, EV_TIMEOUT, ev->arg);
			return;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct listener_config cfg;
	struct bufferevent *b;
	struct session *s;
	size_t chunk = 1 + size % 4093;
	uint64_t done_size;
	char *left;
	int fd0, steps;

	if (topdir == NULL)
		setup_dirs();
	fd0 = lowest_fd();
	rec_reset();
	session_gone = false;
	pick_config(data, size, &cfg);

	s = session_new(fake_base, &cfg, -1, NULL, PEER);
	FUZZ_CHECK(s != NULL && fake_bev != NULL);
	b = fake_bev;
	b->input.data = data;
	b->input.size = size;

	/*
	 * The bytes arrive piece by piece.  With odd pieces the output drains
	 * only once all input is in, so frames after END find the session
	 * before it could send DONE.
	 */
	while (!session_gone && b->input.avail < size) {
		b->input.avail += size - b->input.avail < chunk ?
		    size - b->input.avail : chunk;
		if (b->readcb == NULL || !(b->enabled & EV_READ) ||
		    evbuffer_get_length(&b->input) < b->low)
			continue;
		b->readcb(b, b->arg);
		if (chunk % 2 == 0 && !session_gone && b->wrote &&
		    b->writecb != NULL) {
			b->wrote = false;
			b->writecb(b, b->arg);
		}
	}
	/* then the agent hangs up; a closing session goes on its own */
	for (steps = 0; !session_gone && steps < 4; steps++) {
		if (b->writecb != NULL && b->wrote && size % 2 == 0) {
			b->wrote = false;
			b->writecb(b, b->arg);
		} else if (size % 2 == 1 && fake_events != NULL &&
		    (steps > 0 || rec.path == NULL))
			fire_timer();
		else if (b->eventcb != NULL)
			b->eventcb(b, BEV_EVENT_EOF | BEV_EVENT_READING,
			    b->arg);
		else
			fire_timer();
	}
	FUZZ_CHECK(session_gone);
	FUZZ_CHECK(b->freed);
	FUZZ_CHECK(fake_events == NULL && fake_nevents == 0);

	done_size = check_output(&b->out);
	left = left_file();
	if (verbose)
		fprintf(stderr, "session: v%d codec %d, %d CPUs, read %zu of "
		    "%zu bytes, finished %d, left '%s'\n", rec.p.version,
		    (int)rec.p.codec, rec.p.ncpus, b->input.pos, size,
		    rec.finished, left ? left : "");
	if (rec.finished) {
		struct stat st;

		FUZZ_CHECK(left != NULL);
		FUZZ_CHECK(stat(left, &st) == 0);
		if (done_size != 0) {
			FUZZ_CHECK(strcmp(left, rec.path) == 0);
			FUZZ_CHECK((uint64_t)st.st_size == done_size);
		}
		check_file(left);
	} else
		FUZZ_CHECK(left == NULL);
	free(left);
	wipe_dir();

	free(b->input.pulled);
	td_buf_free(&b->out);
	free(b);
	fake_bev = NULL;
	rec_reset();
	FUZZ_CHECK(lowest_fd() == fd0);
	return 0;
}
