/*
 * tdread.c: read trace.dat files back, v6 and v7 (see tdread.h): open a
 * file, check its initial format and find where every part lies; close;
 * the accessors.  Bounded reads are tdread-io.c's, sections and options
 * tdread-sect.c's, pages tdread-pages.c's; the state they share is in
 * tdread-local.h.
 *
 * Everything is located at open time without trusting the file: the
 * initial format, then for v7 the linked options sections (CPUCOUNT, the
 * top-level BUFFER option and its section), for v6 the whole unframed header
 * walked field by field.  Sections are loaded only when asked for.  Every
 * offset read from the file goes through td_read_at(), which refuses ranges
 * past the end of the file, and every size is compared with a cap of
 * tdlimits.h before memory is allocated for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "compress.h"
#include "tdlimits.h"
#include "tdfile.h"
#include "tdread.h"
#include "tdread-local.h"
#include "xmalloc.h"
#include "banned.h"

#define TD_MAGIC		"\027\010\104tracing"
#define TD_MAGIC_LEN		10
/* Longest version or codec string of the initial format (with its NUL). */
#define TD_HDR_STR		64

/* What the open-time walk of the v7 options collects. */
struct td_read_scan {
	bool		 have_ncpus;
	uint32_t	 ncpus;
	struct td_buf	 buffer;	/* data of the top BUFFER option */
	bool		 have_buffer;
};

static int
td_read_scan_cb(struct td_read *r, uint16_t id, const uint8_t *p,
    uint32_t n, void *arg)
{
	struct td_read_scan *s = arg;

	if (id == TD_OPT_CPUCOUNT) {
		if (n != 4 || s->have_ncpus)
			return td_read_bad(r);
		s->ncpus = td_read_u32(r, p);
		s->have_ncpus = true;
	} else if (id == TD_OPT_BUFFER && !s->have_buffer) {
		/* instances have a name; the top-level buffer has "" */
		if (n < 9 || p[8] != '\0')
			return 0;
		if (td_buf_add(&s->buffer, p, n) == -1)
			return td_read_bad(r);
		s->have_buffer = true;
	}
	return 0;
}

/* Parse the top-level BUFFER option: clock, page size and CPU table. */
static int
td_read_parse_buffer(struct td_read *r, const uint8_t *p, size_t n)
{
	const uint8_t *clock, *nul;
	uint8_t h[TD_SECT_HDR];
	uint64_t sect, sect_end, off, size, need;
	uint32_t cnt, cpu, i;
	size_t pos;

	/* u64 section, "" name, clock NUL, u32 page size, u32 count */
	sect = td_read_u64(r, p);
	pos = 9;
	clock = p + pos;
	if ((nul = memchr(clock, '\0', n - pos)) == NULL)
		return td_read_bad(r);
	pos = (size_t)(nul - p) + 1;
	if (n - pos < 8)
		return td_read_bad(r);
	if (td_read_u32(r, p + pos) != r->page_size)
		return td_read_bad(r);
	cnt = td_read_u32(r, p + pos + 4);
	pos += 8;
	if (cnt > TD_MAX_CPUS || (n - pos) != (size_t)cnt * 20)
		return td_read_bad(r);
	free(r->clock);
	r->clock = xstrdup((const char *)clock);

	if (td_read_at(r, sect, h, sizeof h) == -1 || sect < r->hdr_end ||
	    td_read_u16(r, h) != TD_OPT_BUFFER)
		return td_read_bad(r);
	size = td_read_u64(r, h + 8);
	if (!td_read_in_file(r, sect + TD_SECT_HDR, size))
		return td_read_bad(r);
	sect += TD_SECT_HDR;
	sect_end = sect + size;
	r->cpu_compressed = (td_read_u16(r, h + 2) & TD_SECT_COMPRESSED) != 0;
	if (r->cpu_compressed && r->codec == TD_CODEC_NONE)
		return td_read_bad(r);

	for (i = 0; i < cnt; i++, pos += 20) {
		cpu = td_read_u32(r, p + pos);
		off = td_read_u64(r, p + pos + 4);
		size = td_read_u64(r, p + pos + 12);
		if (cpu >= (uint32_t)r->ncpus || r->cpu[cpu].size != 0)
			return td_read_bad(r);
		need = size + (r->cpu_compressed ? 4 : 0);
		if (size == 0)
			continue;
		if (need < size || off < sect || off > sect_end ||
		    need > sect_end - off)
			return td_read_bad(r);
		r->cpu[cpu].off = off;
		r->cpu[cpu].size = size;
	}
	return 0;
}

static int
td_read_open_v7(struct td_read *r, uint64_t pos)
{
	struct td_read_scan scan;
	char name[TD_HDR_STR], vers[TD_HDR_STR];
	int ret = -1;

	if (td_read_str(r, &pos, name, sizeof name) == -1 ||
	    td_read_str(r, &pos, vers, sizeof vers) == -1 ||
	    td_read_get64(r, &pos, &r->opts_off) == -1)
		return td_read_bad(r);
	if (td_codec_parse(name, &r->codec) == -1) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if ((r->dec = td_codec_new(r->codec, 0)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	r->hdr_end = pos;
	if (r->opts_off < r->hdr_end)
		return td_read_bad(r);

	memset(&scan, 0, sizeof scan);
	td_buf_init(&scan.buffer, TD_MAX_OPTION_SIZE);
	if (td_read_opts_walk(r, td_read_scan_cb, &scan) != 0)
		goto out;
	if (!scan.have_ncpus || scan.ncpus < 1 || scan.ncpus > TD_MAX_CPUS) {
		td_read_bad(r);
		goto out;
	}
	r->ncpus = (int)scan.ncpus;
	r->cpu = xcalloc(r->ncpus, sizeof *r->cpu);
	if (scan.have_buffer &&
	    td_read_parse_buffer(r, scan.buffer.data, scan.buffer.len) == -1)
		goto out;
	ret = 0;
out:
	td_buf_free(&scan.buffer);
	return ret;
}

/* Skip count items of {u64 size, data}: the v6 format lists. */
static int
td_read_v6_skip_list(struct td_read *r, uint64_t *pos, uint32_t count)
{
	uint64_t size;
	uint32_t i;

	if (count > (r->fsize - *pos) / 8)
		return td_read_bad(r);
	for (i = 0; i < count; i++)
		if (td_read_get64(r, pos, &size) == -1 ||
		    td_read_skip(r, pos, size) == -1)
			return td_read_bad(r);
	return 0;
}

/* Walk one v6 metadata field and note where its content lies. */
static int
td_read_v6_sect(struct td_read *r, uint64_t *pos, enum td_opt id)
{
	uint64_t start = *pos, size;
	uint32_t cnt, nsys, i;
	char label[16];

	switch (id) {
	case TD_OPT_HEADER_INFO:
		if (td_read_str(r, pos, label, 12) == -1 ||
		    strcmp(label, "header_page") != 0 ||
		    td_read_get64(r, pos, &size) == -1 ||
		    td_read_skip(r, pos, size) == -1 ||
		    td_read_str(r, pos, label, 13) == -1 ||
		    strcmp(label, "header_event") != 0 ||
		    td_read_get64(r, pos, &size) == -1 ||
		    td_read_skip(r, pos, size) == -1)
			return td_read_bad(r);
		break;
	case TD_OPT_FTRACE_EVENTS:
		if (td_read_get32(r, pos, &cnt) == -1 ||
		    td_read_v6_skip_list(r, pos, cnt) == -1)
			return td_read_bad(r);
		break;
	case TD_OPT_EVENT_FORMATS:
		if (td_read_get32(r, pos, &nsys) == -1 ||
		    nsys > (r->fsize - *pos) / 5)
			return td_read_bad(r);
		for (i = 0; i < nsys; i++)
			if (td_read_skip_str(r, pos) == -1 ||
			    td_read_get32(r, pos, &cnt) == -1 ||
			    td_read_v6_skip_list(r, pos, cnt) == -1)
				return td_read_bad(r);
		break;
	case TD_OPT_KALLSYMS:
	case TD_OPT_PRINTK:
		if (td_read_get32(r, pos, &cnt) == -1 ||
		    td_read_skip(r, pos, cnt) == -1)
			return td_read_bad(r);
		break;
	default:
		if (td_read_get64(r, pos, &size) == -1 ||
		    td_read_skip(r, pos, size) == -1)
			return td_read_bad(r);
		break;
	}
	if (*pos - start > TD_MAX_SECTION_SIZE)
		return td_read_bad(r);
	r->v6[id].off = start;
	r->v6[id].size = *pos - start;
	r->v6[id].present = true;
	return 0;
}

/* Take the clock name out of "[local] global ..." or a bare name. */
static void
td_read_set_clock(struct td_read *r, const char *text, size_t len)
{
	const char *open, *close, *s = text, *e = text + len;

	if ((open = memchr(text, '[', len)) != NULL &&
	    (close = memchr(open, ']', e - open)) != NULL) {
		s = open + 1;
		e = close;
	} else {
		while (s < e && (*s == ' ' || *s == '\n' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\n' ||
		    e[-1] == '\t' || e[-1] == '\0'))
			e--;
	}
	free(r->clock);
	r->clock = xmalloc((size_t)(e - s) + 1);
	memcpy(r->clock, s, (size_t)(e - s));
	r->clock[e - s] = '\0';
}

static int
td_read_v6_flyrecord(struct td_read *r, uint64_t pos)
{
	uint64_t off, size, clen;
	char *text;
	int i;

	r->cpu = xcalloc(r->ncpus, sizeof *r->cpu);
	for (i = 0; i < r->ncpus; i++) {
		if (td_read_get64(r, &pos, &off) == -1 ||
		    td_read_get64(r, &pos, &size) == -1)
			return td_read_bad(r);
		if (size == 0)
			continue;
		if (!td_read_in_file(r, off, size))
			return td_read_bad(r);
		r->cpu[i].off = off;
		r->cpu[i].size = size;
	}
	if (td_read_get64(r, &pos, &clen) == -1 ||
	    clen > TD_MAX_OPTION_SIZE || !td_read_in_file(r, pos, clen))
		return td_read_bad(r);
	text = xmalloc(clen + 1);
	if (td_read_at(r, pos, text, clen) == -1) {
		free(text);
		return td_read_bad(r);
	}
	td_read_set_clock(r, text, clen);
	free(text);
	return 0;
}

static int
td_read_open_v6(struct td_read *r, uint64_t pos)
{
	uint32_t ncpus, size;
	uint16_t id;
	uint8_t b[2];
	char label[10];
	bool opts_seen = false;
	int i;

	r->codec = TD_CODEC_NONE;
	r->hdr_end = pos;
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		if (td_read_v6_sect(r, &pos, i) == -1)
			return -1;
	if (td_read_get32(r, &pos, &ncpus) == -1 || ncpus < 1 ||
	    ncpus > TD_MAX_CPUS)
		return td_read_bad(r);
	r->ncpus = (int)ncpus;
	for (;;) {
		if (r->header_only && opts_seen && pos == r->fsize) {
			/* a client's header: the listener adds the data */
			r->cpu = xcalloc(r->ncpus, sizeof *r->cpu);
			return 0;
		}
		if (td_read_at(r, pos, label, sizeof label) == -1)
			return td_read_bad(r);
		pos += sizeof label;
		if (memcmp(label, "options  ", 10) == 0 && !opts_seen) {
			opts_seen = true;
			r->v6_opts = pos;
			for (;;) {
				if (td_read_at(r, pos, b, sizeof b) == -1)
					return td_read_bad(r);
				if ((id = td_read_u16(r, b)) == 0)
					break;
				pos += 2;
				if (td_read_get32(r, &pos, &size) == -1 ||
				    size > TD_MAX_OPTION_SIZE ||
				    td_read_skip(r, &pos, size) == -1)
					return td_read_bad(r);
			}
			r->v6_opts_len = pos - r->v6_opts;
			if (r->v6_opts_len > TD_MAX_SECTION_SIZE)
				return td_read_bad(r);
			pos += 2;
		} else if (memcmp(label, "flyrecord", 10) == 0) {
			return td_read_v6_flyrecord(r, pos);
		} else if (memcmp(label, "latency  ", 10) == 0) {
			/* latency text, no per-CPU data */
			r->cpu = xcalloc(r->ncpus, sizeof *r->cpu);
			return 0;
		} else
			return td_read_bad(r);
	}
}

/* Check the file r->fd holds: its initial format and where its parts lie. */
static struct td_read *
td_read_init(struct td_read *r)
{
	struct stat st;
	uint8_t b[TD_MAGIC_LEN + 2];
	char vers[TD_HDR_STR];
	uint64_t pos = 0;
	uint16_t one = 1;
	bool host_be = *(uint8_t *)&one == 0;
	int saved;

	if (r->fd == -1)
		goto fail;
	if (fstat(r->fd, &st) == -1)
		goto fail;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto fail;
	}
	r->fsize = (uint64_t)st.st_size;
	if (td_read_at(r, pos, b, TD_MAGIC_LEN) == -1 ||
	    memcmp(b, TD_MAGIC, TD_MAGIC_LEN) != 0) {
		td_read_bad(r);
		goto fail;
	}
	pos += TD_MAGIC_LEN;
	if (td_read_str(r, &pos, vers, sizeof vers) == -1)
		goto fail;
	if (strcmp(vers, "6") == 0)
		r->version = 6;
	else if (strcmp(vers, "7") == 0)
		r->version = 7;
	else {
		errno = EOPNOTSUPP;
		goto fail;
	}
	/* endian, long size, page size */
	if (td_read_at(r, pos, b, 2) == -1 || b[0] > 1 ||
	    (b[1] != 4 && b[1] != 8)) {
		td_read_bad(r);
		goto fail;
	}
	r->swap = (b[0] == 1) != host_be;
	r->long_size = b[1];
	pos += 2;
	if (td_read_get32(r, &pos, &r->page_size) == -1 ||
	    r->page_size < TD_MIN_PAGE_SIZE ||
	    r->page_size > TD_MAX_PAGE_SIZE) {
		td_read_bad(r);
		goto fail;
	}
	if ((r->version == 7 ? td_read_open_v7(r, pos) :
	    td_read_open_v6(r, pos)) == -1)
		goto fail;
	if (r->clock == NULL)
		r->clock = xstrdup("");
	return r;
fail:
	saved = errno;
	td_read_close(r);
	errno = saved;
	return NULL;
}

/* Open a trace.dat file and check its layout. */
struct td_read *
td_read_open(const char *path)
{
	struct td_read *r = xcalloc(1, sizeof *r);

	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	return td_read_init(r);
}

/* Read the header a trace-cmd client sent, held in fd. */
struct td_read *
td_read_open_header(int fd)
{
	struct td_read *r = xcalloc(1, sizeof *r);

	r->header_only = true;
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return td_read_init(r);
}

/* Close a reader. */
void
td_read_close(struct td_read *r)
{
	if (r == NULL)
		return;
	if (r->fd != -1)
		close(r->fd);
	td_codec_free(r->dec);
	free(r->clock);
	free(r->cpu);
	free(r);
}

/* Version of the file. */
int
td_read_version(const struct td_read *r)
{
	return r->version;
}

/* Codec of the file. */
enum td_codec_id
td_read_codec(const struct td_read *r)
{
	return r->codec;
}

/* Page size of the file. */
uint32_t
td_read_page_size(const struct td_read *r)
{
	return r->page_size;
}

/* Long size of the recording machine. */
int
td_read_long_size(const struct td_read *r)
{
	return r->long_size;
}

/* CPU count of the recording. */
int
td_read_ncpus(const struct td_read *r)
{
	return r->ncpus;
}

/* Clock of the top-level buffer. */
const char *
td_read_clock(const struct td_read *r)
{
	return r->clock;
}

/* Stored bytes of one CPU. */
uint64_t
td_read_cpu_size(const struct td_read *r, int cpu)
{
	if (cpu < 0 || cpu >= r->ncpus)
		return 0;
	return r->cpu[cpu].size;
}

