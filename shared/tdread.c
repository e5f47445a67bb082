/*
 * tdread.c: read trace.dat files back, v6 and v7 (see tdread.h).
 *
 * Everything is located at open time without trusting the file: the
 * initial format, then for v7 the linked options sections (CPUCOUNT, the
 * top-level BUFFER option and its section), for v6 the whole unframed header
 * walked field by field.  Sections are loaded only when asked for.  Every
 * offset read from the file goes through td_read_at(), which refuses ranges
 * past the end of the file, and every size is compared with a cap of
 * tdlimits.h before memory is allocated for it.
 *
 * v7 sections are found through their section-offset options (16..21), as
 * trace-cmd does, and failing that by walking the chain of section headers
 * from the end of the initial format; STRINGS, which has no option, is
 * always found by the walk.  Options sections are required to appear at
 * increasing offsets, which bounds the walk of the list even on a file whose
 * DONE records point backwards.
 */
#include <byteswap.h>
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
#include "xmalloc.h"
#include "banned.h"

#define TD_MAGIC		"\027\010\104tracing"
#define TD_MAGIC_LEN		10
#define TD_SECT_HDR		16
#define TD_SECT_COMPRESSED	0x1
/* Longest version or codec string of the initial format (with its NUL). */
#define TD_HDR_STR		64

/* Where the content of a v6 metadata section lies. */
struct td_v6_sect {
	uint64_t	 off;
	uint64_t	 size;
	bool		 present;
};

/* Stored data of one CPU of the top-level buffer. */
struct td_read_cpu {
	uint64_t	 off;		/* v7 compressed: the chunk count */
	uint64_t	 size;		/* bytes after the count */
};

/* An open file: its declared layout and where its parts lie. */
struct td_read {
	int			 fd;
	int			 ioerr;		/* pread() error of this call */
	uint64_t		 fsize;
	int			 version;
	bool			 swap;
	int			 long_size;
	uint32_t		 page_size;
	enum td_codec_id	 codec;
	struct td_codec		*dec;
	uint64_t		 hdr_end;	/* end of the initial format */
	uint64_t		 opts_off;	/* v7: first options section */
	uint64_t		 v6_opts;	/* v6: first option record */
	uint64_t		 v6_opts_len;	/* v6: bytes of the records */
	struct td_v6_sect	 v6[TD_OPT_CMDLINES + 1];
	int			 ncpus;
	char			*clock;
	bool			 cpu_compressed;
	struct td_read_cpu	*cpu;
};

/* Callback of the options walk: <0 error, 0 go on, >0 stop. */
typedef int (*td_read_opt_fn)(struct td_read *, uint16_t, const uint8_t *,
    uint32_t, void *);

/*
 * Fail a read of the file: EBADMSG for a malformed file, or the error of
 * pread() if one happened during the current call.
 */
static int
td_read_bad(const struct td_read *r)
{
	errno = r->ioerr != 0 ? r->ioerr : EBADMSG;
	return -1;
}

static uint16_t
td_read_u16(const struct td_read *r, const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof v);
	return r->swap ? bswap_16(v) : v;
}

static uint32_t
td_read_u32(const struct td_read *r, const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof v);
	return r->swap ? bswap_32(v) : v;
}

static uint64_t
td_read_u64(const struct td_read *r, const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof v);
	return r->swap ? bswap_64(v) : v;
}

/* Read exactly n bytes at off; EBADMSG if the range is not in the file. */
static int
td_read_at(struct td_read *r, uint64_t off, void *p, size_t n)
{
	uint8_t *c = p;
	ssize_t got;

	if (off > r->fsize || n > r->fsize - off)
		return td_read_bad(r);
	while (n != 0) {
		got = pread(r->fd, c, n, (off_t)off);
		if (got == -1 && errno == EINTR)
			continue;
		if (got == -1) {
			r->ioerr = errno;
			return -1;
		}
		if (got == 0)
			return td_read_bad(r);	/* the file shrank */
		c += got;
		n -= got;
		off += got;
	}
	return 0;
}

/* True if [off, off + n) lies inside the file. */
static bool
td_read_in_file(const struct td_read *r, uint64_t off, uint64_t n)
{
	return off <= r->fsize && n <= r->fsize - off;
}

static int
td_read_get32(struct td_read *r, uint64_t *pos, uint32_t *v)
{
	uint8_t b[4];

	if (td_read_at(r, *pos, b, sizeof b) == -1)
		return -1;
	*v = td_read_u32(r, b);
	*pos += sizeof b;
	return 0;
}

static int
td_read_get64(struct td_read *r, uint64_t *pos, uint64_t *v)
{
	uint8_t b[8];

	if (td_read_at(r, *pos, b, sizeof b) == -1)
		return -1;
	*v = td_read_u64(r, b);
	*pos += sizeof b;
	return 0;
}

static int
td_read_skip(struct td_read *r, uint64_t *pos, uint64_t n)
{
	if (!td_read_in_file(r, *pos, n))
		return td_read_bad(r);
	*pos += n;
	return 0;
}

/* Read a NUL-terminated string of at most cap bytes (NUL included). */
static int
td_read_str(struct td_read *r, uint64_t *pos, char *s, size_t cap)
{
	size_t n = cap;
	char *nul;

	if (*pos > r->fsize)
		return td_read_bad(r);
	if (r->fsize - *pos < n)
		n = r->fsize - *pos;
	if (n == 0 || td_read_at(r, *pos, s, n) == -1)
		return td_read_bad(r);
	if ((nul = memchr(s, '\0', n)) == NULL)
		return td_read_bad(r);
	*pos += (uint64_t)(nul - s) + 1;
	return 0;
}

/* Skip a NUL-terminated string of any length (bounded by the file). */
static int
td_read_skip_str(struct td_read *r, uint64_t *pos)
{
	char tmp[256], *nul;
	size_t n;

	for (;;) {
		if (*pos >= r->fsize)
			return td_read_bad(r);
		n = r->fsize - *pos < sizeof tmp ? r->fsize - *pos : sizeof tmp;
		if (td_read_at(r, *pos, tmp, n) == -1)
			return -1;
		if ((nul = memchr(tmp, '\0', n)) != NULL) {
			*pos += (uint64_t)(nul - tmp) + 1;
			return 0;
		}
		*pos += n;
	}
}

/*
 * Append the content of the section whose header is at off to out,
 * decompressing it; the header must carry want_id.
 */
static int
td_read_sect_load(struct td_read *r, uint64_t off, uint16_t want_id,
    struct td_buf *out)
{
	uint8_t h[TD_SECT_HDR], blk[8], *tmp = NULL, one;
	uint64_t size;
	uint32_t csize, usize;
	size_t old = out->len;
	void *dst;

	if (off < r->hdr_end || td_read_at(r, off, h, sizeof h) == -1)
		return td_read_bad(r);
	size = td_read_u64(r, h + 8);
	if (td_read_u16(r, h) != want_id ||
	    !td_read_in_file(r, off + TD_SECT_HDR, size))
		return td_read_bad(r);
	off += TD_SECT_HDR;
	if (!(td_read_u16(r, h + 2) & TD_SECT_COMPRESSED)) {
		if (size > TD_MAX_SECTION_SIZE)
			return td_read_bad(r);
		if (td_buf_add_zero(out, size) == -1)
			return -1;
		if (size != 0 &&
		    td_read_at(r, off, out->data + old, size) == -1)
			goto fail;
		return 0;
	}
	if (r->codec == TD_CODEC_NONE || size < sizeof blk ||
	    td_read_at(r, off, blk, sizeof blk) == -1)
		return td_read_bad(r);
	csize = td_read_u32(r, blk);
	usize = td_read_u32(r, blk + 4);
	/*
	 * A claimed size far beyond what the block could expand to is a lie:
	 * refuse it before allocating for it.
	 */
	if (csize != size - sizeof blk || csize > TD_MAX_SECTION_SIZE ||
	    usize > TD_MAX_SECTION_SIZE ||
	    usize > (uint64_t)csize * TD_MAX_EXPANSION + 65536)
		return td_read_bad(r);
	if ((tmp = malloc(csize ? csize : 1)) == NULL)
		return -1;
	if (td_read_at(r, off + sizeof blk, tmp, csize) == -1)
		goto fail;
	if (td_buf_add_zero(out, usize) == -1)
		goto fail;
	dst = usize ? (void *)(out->data + old) : (void *)&one;
	if (td_codec_decompress(r->dec, tmp, csize, dst, usize) == -1)
		goto fail;
	free(tmp);
	return 0;
fail:
	free(tmp);
	out->len = old;
	return -1;
}

/* Walk the option records of one block held in memory. */
static int
td_read_opts_block(struct td_read *r, const uint8_t *p, size_t len,
    td_read_opt_fn fn, void *arg, uint64_t *next)
{
	size_t pos = 0;
	uint32_t size;
	uint16_t id;
	int ret;

	while (pos < len) {
		if (len - pos < 6)
			return td_read_bad(r);
		id = td_read_u16(r, p + pos);
		size = td_read_u32(r, p + pos + 2);
		pos += 6;
		if (size > len - pos || size > TD_MAX_OPTION_SIZE)
			return td_read_bad(r);
		if (id == TD_OPT_DONE && next != NULL) {
			if (size != 8)
				return td_read_bad(r);
			*next = td_read_u64(r, p + pos);
			return 0;
		}
		if ((ret = fn(r, id, p + pos, size, arg)) != 0)
			return ret;
		pos += size;
	}
	/* v7 options sections end with DONE; the v6 block has no DONE */
	return next != NULL ? td_read_bad(r) : 0;
}

/* Call fn for every option record of the file, in file order. */
static int
td_read_opts_walk(struct td_read *r, td_read_opt_fn fn, void *arg)
{
	struct td_buf b;
	uint64_t off, prev = 0, next;
	int ret = 0;

	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	if (r->version == 6) {
		if (r->v6_opts_len != 0) {
			if (td_buf_add_zero(&b, r->v6_opts_len) == -1 ||
			    td_read_at(r, r->v6_opts, b.data, b.len) == -1)
				ret = -1;
			else
				ret = td_read_opts_block(r, b.data, b.len, fn,
				    arg, NULL);
		}
		td_buf_free(&b);
		return ret;
	}
	for (off = r->opts_off; off != 0; off = next) {
		if (off <= prev) {
			ret = td_read_bad(r);
			break;
		}
		td_buf_reset(&b);
		next = 0;
		if (td_read_sect_load(r, off, TD_OPT_DONE, &b) == -1) {
			ret = -1;
			break;
		}
		ret = td_read_opts_block(r, b.data, b.len, fn, arg, &next);
		if (ret != 0)
			break;
		prev = off;
	}
	td_buf_free(&b);
	return ret;
}

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

/* Open a trace.dat file and check its layout. */
struct td_read *
td_read_open(const char *path)
{
	struct td_read *r;
	struct stat st;
	uint8_t b[TD_MAGIC_LEN + 2];
	char vers[TD_HDR_STR];
	uint64_t pos = 0;
	uint16_t one = 1;
	bool host_be = *(uint8_t *)&one == 0;
	int saved;

	r = xcalloc(1, sizeof *r);
	if ((r->fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
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

/* State of td_read_option() and of the section-offset lookup. */
struct td_read_find {
	uint16_t	 id;
	int		 nth;
	struct td_buf	*out;
	bool		 found;
};

static int
td_read_find_cb(struct td_read *r, uint16_t id, const uint8_t *p,
    uint32_t n, void *arg)
{
	struct td_read_find *f = arg;

	if (id != f->id || f->nth-- != 0)
		return 0;
	if (td_buf_add(f->out, p, n) == -1)
		return -1;
	f->found = true;
	return 1;
}

/* Copy the data of the nth option with this id. */
int
td_read_option(struct td_read *r, enum td_opt id, int nth,
    struct td_buf *out)
{
	struct td_read_find f = { id, nth, out, false };

	if (nth < 0 || (unsigned int)id > UINT16_MAX) {
		errno = EINVAL;
		return -1;
	}
	r->ioerr = 0;
	td_buf_reset(out);
	if (td_read_opts_walk(r, td_read_find_cb, &f) < 0) {
		td_buf_reset(out);
		return -1;
	}
	if (!f.found) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/*
 * Walk the chain of v7 section headers from the end of the initial format
 * and append every section with this id to out (all = false: the first).
 */
static int
td_read_sect_chain(struct td_read *r, uint16_t id, bool all,
    struct td_buf *out, bool *found)
{
	uint8_t h[TD_SECT_HDR];
	uint64_t pos = r->hdr_end, size;

	*found = false;
	while (pos < r->fsize) {
		if (td_read_at(r, pos, h, sizeof h) == -1)
			return -1;
		size = td_read_u64(r, h + 8);
		if (!td_read_in_file(r, pos + TD_SECT_HDR, size))
			return td_read_bad(r);
		if (td_read_u16(r, h) == id) {
			if (td_read_sect_load(r, pos, id, out) == -1)
				return -1;
			*found = true;
			if (!all)
				return 0;
		}
		pos += TD_SECT_HDR + size;
	}
	return 0;
}

/* Load the content of a metadata section. */
int
td_read_section(struct td_read *r, enum td_opt id, struct td_buf *out)
{
	struct td_buf off;
	struct td_read_find f;
	bool found;
	int ret;

	if (id != TD_OPT_STRINGS &&
	    (id < TD_OPT_HEADER_INFO || id > TD_OPT_CMDLINES)) {
		errno = EINVAL;
		return -1;
	}
	r->ioerr = 0;
	td_buf_reset(out);
	if (r->version == 6) {
		if (id == TD_OPT_STRINGS || !r->v6[id].present) {
			errno = ENOENT;
			return -1;
		}
		if (td_buf_add_zero(out, r->v6[id].size) == -1)
			return -1;
		if (td_read_at(r, r->v6[id].off, out->data,
		    r->v6[id].size) == -1) {
			td_buf_reset(out);
			return -1;
		}
		return 0;
	}
	if (id != TD_OPT_STRINGS) {
		/* the section-offset option is how trace-cmd finds it */
		td_buf_init(&off, 64);
		f.id = id;
		f.nth = 0;
		f.out = &off;
		f.found = false;
		ret = td_read_opts_walk(r, td_read_find_cb, &f);
		if (ret >= 0 && f.found) {
			ret = -1;
			if (off.len != 8)
				td_read_bad(r);
			else
				ret = td_read_sect_load(r,
				    td_read_u64(r, off.data), id, out);
			td_buf_free(&off);
			return ret;
		}
		td_buf_free(&off);
		if (ret < 0)
			return -1;
	}
	if (td_read_sect_chain(r, id, id == TD_OPT_STRINGS, out,
	    &found) == -1) {
		td_buf_reset(out);
		return -1;
	}
	if (!found) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* Cuts a byte stream into pages for the caller's callback. */
struct td_pager {
	uint8_t		*page;
	size_t		 fill;
	size_t		 size;
	int		(*cb)(void *, const void *, size_t);
	void		*arg;
};

static int
td_pager_feed(struct td_pager *pg, const uint8_t *p, size_t n)
{
	size_t k;

	while (n != 0) {
		if (pg->fill == 0 && n >= pg->size) {
			if (pg->cb(pg->arg, p, pg->size) != 0)
				return -1;
			p += pg->size;
			n -= pg->size;
			continue;
		}
		k = pg->size - pg->fill < n ? pg->size - pg->fill : n;
		memcpy(pg->page + pg->fill, p, k);
		pg->fill += k;
		p += k;
		n -= k;
		if (pg->fill == pg->size) {
			pg->fill = 0;
			if (pg->cb(pg->arg, pg->page, pg->size) != 0)
				return -1;
		}
	}
	return 0;
}

static int
td_pager_end(struct td_pager *pg)
{
	if (pg->fill != 0 && pg->cb(pg->arg, pg->page, pg->fill) != 0)
		return -1;
	pg->fill = 0;
	return 0;
}

/* Pages stored without compression: read them a chunk at a time. */
static int
td_read_pages_raw(struct td_read *r, const struct td_read_cpu *c,
    struct td_pager *pg)
{
	uint64_t pos = c->off, left = c->size;
	size_t step = (size_t)TD_CHUNK_PAGES * r->page_size, k;
	uint8_t *buf;
	int ret = 0;

	if ((buf = malloc(step)) == NULL)
		return -1;
	while (left != 0 && ret == 0) {
		k = left < step ? left : step;
		if (td_read_at(r, pos, buf, k) == -1 ||
		    td_pager_feed(pg, buf, k) == -1)
			ret = -1;
		pos += k;
		left -= k;
	}
	free(buf);
	return ret;
}

/*
 * Pages stored as chunks {u32 csize, u32 usize, data} after a u32 count:
 * check the whole table first, then decompress chunk by chunk.
 */
static int
td_read_pages_chunks(struct td_read *r, const struct td_read_cpu *c,
    struct td_pager *pg)
{
	uint64_t pos = c->off, end = c->off + 4 + c->size;
	uint32_t count, i, csize, usize, cmax = 0, umax = 0;
	uint8_t h[8], *cbuf = NULL, *ubuf = NULL;
	int ret = -1;

	if (td_read_get32(r, &pos, &count) == -1 || count > c->size / 8)
		return td_read_bad(r);
	for (i = 0; i < count; i++) {
		if (pos + 8 > end || td_read_at(r, pos, h, sizeof h) == -1)
			return td_read_bad(r);
		csize = td_read_u32(r, h);
		usize = td_read_u32(r, h + 4);
		if (csize > TD_MAX_CHUNK_SIZE || usize > TD_MAX_CHUNK_SIZE ||
		    csize > end - pos - 8)
			return td_read_bad(r);
		cmax = csize > cmax ? csize : cmax;
		umax = usize > umax ? usize : umax;
		pos += 8 + (uint64_t)csize;
	}
	if (pos != end)
		return td_read_bad(r);
	if ((cbuf = malloc(cmax ? cmax : 1)) == NULL ||
	    (ubuf = malloc(umax ? umax : 1)) == NULL)
		goto out;
	pos = c->off + 4;
	for (i = 0; i < count; i++) {
		if (td_read_at(r, pos, h, sizeof h) == -1)
			goto out;
		csize = td_read_u32(r, h);
		usize = td_read_u32(r, h + 4);
		if (td_read_at(r, pos + 8, cbuf, csize) == -1 ||
		    td_codec_decompress(r->dec, cbuf, csize, ubuf,
		    usize) == -1 || td_pager_feed(pg, ubuf, usize) == -1)
			goto out;
		pos += 8 + (uint64_t)csize;
	}
	ret = 0;
out:
	free(cbuf);
	free(ubuf);
	return ret;
}

/* Hand every page of a CPU to cb. */
int
td_read_cpu_pages(struct td_read *r, int cpu,
    int (*cb)(void *arg, const void *page, size_t len), void *arg)
{
	struct td_pager pg;
	const struct td_read_cpu *c;
	int ret;

	if (cpu < 0 || cpu >= r->ncpus || cb == NULL) {
		errno = EINVAL;
		return -1;
	}
	c = &r->cpu[cpu];
	if (c->size == 0)
		return 0;
	r->ioerr = 0;
	memset(&pg, 0, sizeof pg);
	pg.size = r->page_size;
	pg.cb = cb;
	pg.arg = arg;
	if ((pg.page = malloc(pg.size)) == NULL)
		return -1;
	if (r->cpu_compressed)
		ret = td_read_pages_chunks(r, c, &pg);
	else
		ret = td_read_pages_raw(r, c, &pg);
	if (ret == 0)
		ret = td_pager_end(&pg);
	free(pg.page);
	return ret;
}
