/*
 * fuzz-session.c: libFuzzer target for what tdlisten does with a peer's
 * frames, without libevent and sockets.
 *
 * The input is the byte stream an agent sends.  It is cut into frames and
 * each message drives the calls listener/session.c makes, in the same order
 * and with the same checks: HELLO -> output_path() (the real one, from
 * listener/output.c) and td_file_create(); SECTION, SECTION_DATA,
 * SECTION_END -> td_file_section_*; OPTION -> td_file_add_option() (and the
 * CPUSTAT counters); PAGES -> sequence checks, td_page_parse() and
 * td_file_cpu_page() per page; END -> the page counts, every section, then
 * td_file_finish() and a DONE; ERROR, a bad frame, a message out of place or
 * the end of the input -> the session closes and what arrived is kept as
 * NAME.incomplete.dat when it is readable (session_keep_partial()).  A
 * crash or a leak here is a crash or a leak of tdlisten.
 *
 * The listener's own choice of file version and codec (tdlisten options) is
 * taken from the HELLO so that the fuzzer reaches every writer: file_version
 * 6 gives a v6 file, anything else v7, with the codec recording_id % 3
 * (none, zstd, zlib).
 *
 * Properties, besides "no crash, no leak":
 *   - the writer accepts exactly what tdfile.h says it accepts (sections of
 *     16..21 once each, in order for v6; options but the reserved ids;
 *     pages of declared CPUs), and td_file_has_section() and
 *     td_file_cpu_pages() agree with what was handed over;
 *   - output_path() stays inside DIR/<identity>/;
 *   - a finished or kept v7 file opens with tdread and gives back exactly
 *     the sections, options (the first 16) and pages of every CPU that were
 *     handed to the writer; a v6 file too, when tdread finds the sections
 *     the peer sent (a v6 header is parsed, so garbage sections make it
 *     unreadable, which is the peer's problem); DONE names the file's size;
 *   - afterwards nothing is left in the directory but that file, and no
 *     file descriptor is left open.
 * The directory is emptied after every input.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "buf.h"
#include "listener.h"
#include "page.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "fuzz.h"

#define IDENTITY	"fuzz-agent"
#define NSECT		(TD_OPT_CMDLINES + 1)
#define MAX_OPTS	16

enum state {
	S_HELLO,
	S_STREAM,
	S_DONE,
	S_CLOSED,
};

struct cpu {
	uint64_t	 next_seq;
	uint64_t	 events;
	uint64_t	 missed_pages;
	uint64_t	 hash;		/* of every page handed to the writer */
};

struct opt {
	uint16_t	 id;
	size_t		 len;
	uint64_t	 hash;
};

/* One simulated session and what its writer was given. */
struct sim {
	enum state	 state;
	struct td_hello	 hello;
	int		 version;
	enum td_codec_id codec;
	struct td_file	*file;
	char		*path;		/* from output_path() */
	char		*kept;		/* the file left behind, if any */
	uint64_t	 done_size;	/* what DONE said */
	struct cpu	*cpu;
	uint64_t	 lost;

	int		 open_id;	/* section being written, -1 */
	uint64_t	 open_hash;
	uint64_t	 open_len;
	bool		 sect_done[NSECT];
	uint64_t	 sect_hash[NSECT];
	uint64_t	 sect_len[NSECT];
	struct opt	 opts[MAX_OPTS];
	size_t		 nopts;
};

static char *topdir;
static char *hostdir;

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
	const char *base = getenv("TMPDIR");
	char *t;

	if (access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	else if (base == NULL)
		base = "/tmp";
	FUZZ_CHECK(asprintf(&t, "%s/fuzz-session.XXXXXX", base) > 0);
	FUZZ_CHECK(mkdtemp(t) != NULL);
	topdir = t;
	FUZZ_CHECK(asprintf(&hostdir, "%s/%s", topdir, IDENTITY) > 0);
	atexit(cleanup_dirs);
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

/* Only the expected file may be left; remove it and the directory. */
static void
check_dir_empty(const char *keep)
{
	struct dirent *de;
	DIR *d;

	d = opendir(hostdir);
	if (d == NULL) {
		FUZZ_CHECK(errno == ENOENT);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char *p;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		FUZZ_CHECK(asprintf(&p, "%s/%s", hostdir, de->d_name) > 0);
		if (keep == NULL || strcmp(p, keep) != 0) {
			fprintf(stderr, "stray file '%s'\n", p);
			FUZZ_CHECK(!"a file was left behind");
		}
		free(p);
	}
	closedir(d);
}

/* Remove everything under hostdir (after a failed check, or normally). */
static void
wipe_dir(void)
{
	struct dirent *de;
	DIR *d;

	if ((d = opendir(hostdir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char *p;

		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' ||
		    (de->d_name[1] == '.' && de->d_name[2] == '\0')))
			continue;
		FUZZ_CHECK(asprintf(&p, "%s/%s", hostdir, de->d_name) > 0);
		unlink(p);
		free(p);
	}
	closedir(d);
	rmdir(hostdir);
}

/*
 * The writer calls, each checking tdfile.h's promise and keeping a digest
 * of what the writer accepted.
 */
static int
sim_section_begin(struct sim *s, uint16_t id)
{
	bool want;
	int ndone = 0, i, r;

	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		ndone += s->sect_done[i];
	want = s->open_id == -1 && id >= TD_OPT_HEADER_INFO &&
	    id <= TD_OPT_CMDLINES && !s->sect_done[id];
	if (s->version == 6)
		want = want && id == TD_OPT_HEADER_INFO + ndone;
	r = td_file_section_begin(s->file, id);
	FUZZ_CHECK((r == 0) == want);
	if (r == 0) {
		s->open_id = id;
		s->open_hash = FUZZ_FNV_INIT;
		s->open_len = 0;
	}
	return r;
}

static int
sim_section_write(struct sim *s, const void *p, size_t n)
{
	int r = td_file_section_write(s->file, p, n);

	if (s->open_id == -1)
		FUZZ_CHECK(r == -1 && errno == EINVAL);
	if (r == 0) {
		s->open_hash = fuzz_fnv(s->open_hash, p, n);
		s->open_len += n;
	}
	return r;
}

static int
sim_section_end(struct sim *s)
{
	int r = td_file_section_end(s->file), i;

	FUZZ_CHECK((r == 0) == (s->open_id != -1));
	if (r == 0) {
		s->sect_done[s->open_id] = true;
		s->sect_hash[s->open_id] = s->open_hash;
		s->sect_len[s->open_id] = s->open_len;
		s->open_id = -1;
	}
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		FUZZ_CHECK(!!td_file_has_section(s->file, i) ==
		    s->sect_done[i]);
	return r;
}

static int
sim_add_option(struct sim *s, uint16_t id, const void *p, size_t n)
{
	bool want = id != TD_OPT_DONE && id != TD_OPT_BUFFER &&
	    id != TD_OPT_CPUCOUNT && !(id >= TD_OPT_STRINGS &&
	    id <= TD_OPT_CMDLINES) && n <= TD_MAX_OPTION_SIZE;
	int r = td_file_add_option(s->file, id, p, n);

	FUZZ_CHECK((r == 0) == want);
	if (r == 0 && s->nopts < MAX_OPTS) {
		s->opts[s->nopts].id = id;
		s->opts[s->nopts].len = n;
		s->opts[s->nopts].hash = fuzz_fnv(FUZZ_FNV_INIT, p, n);
		s->nopts++;
	}
	return r;
}

static int
sim_cpu_page(struct sim *s, uint32_t cpu, const void *p, size_t n)
{
	int r = td_file_cpu_page(s->file, (int)cpu, p, n);

	FUZZ_CHECK(r == 0);
	s->cpu[cpu].hash = fuzz_fnv(s->cpu[cpu].hash, p, n);
	return r;
}

/* session_keep_partial(): keep a readable part as NAME.incomplete.dat. */
static void
sim_keep_partial(struct sim *s)
{
	static const enum td_opt need[] = { TD_OPT_HEADER_INFO,
	    TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS, TD_OPT_KALLSYMS,
	    TD_OPT_PRINTK };
	uint64_t zero = 0;
	char *inc, *dot;
	size_t i;

	if (td_file_section_cancel(s->file) == 0) {
		FUZZ_CHECK(s->open_id != -1);
		s->open_id = -1;
	} else
		FUZZ_CHECK(s->open_id == -1);
	for (i = 0; i < sizeof need / sizeof *need; i++) {
		FUZZ_CHECK(!!td_file_has_section(s->file, need[i]) ==
		    s->sect_done[need[i]]);
		if (!td_file_has_section(s->file, need[i]))
			goto drop;
	}
	if (!td_file_has_section(s->file, TD_OPT_CMDLINES) &&
	    (sim_section_begin(s, TD_OPT_CMDLINES) == -1 ||
	    sim_section_write(s, &zero, sizeof zero) == -1 ||
	    sim_section_end(s) == -1))
		goto drop;
	FUZZ_CHECK(td_file_finish(s->file) == 0);
	FUZZ_CHECK(asprintf(&inc, "%s", s->path) > 0);
	dot = strrchr(inc, '.');
	if (dot != NULL)
		*dot = '\0';
	FUZZ_CHECK(asprintf(&s->kept, "%s.incomplete.dat", inc) > 0);
	free(inc);
	FUZZ_CHECK(rename(s->path, s->kept) == 0);
	return;
drop:
	td_file_abort(s->file);
}

/* session_close(): finish or keep what arrived, then forget the writer. */
static void
sim_close(struct sim *s)
{
	if (s->state == S_CLOSED)
		return;
	if (s->file != NULL) {
		if (s->state != S_DONE)
			sim_keep_partial(s);
		td_file_free(s->file);
		s->file = NULL;
	}
	if (s->state == S_DONE)
		FUZZ_CHECK(asprintf(&s->kept, "%s", s->path) > 0);
	else
		s->state = S_CLOSED;
}

static int
sim_hello(struct sim *s, const struct td_frame *f)
{
	struct td_file_params p;
	struct td_welcome w;
	struct td_buf out;
	char *err = NULL, *part;
	uint16_t one = 1;
	size_t n;

	if (td_msg_unpack_hello(f, &s->hello) == -1)
		return -1;
	if (s->hello.version_min > TD_PROTO_VERSION ||
	    s->hello.version_max < TD_PROTO_VERSION)
		return -1;
	if (s->hello.big_endian != (*(uint8_t *)&one == 1 ? 0 : 1))
		return -1;
	if (output_path(topdir, IDENTITY, s->hello.name, &s->path,
	    &err) == -1) {
		fprintf(stderr, "output_path: %s\n", err);
		FUZZ_CHECK(!"output_path failed");
	}
	/* DIR/IDENTITY/one-component.dat */
	n = strlen(hostdir);
	FUZZ_CHECK(strncmp(s->path, hostdir, n) == 0 && s->path[n] == '/');
	FUZZ_CHECK(strchr(s->path + n + 1, '/') == NULL);
	FUZZ_CHECK(s->path[n + 1] != '.' && s->path[n + 1] != '-');
	n = strlen(s->path);
	FUZZ_CHECK(n > 4 && strcmp(s->path + n - 4, ".dat") == 0);

	s->version = s->hello.file_version == 6 ? 6 : 7;
	s->codec = s->version == 6 ? TD_CODEC_NONE :
	    (enum td_codec_id)(s->hello.recording_id % 3);
	memset(&p, 0, sizeof p);
	p.version = s->version;
	p.codec = s->codec;
	p.page_size = s->hello.page_size;
	p.long_size = s->hello.long_size;
	p.ncpus = (int)s->hello.ncpus;
	p.clock = s->hello.clock;
	s->file = td_file_create(s->path, &p);
	if (s->file == NULL) {
		/* everything in the HELLO was checked: this must not fail */
		FUZZ_CHECK(asprintf(&part, "%s.part", s->path) > 0);
		unlink(part);
		free(part);
		FUZZ_CHECK(!"td_file_create failed on a valid HELLO");
	}
	s->cpu = calloc(s->hello.ncpus, sizeof *s->cpu);
	FUZZ_CHECK(s->cpu != NULL);
	for (n = 0; n < s->hello.ncpus; n++)
		s->cpu[n].hash = FUZZ_FNV_INIT;
	memset(&w, 0, sizeof w);
	w.version = TD_PROTO_VERSION;
	w.session_id = s->hello.trace_id;
	snprintf(w.identity, sizeof w.identity, "%s", IDENTITY);
	td_buf_init(&out, TD_MAX_HELLO + TD_MAX_ERROR_LEN + 4096);
	FUZZ_CHECK(td_msg_pack_welcome(&out, &w) == 0);
	td_buf_free(&out);
	s->state = S_STREAM;
	return 0;
}

static int
sim_pages(struct sim *s, const struct td_frame *f)
{
	struct td_page_info info;
	struct td_pages pg;
	struct cpu *c;
	uint32_t i;

	if (td_msg_unpack_pages(f, s->hello.page_size, &pg) == -1)
		return -1;
	if (pg.cpu >= s->hello.ncpus)
		return -1;
	c = &s->cpu[pg.cpu];
	if (pg.first_seq != c->next_seq)
		return -1;
	for (i = 0; i < pg.count; i++) {
		const uint8_t *page = pg.data + (size_t)i * s->hello.page_size;

		if (td_page_parse(page, s->hello.page_size,
		    s->hello.commit_size, &info) == 0) {
			c->events += info.events;
			if (info.missed)
				c->missed_pages++;
		}
		if (sim_cpu_page(s, pg.cpu, page, s->hello.page_size) == -1)
			return -1;
	}
	c->next_seq += pg.count;
	FUZZ_CHECK(td_file_cpu_pages(s->file, (int)pg.cpu) == c->next_seq);
	return 0;
}

static int
sim_end(struct sim *s, const struct td_frame *f)
{
	struct td_end *e;
	struct td_done d;
	struct td_buf out;
	uint32_t i;

	e = malloc(sizeof *e);
	FUZZ_CHECK(e != NULL);
	if (td_msg_unpack_end(f, e) == -1 || e->ncpus != s->hello.ncpus) {
		free(e);
		return -1;
	}
	for (i = 0; i < e->ncpus; i++) {
		if (e->pages[i] != s->cpu[i].next_seq) {
			free(e);
			return -1;
		}
	}
	free(e);
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		if (!td_file_has_section(s->file, i))
			return -1;
	FUZZ_CHECK(td_file_finish(s->file) == 0);
	s->state = S_DONE;
	memset(&d, 0, sizeof d);
	d.file_size = td_file_size(s->file);
	s->done_size = d.file_size;
	snprintf(d.path, sizeof d.path, "%s", s->path + strlen(topdir) + 1);
	td_buf_init(&out, TD_MAX_HELLO + TD_MAX_ERROR_LEN + 4096);
	FUZZ_CHECK(td_msg_pack_done(&out, &d) == 0);
	td_buf_free(&out);
	return 0;
}

/* session_stat(), copied: the number after key in a CPUSTAT text. */
static uint64_t
session_stat(const uint8_t *p, size_t n, const char *key)
{
	char text[1024], *at;
	size_t k = n < sizeof text - 1 ? n : sizeof text - 1;

	memcpy(text, p, k);
	text[k] = '\0';
	if ((at = strstr(text, key)) == NULL)
		return 0;
	if (at != text && at[-1] != '\n')
		return 0;
	return strtoull(at + strlen(key), NULL, 10);
}

/* session_frame(): one frame; -1 when the session closes. */
static int
sim_frame(struct sim *s, const struct td_frame *f)
{
	const uint8_t *p;
	uint16_t id;
	size_t n;

	if (s->state == S_HELLO) {
		if (f->type != TD_MSG_HELLO)
			return -1;
		return sim_hello(s, f);
	}
	if (s->state != S_STREAM)
		return -1;
	switch (f->type) {
	case TD_MSG_PAGES:
		return sim_pages(s, f);
	case TD_MSG_SECTION:
		if (td_msg_unpack_section(f, &id) == -1 ||
		    sim_section_begin(s, id) == -1)
			return -1;
		return 0;
	case TD_MSG_SECTION_DATA:
		return sim_section_write(s, f->payload, f->len);
	case TD_MSG_SECTION_END:
		return sim_section_end(s);
	case TD_MSG_OPTION:
		if (td_msg_unpack_option(f, &id, &p, &n) == -1 ||
		    sim_add_option(s, id, p, n) == -1)
			return -1;
		if (id == TD_OPT_CPUSTAT)
			s->lost += session_stat(p, n, "overrun: ") +
			    session_stat(p, n, "dropped events: ");
		return 0;
	case TD_MSG_END:
		return sim_end(s, f);
	case TD_MSG_ERROR: {
		struct td_error e;

		(void)td_msg_unpack_error(f, &e);
		return -1;
	}
	default:
		return -1;
	}
}

/* Read back the file the session left and compare it with its input. */
static int
check_page_cb(void *arg, const void *page, size_t len)
{
	uint64_t *h = arg;

	h[0] = fuzz_fnv(h[0], page, len);
	h[1]++;
	return 0;
}

static void
check_file(struct sim *s)
{
	struct td_read *r;
	struct td_buf b;
	struct stat st;
	uint64_t h[2];
	size_t i, j;
	int id, nth;
	bool v6_ok = true;

	FUZZ_CHECK(stat(s->kept, &st) == 0);
	if (s->done_size != 0)
		FUZZ_CHECK((uint64_t)st.st_size == s->done_size);
	r = td_read_open(s->kept);
	if (s->version == 6 && r == NULL)
		return;		/* the peer's sections do not parse as v6 */
	if (r == NULL)
		fprintf(stderr, "td_read_open '%s': %s\n", s->kept,
		    strerror(errno));
	FUZZ_CHECK(r != NULL);
	FUZZ_CHECK(td_read_version(r) == s->version);
	FUZZ_CHECK(td_read_codec(r) == s->codec);

	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	for (id = TD_OPT_HEADER_INFO; id <= TD_OPT_CMDLINES; id++) {
		FUZZ_CHECK(s->sect_done[id]);	/* finish needs all six */
		if (td_read_section(r, id, &b) == -1 ||
		    b.len != s->sect_len[id] ||
		    fuzz_fnv(FUZZ_FNV_INIT, b.data, b.len) != s->sect_hash[id])
			v6_ok = false;
		if (s->version == 7)
			FUZZ_CHECK(v6_ok);
	}
	td_buf_free(&b);
	if (!v6_ok)
		goto out;

	FUZZ_CHECK(td_read_page_size(r) == s->hello.page_size);
	FUZZ_CHECK(td_read_long_size(r) == s->hello.long_size);
	FUZZ_CHECK(td_read_ncpus(r) == (int)s->hello.ncpus);
	if (s->version == 7)
		FUZZ_CHECK(strcmp(td_read_clock(r), s->hello.clock) == 0);

	td_buf_init(&b, TD_MAX_OPTION_SIZE);
	for (i = 0; i < s->nopts; i++) {
		for (nth = 0, j = 0; j < i; j++)
			nth += s->opts[j].id == s->opts[i].id;
		FUZZ_CHECK(td_read_option(r, s->opts[i].id, nth, &b) == 0);
		FUZZ_CHECK(b.len == s->opts[i].len);
		FUZZ_CHECK(fuzz_fnv(FUZZ_FNV_INIT, b.data, b.len) ==
		    s->opts[i].hash);
	}
	td_buf_free(&b);

	for (i = 0; i < s->hello.ncpus; i++) {
		h[0] = FUZZ_FNV_INIT;
		h[1] = 0;
		FUZZ_CHECK(td_read_cpu_pages(r, (int)i, check_page_cb, h) == 0);
		FUZZ_CHECK(h[1] == s->cpu[i].next_seq);
		FUZZ_CHECK(h[0] == s->cpu[i].hash);
	}
out:
	td_read_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim *s;
	struct td_frame f, g;
	uint8_t *copy;
	size_t pos = 0;
	int fd0, r;

	if (topdir == NULL)
		setup_dirs();
	fd0 = lowest_fd();
	s = calloc(1, sizeof *s);
	FUZZ_CHECK(s != NULL);
	s->open_id = -1;
	s->state = S_HELLO;

	/* session_read_cb(): whole frames only, stop at DONE */
	while (s->state == S_HELLO || s->state == S_STREAM) {
		r = td_frame_parse(data + pos, size - pos, &f);
		if (r != 1)
			break;		/* bad header, or the peer hung up */
		copy = malloc(f.total);
		FUZZ_CHECK(copy != NULL);
		memcpy(copy, data + pos, f.total);
		FUZZ_CHECK(td_frame_parse(copy, f.total, &g) == 1);
		r = sim_frame(s, &g);
		free(copy);
		if (r == -1)
			break;
		pos += f.total;
	}
	sim_close(s);

	if (s->kept != NULL)
		check_file(s);
	check_dir_empty(s->kept);
	wipe_dir();
	FUZZ_CHECK(lowest_fd() == fd0);

	free(s->kept);
	free(s->path);
	free(s->cpu);
	free(s);
	return 0;
}
