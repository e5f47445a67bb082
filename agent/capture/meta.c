/*
 * meta.c: header sections and options, read from tracefs and /proc.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <tracefs.h>

#include "buf.h"
#include "instance.h"
#include "tdlimits.h"
#include "meta.h"
#include "xmalloc.h"
#include "banned.h"

/* At most this many sinks in a tee: the file and the network. */
#define META_TEE_MAX	4

/* Sinks fed as one (meta.h). */
struct meta_tee {
	struct meta_sink	 to[META_TEE_MAX];
	char			*what[META_TEE_MAX];
	int			 n;
	int			 failed;	/* index, or -1 */
};

static int
meta_file_begin(void *arg, enum td_opt id)
{
	return td_file_section_begin(arg, id);
}

static int
meta_file_write(void *arg, const void *p, size_t n)
{
	return td_file_section_write(arg, p, n);
}

static int
meta_file_end(void *arg)
{
	return td_file_section_end(arg);
}

static int
meta_file_option(void *arg, enum td_opt id, const void *p, size_t n)
{
	return td_file_add_option(arg, id, p, n);
}

static int
meta_file_page(void *arg, int cpu, const void *p, size_t n)
{
	return td_file_cpu_page(arg, cpu, p, n);
}

static int
meta_file_chunk(void *arg, int cpu, enum td_codec_id codec, const void *z,
    size_t zlen, uint32_t npages)
{
	if (codec != td_file_chunk_codec(arg)) {
		errno = EINVAL;
		return -1;
	}
	return td_file_cpu_chunk(arg, cpu, z, zlen, npages);
}

/* The writer gathers chunks by size, not by burst. */
static int
meta_file_batch_end(void *arg)
{
	return 0;
}

/* Point a sink at a trace.dat writer. */
void
meta_sink_file(struct meta_sink *s, struct td_file *f)
{
	s->begin = meta_file_begin;
	s->write = meta_file_write;
	s->end = meta_file_end;
	s->option = meta_file_option;
	s->page = meta_file_page;
	s->room = NULL;
	s->chunk = meta_file_chunk;
	s->batch_end = meta_file_batch_end;
	s->arg = f;
}

/* An empty tee. */
struct meta_tee *
meta_tee_new(void)
{
	struct meta_tee *t = xcalloc(1, sizeof *t);

	t->failed = -1;
	return t;
}

/* Feed s too (a tee holds at most META_TEE_MAX: more is a bug). */
void
meta_tee_add(struct meta_tee *t, const struct meta_sink *s, const char *what)
{
	if (t->n == META_TEE_MAX)
		abort();
	t->to[t->n] = *s;
	t->what[t->n] = xstrdup(what);
	t->n++;
}

/* Stop feeding the sink of arg. */
void
meta_tee_drop(struct meta_tee *t, void *arg)
{
	int i;

	for (i = 0; i < t->n; i++) {
		if (t->to[i].arg != arg)
			continue;
		free(t->what[i]);
		memmove(&t->to[i], &t->to[i + 1], (t->n - i - 1) *
		    sizeof t->to[0]);
		memmove(&t->what[i], &t->what[i + 1], (t->n - i - 1) *
		    sizeof t->what[0]);
		t->n--;
		t->failed = -1;
		return;
	}
}

/* The name of the sink that failed last. */
const char *
meta_tee_what(const struct meta_tee *t)
{
	return t->failed == -1 ? "" : t->what[t->failed];
}

/* The arg of the sink that failed last, or NULL. */
void *
meta_tee_failed_arg(const struct meta_tee *t)
{
	return t->failed == -1 ? NULL : t->to[t->failed].arg;
}

/* Free a tee (not its sinks); NULL is fine. */
void
meta_tee_free(struct meta_tee *t)
{
	int i;

	if (t == NULL)
		return;
	for (i = 0; i < t->n; i++)
		free(t->what[i]);
	free(t);
}

/*
 * Each action of the tee goes to every sink in turn and stops at the first
 * that fails (errno is its own), remembered for meta_tee_what().
 */
static int
meta_tee_fail(struct meta_tee *t, int i)
{
	t->failed = i;
	return -1;
}

static int
meta_tee_begin(void *arg, enum td_opt id)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].begin(t->to[i].arg, id) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

static int
meta_tee_write(void *arg, const void *p, size_t n)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].write(t->to[i].arg, p, n) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

static int
meta_tee_end(void *arg)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].end(t->to[i].arg) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

static int
meta_tee_option(void *arg, enum td_opt id, const void *p, size_t n)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].option(t->to[i].arg, id, p, n) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

static int
meta_tee_page(void *arg, int cpu, const void *p, size_t n)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].page(t->to[i].arg, cpu, p, n) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

/* A tee of one sink offers that sink's room; of several, none. */
static void *
meta_tee_room(void *arg, int cpu, uint32_t *npages)
{
	struct meta_tee *t = arg;

	if (t->n != 1 || t->to[0].room == NULL)
		return NULL;
	return t->to[0].room(t->to[0].arg, cpu, npages);
}

static int
meta_tee_chunk(void *arg, int cpu, enum td_codec_id codec, const void *z,
    size_t zlen, uint32_t npages)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].chunk(t->to[i].arg, cpu, codec, z,
		    zlen, npages) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

static int
meta_tee_batch_end(void *arg)
{
	struct meta_tee *t = arg;
	int i;

	for (i = 0; i < t->n; i++)
		if (t->to[i].batch_end(t->to[i].arg) == -1)
			return meta_tee_fail(t, i);
	return 0;
}

/* Point a sink at a tee. */
void
meta_sink_tee(struct meta_sink *s, struct meta_tee *t)
{
	s->begin = meta_tee_begin;
	s->write = meta_tee_write;
	s->end = meta_tee_end;
	s->option = meta_tee_option;
	s->page = meta_tee_page;
	s->room = meta_tee_room;
	s->chunk = meta_tee_chunk;
	s->batch_end = meta_tee_batch_end;
	s->arg = t;
}

static int
meta_fail(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(errno));
	return -1;
}

/* Find "field: ... NAME;\toffset:X;\tsize:Y;" in a header_page text. */
static int
meta_field(const char *text, const char *name, unsigned *off, unsigned *size)
{
	const char *p = strstr(text, name);

	if (p == NULL)
		return -1;
	if (sscanf(p + strlen(name), ";%*[ \t]offset:%u;%*[ \t]size:%u;",
	    off, size) != 2)
		return -1;
	return 0;
}

/* Page geometry of the kernel's ring buffer. */
int
meta_geometry(uint32_t *page_size, int *commit_size, char *err,
    size_t errlen)
{
	unsigned doff, dsize, coff, csize;
	char *t;

	t = tracefs_instance_file_read(NULL, "events/header_page", NULL);
	if (t == NULL)
		return meta_fail(err, errlen, "cannot read events/header_page");
	if (meta_field(t, "char data", &doff, &dsize) == -1 ||
	    meta_field(t, "local_t commit", &coff, &csize) == -1 ||
	    doff + dsize > TD_MAX_PAGE_SIZE || (csize != 4 && csize != 8)) {
		snprintf(err, errlen, "cannot parse events/header_page");
		free(t);
		return -1;
	}
	free(t);
	*page_size = doff + dsize;
	*commit_size = (int)csize;
	return 0;
}

static int
meta_put(const struct meta_sink *s, const void *p, size_t n)
{
	return s->write(s->arg, p, n);
}

static int
meta_put_u32(const struct meta_sink *s, uint32_t v)
{
	return s->write(s->arg, &v, sizeof v);
}

static int
meta_put_u64(const struct meta_sink *s, uint64_t v)
{
	return s->write(s->arg, &v, sizeof v);
}

/* "name\0" u64 size, text: the two entries of HEADER_INFO. */
static int
meta_header_file(const struct meta_sink *s, const char *name,
    const char *file, char *err, size_t errlen)
{
	char *t;
	int n = 0, ret;

	t = tracefs_instance_file_read(NULL, file, &n);
	if (t == NULL) {
		snprintf(err, errlen, "cannot read %s: %s", file,
		    strerror(errno));
		return -1;
	}
	ret = 0;
	if (meta_put(s, name, strlen(name) + 1) == -1 ||
	    meta_put_u64(s, n) == -1 || meta_put(s, t, n) == -1)
		ret = meta_fail(err, errlen, "cannot write header info");
	free(t);
	return ret;
}

/* u64 size + format, for each event of a system in list. */
static int
meta_formats(const struct meta_sink *s, const char *sys, char **events,
    int n, char *err, size_t errlen)
{
	char *fmt;
	int i, size;

	for (i = 0; i < n; i++) {
		fmt = tracefs_event_file_read(NULL, sys, events[i], "format",
		    &size);
		if (fmt == NULL) {
			snprintf(err, errlen, "cannot read format of %s:%s: %s",
			    sys, events[i], strerror(errno));
			return -1;
		}
		if (meta_put_u64(s, size) || meta_put(s, fmt, size)) {
			free(fmt);
			return meta_fail(err, errlen, "cannot write formats");
		}
		free(fmt);
	}
	return 0;
}

static int
meta_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* FTRACE_EVENTS: every format under events/ftrace. */
static int
meta_ftrace(const struct meta_sink *s, char *err, size_t errlen)
{
	char **evs;
	int n, ret;

	evs = tracefs_system_events(NULL, "ftrace");
	n = evs ? tracefs_list_size(evs) : 0;
	if (n > 0)
		qsort(evs, n, sizeof *evs, meta_strcmp);
	if (s->begin(s->arg, TD_OPT_FTRACE_EVENTS) == -1 ||
	    meta_put_u32(s, n) == -1) {
		tracefs_list_free(evs);
		return meta_fail(err, errlen, "cannot write ftrace formats");
	}
	ret = meta_formats(s, "ftrace", evs, n, err, errlen);
	tracefs_list_free(evs);
	if (ret == 0 && s->end(s->arg) == -1)
		return meta_fail(err, errlen, "cannot write ftrace formats");
	return ret;
}

/*
 * EVENT_FORMATS: the formats of the enabled events, grouped by system, in
 * the order set_event lists them (ftrace's own events live in FTRACE_EVENTS).
 */
static int
meta_events(struct instance *in, const struct meta_sink *s, char *err,
    size_t errlen)
{
	char *set, *line, *save = NULL, *c;
	char **sys = NULL, ***evs = NULL;
	int *nev = NULL, nsys = 0, i, j, ret = -1;

	set = instance_enabled_events(in);
	for (line = set ? strtok_r(set, "\n", &save) : NULL; line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if ((c = strchr(line, ':')) == NULL)
			continue;
		*c++ = '\0';
		if (strcmp(line, "ftrace") == 0)
			continue;
		for (i = 0; i < nsys && strcmp(sys[i], line) != 0; i++)
			;
		if (i == nsys) {
			sys = xreallocarray(sys, nsys + 1, sizeof *sys);
			evs = xreallocarray(evs, nsys + 1, sizeof *evs);
			nev = xreallocarray(nev, nsys + 1, sizeof *nev);
			sys[i] = line;
			evs[i] = NULL;
			nev[i] = 0;
			nsys++;
		}
		evs[i] = xreallocarray(evs[i], nev[i] + 1, sizeof **evs);
		evs[i][nev[i]++] = c;
	}
	if (s->begin(s->arg, TD_OPT_EVENT_FORMATS) == -1 ||
	    meta_put_u32(s, nsys) == -1) {
		meta_fail(err, errlen, "cannot write event formats");
		goto out;
	}
	for (i = 0; i < nsys; i++) {
		if (meta_put(s, sys[i], strlen(sys[i]) + 1) == -1 ||
		    meta_put_u32(s, nev[i]) == -1) {
			meta_fail(err, errlen, "cannot write event formats");
			goto out;
		}
		if (meta_formats(s, sys[i], evs[i], nev[i], err, errlen) == -1)
			goto out;
	}
	if (s->end(s->arg) == -1) {
		meta_fail(err, errlen, "cannot write event formats");
		goto out;
	}
	ret = 0;
out:
	for (j = 0; j < nsys; j++)
		free(evs[j]);
	free(evs);
	free(nev);
	free(sys);
	free(set);
	return ret;
}

/*
 * /proc/kallsyms to read *size bytes from.  The file reports no size and
 * the kernel formats every symbol on each read (70% of tdagent's start-up
 * CPU when it was read twice), so it is read once, into a memfd that tells
 * the size.  Without memfd, it is read through to count, then opened
 * again.  -1 when there is no kallsyms.
 */
static int
meta_kallsyms_open(int64_t *size)
{
	static const char path[] = "/proc/kallsyms";
	char buf[65536];
	int64_t total = 0;
	ssize_t n;
	int fd, mfd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	mfd = memfd_create("tdagent-kallsyms", MFD_CLOEXEC);
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		if (mfd != -1 && write(mfd, buf, n) != n) {
			close(mfd);
			mfd = -1;	/* no room: count only */
		}
		total += n;
	}
	close(fd);
	if (n < 0) {
		if (mfd != -1)
			close(mfd);
		return -1;
	}
	*size = total;
	if (mfd != -1 && lseek(mfd, 0, SEEK_SET) == 0)
		return mfd;
	if (mfd != -1)
		close(mfd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

int
meta_kallsyms_copy(int fd, int64_t size, const struct meta_sink *s)
{
	char buf[65536];
	int64_t left = size;	/* of the section, not put yet */
	size_t have = 0;	/* read, not put: the start of a line */
	size_t want, whole;
	ssize_t n;
	char *nl;

	while (fd != -1 && left > (int64_t)have) {
		want = sizeof buf - have;
		if ((int64_t)want > left - (int64_t)have)
			want = (size_t)(left - (int64_t)have);
		n = read(fd, buf + have, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		/* the whole lines go; a line's start waits for its end */
		nl = memrchr(buf, '\n', have);
		whole = nl != NULL ? (size_t)(nl - buf) + 1 : 0;
		if (whole == 0 && have == sizeof buf)
			break;		/* no line is that long: stop there */
		if (whole == 0)
			continue;
		if (meta_put(s, buf, whole) == -1)
			return -1;
		left -= (int64_t)whole;
		have -= whole;
		memmove(buf, buf + whole, have);
	}
	/* a line cut at size (the file grew) or a file that shrank */
	memset(buf, '\n', sizeof buf);
	while (left > 0) {
		want = left < (int64_t)sizeof buf ? (size_t)left : sizeof buf;
		if (meta_put(s, buf, want) == -1)
			return -1;
		left -= (int64_t)want;
	}
	return 0;
}

/*
 * KALLSYMS: u32 size then /proc/kallsyms.  The size must come first but the
 * file reports none (meta_kallsyms_open()).  Where it is read twice (no
 * memfd), it may have changed in between: meta_kallsyms_copy().
 */
static int
meta_kallsyms(const struct meta_sink *s, char *err, size_t errlen)
{
	int64_t size = 0;
	int fd, ret;

	fd = meta_kallsyms_open(&size);
	if (fd == -1 || size > TD_MAX_SECTION_SIZE - 4)
		size = 0;	/* no kallsyms: an empty section is valid */
	if (size == 0 && fd != -1) {
		close(fd);
		fd = -1;
	}
	ret = s->begin(s->arg, TD_OPT_KALLSYMS) == -1 ||
	    meta_put_u32(s, (uint32_t)size) == -1 ||
	    meta_kallsyms_copy(fd, size, s) == -1 || s->end(s->arg) == -1;
	if (fd != -1)
		close(fd);
	if (ret)
		return meta_fail(err, errlen, "cannot write kallsyms");
	return 0;
}

/* A section of {uN size, text} from a top-level tracefs file. */
static int
meta_text_section(struct instance *in, const struct meta_sink *s,
    enum td_opt id, const char *file, int wide, char *err, size_t errlen)
{
	size_t n = 0;
	char *t;
	int ret;

	t = instance_read_top(in, file, &n);
	if (t == NULL)
		n = 0;		/* absent file: empty but valid section */
	ret = s->begin(s->arg, id);
	if (ret == 0)
		ret = wide ? meta_put_u64(s, n) : meta_put_u32(s, (uint32_t)n);
	if (ret == 0 && n > 0)
		ret = meta_put(s, t, n);
	if (ret == 0)
		ret = s->end(s->arg);
	free(t);
	if (ret == -1)
		return meta_fail(err, errlen, file);
	return 0;
}

/* The sections known before recording starts. */
int
meta_write_headers(struct instance *in, const struct meta_sink *s,
    char *err, size_t errlen)
{
	if (s->begin(s->arg, TD_OPT_HEADER_INFO) == -1)
		return meta_fail(err, errlen, "cannot write header info");
	if (meta_header_file(s, "header_page", "events/header_page", err,
	    errlen) == -1 || meta_header_file(s, "header_event",
	    "events/header_event", err, errlen) == -1)
		return -1;
	if (s->end(s->arg) == -1)
		return meta_fail(err, errlen, "cannot write header info");
	if (meta_ftrace(s, err, errlen) == -1 ||
	    meta_events(in, s, err, errlen) == -1 ||
	    meta_kallsyms(s, err, errlen) == -1 ||
	    meta_text_section(in, s, TD_OPT_PRINTK, "printk_formats", 0, err,
	    errlen) == -1)
		return -1;
	return 0;
}

/* Open what the end of a recording reads; absent files are skipped. */
int
meta_keep_end_files(struct instance *in, int ncpus)
{
	char file[64];
	int cpu;

	if (instance_keep(in, "saved_cmdlines", true, O_RDONLY) == -1 ||
	    instance_keep(in, "trace_clock", false, O_RDONLY) == -1)
		return -1;
	for (cpu = 0; cpu < ncpus; cpu++) {
		snprintf(file, sizeof file, "per_cpu/cpu%d/stats", cpu);
		if (instance_keep(in, file, false, O_RDONLY) == -1 &&
		    errno != ENOENT)
			return -1;
	}
	return 0;
}

/* The saved command lines, at the end of a recording. */
int
meta_write_cmdlines(struct instance *in, const struct meta_sink *s, char *err,
    size_t errlen)
{
	return meta_text_section(in, s, TD_OPT_CMDLINES, "saved_cmdlines", 1,
	    err, errlen);
}

static int
meta_option_str(const struct meta_sink *s, enum td_opt id, const char *str)
{
	return s->option(s->arg, id, str, strlen(str) + 1);
}

/* Options describing the machine and the recording. */
int
meta_write_options(struct instance *in, const struct meta_sink *s,
    uint64_t trace_id, char *err, size_t errlen)
{
	struct utsname u;
	char *clock, *uts = NULL;
	int ret;

	clock = instance_read(in, "trace_clock", NULL);
	if (uname(&u) == 0)
		xasprintf(&uts, "%s %s %s %s", u.sysname, u.nodename,
		    u.release, u.machine);
	ret = 0;
	if (meta_option_str(s, TD_OPT_TRACECLOCK, clock ? clock : "") == -1 ||
	    meta_option_str(s, TD_OPT_UNAME, uts ? uts : "") == -1 ||
	    meta_option_str(s, TD_OPT_VERSION,
	    "tracedock " PACKAGE_VERSION) == -1 ||
	    s->option(s->arg, TD_OPT_TRACEID, &trace_id,
	    sizeof trace_id) == -1)
		ret = -1;
	free(clock);
	free(uts);
	if (ret)
		return meta_fail(err, errlen, "cannot write options");
	return 0;
}

static uint64_t
meta_stat_value(const char *text, const char *key)
{
	const char *p = text;
	size_t n = strlen(key);

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, n) == 0 && p[n] == ':')
			return strtoull(p + n + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return 0;
}

/* Pick the counters tdagent reports out of a stats file. */
void
meta_parse_cpustat(const char *text, struct meta_cpustat *st)
{
	st->entries = meta_stat_value(text, "entries");
	st->overrun = meta_stat_value(text, "overrun");
	st->commit_overrun = meta_stat_value(text, "commit overrun");
	st->dropped = meta_stat_value(text, "dropped events");
	st->read = meta_stat_value(text, "read events");
}

/* CPUSTAT options: "CPU: N\n" then the stats file. */
int
meta_write_cpustats(struct instance *in, int ncpus,
    const struct meta_sink *s, struct meta_cpustat *st, char *err,
    size_t errlen)
{
	struct td_buf b;
	char file[64], *text;
	int cpu, ret = 0;

	td_buf_init(&b, TD_MAX_OPTION_SIZE);
	for (cpu = 0; cpu < ncpus; cpu++) {
		snprintf(file, sizeof file, "per_cpu/cpu%d/stats", cpu);
		text = instance_read(in, file, NULL);
		memset(&st[cpu], 0, sizeof st[cpu]);
		if (text == NULL)
			continue;
		meta_parse_cpustat(text, &st[cpu]);
		td_buf_reset(&b);
		if (td_buf_printf(&b, "CPU: %d\n%s", cpu, text) == -1 ||
		    td_buf_add(&b, "", 1) == -1 ||
		    s->option(s->arg, TD_OPT_CPUSTAT, b.data, b.len) == -1)
			ret = -1;
		free(text);
	}
	td_buf_free(&b);
	if (ret == -1)
		return meta_fail(err, errlen, "cannot write CPU stats");
	return 0;
}
