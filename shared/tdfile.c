/*
 * tdfile.c: write trace.dat files, version 7 (as trace-cmd 3.1.6 reads them)
 * and version 6: the writer's life cycle, metadata sections, options and
 * the finish.  The per-CPU spools are tdspool.c's, checkpoint and restore
 * tdfile-state.c's; the state they share is in tdfile-local.h.
 *
 * Version 7 layout written here:
 *
 *	initial format (magic, "7", endian, long size, page size, codec name
 *	    and version, u64 offset of the options section)
 *	metadata sections as the caller adds them (HEADER_INFO, FTRACE_EVENTS,
 *	    EVENT_FORMATS, KALLSYMS, PRINTK, CMDLINES), each a 16-byte header
 *	    {u16 id, u16 flags, u32 string id, u64 size} then, when compressed,
 *	    one block {u32 csize, u32 usize, data} (with zstd, data is a run of
 *	    frames of 64 KiB of content each, see TD_SEC_FRAME)
 *	BUFFER section: per CPU, page aligned, u32 chunk count then chunks
 *	    {u32 csize, u32 usize, data} of up to TD_CHUNK_PAGES pages
 *	OPTIONS section: caller options, section offsets, CPUCOUNT, BUFFER,
 *	    DONE {u64 0}
 *	STRINGS section: the section descriptions
 *
 * trace-cmd finds STRINGS by walking sections from the end of the initial
 * format, so sections are written back to back with exact sizes.  The BUFFER
 * option's per-CPU size counts the chunks but not the leading chunk count,
 * as trace-cmd 3.1.6 writes and reads it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "tdlimits.h"
#include "tdfile.h"
#include "tdfile-local.h"
#include "tdspool.h"
#include "xmalloc.h"
#include "banned.h"

#define TD_FLUSH_AT	(256 * 1024)
static const enum td_opt td_v6_order[] = {
	TD_OPT_HEADER_INFO, TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS,
	TD_OPT_KALLSYMS, TD_OPT_PRINTK, TD_OPT_CMDLINES,
};

static const char *
td_file_desc(enum td_opt id)
{
	switch (id) {
	case TD_OPT_HEADER_INFO:
		return "headers";
	case TD_OPT_FTRACE_EVENTS:
		return "ftrace events";
	case TD_OPT_EVENT_FORMATS:
		return "events format";
	case TD_OPT_KALLSYMS:
		return "kallsyms";
	case TD_OPT_PRINTK:
		return "printk";
	case TD_OPT_CMDLINES:
		return "command lines";
	case TD_OPT_DONE:
		return "options";
	case TD_OPT_BUFFER:
		return "buffer flyrecord ";
	case TD_OPT_STRINGS:
		return "strings";
	default:
		return NULL;
	}
}

/* Whether id is one of the six metadata sections. */
bool
td_file_meta_id(unsigned int id)
{
	return id < TD_NSECT && td_file_desc((enum td_opt)id) != NULL &&
	    id != TD_OPT_BUFFER && id != TD_OPT_STRINGS && id != TD_OPT_DONE;
}

/* The metadata sections of a version 6 file, in their order. */
enum td_opt
td_file_v6_section(int n)
{
	return td_v6_order[n];
}

static int
td_file_write(struct td_file *f, const void *p, size_t n)
{
	return td_fileio_write(f->fd, p, n, &f->off);
}
static int
td_file_pad(struct td_file *f, uint64_t align)
{
	static const uint8_t zero[4096];
	uint64_t n;
	size_t k;

	n = (align - f->off % align) % align;
	while (n != 0) {
		k = n > sizeof zero ? sizeof zero : n;
		if (td_file_write(f, zero, k) == -1)
			return -1;
		n -= k;
	}
	return 0;
}

/* Offset of s in the strings table, adding it if new; -1 if full. */
static int64_t
td_file_string(struct td_file *f, const char *s)
{
	size_t i, n;

	if (s == NULL)
		return -1;
	for (i = 0; i < f->strings.len; i += n + 1) {
		n = strlen((char *)f->strings.data + i);
		if (strcmp((char *)f->strings.data + i, s) == 0)
			return (int64_t)i;
	}
	n = f->strings.len;
	if (td_buf_add_str(&f->strings, s) == -1)
		return -1;
	return (int64_t)n;
}

static int
td_file_section_header(struct td_file *f, enum td_opt id, bool compressed,
    uint64_t size)
{
	uint8_t h[16];
	uint16_t id16 = id, flags = compressed ? 1 : 0;
	int64_t sid = td_file_string(f, td_file_desc(id));
	uint32_t sid32 = sid < 0 ? UINT32_MAX : (uint32_t)sid;

	memcpy(h, &id16, 2);
	memcpy(h + 2, &flags, 2);
	memcpy(h + 4, &sid32, 4);
	memcpy(h + 8, &size, 8);
	return td_file_write(f, h, sizeof h);
}

/* A writer for path with nothing open yet. */
struct td_file *
td_file_alloc(const char *path, const struct td_file_params *p)
{
	struct td_file *f;
	int e;

	if ((p->version != 6 && p->version != 7) ||
	    p->page_size < TD_MIN_PAGE_SIZE ||
	    p->page_size > TD_MAX_PAGE_SIZE ||
	    p->ncpus < 1 || p->ncpus > TD_MAX_CPUS ||
	    (p->long_size != 4 && p->long_size != 8) || p->clock == NULL ||
	    strlen(p->clock) > 255) {
		errno = EINVAL;
		return NULL;
	}
	f = xcalloc(1, sizeof *f);
	f->fd = -1;
	f->p = *p;
	f->p.clock = xstrdup(p->clock);
	if (f->p.version == 6)
		f->p.codec = TD_CODEC_NONE;
	f->compress = f->p.codec != TD_CODEC_NONE;
	f->path = xstrdup(path);
	xasprintf(&f->part, "%s.part", path);
	xasprintf(&f->opts_path, "%s.opts.part", path);
	/* unnamed spools cannot be reopened */
	if (f->p.unnamed_spools)
		f->p.spool_fds = 0;
	f->sec_id = -1;
	td_buf_init(&f->sec_in, TD_SEC_FRAME);
	td_buf_init(&f->sec_out, 2 * TD_FLUSH_AT + 1024 * 1024);
	td_buf_init(&f->options, TD_MAX_SECTION_SIZE);
	td_buf_init(&f->strings, TD_MAX_STRINGS_SIZE);
	if (p->codec_ctx != NULL && f->compress &&
	    td_codec_id(p->codec_ctx) != f->p.codec) {
		f->done = true;
		td_file_free(f);
		errno = EINVAL;
		return NULL;
	}
	f->p.codec_ctx = f->compress ? p->codec_ctx : NULL;
	f->codec = f->p.codec_ctx ? f->p.codec_ctx :
	    td_codec_new(f->p.codec, f->p.level);
	if (f->codec == NULL) {
		e = errno;
		f->done = true;
		td_file_free(f);
		errno = e;
		return NULL;
	}
	f->spools = td_spool_new(f->path, f->p.ncpus, f->p.page_size,
	    f->compress ? f->codec : NULL);
	td_spool_set_limits(f->spools, f->p.chunk_mem, f->p.spool_fds);
	return f;
}

/* Create the .part file and write the initial format. */
struct td_file *
td_file_create(const char *path, const struct td_file_params *p)
{
	struct td_file *f;
	struct td_buf h;
	uint16_t one = 1;
	int i;

	if ((f = td_file_alloc(path, p)) == NULL)
		return NULL;
	f->fd = td_fileio_open_new(f->part, p->mode ? p->mode : 0600);
	if (f->fd == -1) {
		i = errno;
		f->done = true;
		td_file_free(f);
		errno = i;
		return NULL;
	}

	td_buf_init(&h, 4096);
	td_buf_add(&h, "\027\010\104tracing", 10);
	td_buf_add_str(&h, f->p.version == 7 ? "7" : "6");
	td_buf_add(&h, (uint8_t[]){ *(uint8_t *)&one == 1 ? 0 : 1 }, 1);
	td_buf_add(&h, &f->p.long_size, 1);
	td_buf_add_u32(&h, f->p.page_size);
	if (f->p.version == 7) {
		td_buf_add_str(&h, td_codec_name(f->p.codec));
		td_buf_add_str(&h, td_codec_version(f->p.codec));
		f->opts_ptr_off = h.len;
		td_buf_add_u64(&h, 0);
	}
	i = td_file_write(f, h.data, h.len);
	td_buf_free(&h);
	if (i == 0 && f->p.unnamed_spools)
		i = td_spool_open_unnamed(f->spools);
	if (i == -1) {
		i = errno;
		td_file_abort(f);
		td_file_free(f);
		errno = i;
		return NULL;
	}
	return f;
}

static int td_file_sec_open(struct td_file *, enum td_opt);

/* Start a metadata section. */
int
td_file_section_begin(struct td_file *f, enum td_opt id)
{
	if (f->done || f->sec_id != -1 || !td_file_meta_id(id) ||
	    f->sec_off[id]) {
		errno = EINVAL;
		return -1;
	}
	return td_file_sec_open(f, id);
}

static int
td_file_sec_open(struct td_file *f, enum td_opt id)
{
	if (f->p.version == 6) {
		if (f->v6_next >= 6 || td_v6_order[f->v6_next] != id) {
			errno = EINVAL;
			return -1;
		}
		f->v6_next++;
	}
	f->sec_id = id;
	f->sec_hdr = f->off;
	f->sec_off[id] = f->off;
	f->sec_len = 0;
	if (f->p.version == 6)
		return 0;
	if (td_file_section_header(f, id, f->compress, 0) == -1)
		return -1;
	if (f->compress) {
		uint64_t blk = 0;

		if (td_file_write(f, &blk, sizeof blk) == -1)
			return -1;
		if (f->p.codec == TD_CODEC_ZSTD)
			return 0;
		/*
		 * zlib readers (trace-cmd's uncompress()) take one stream per
		 * block: it gets a context of its own for the section's life.
		 */
		f->stream = td_codec_new(f->p.codec, f->p.level);
		return td_codec_stream_begin(f->stream);
	}
	return 0;
}

static int
td_file_sec_flush(struct td_file *f)
{
	int ret = td_file_write(f, f->sec_out.data, f->sec_out.len);

	td_buf_reset(&f->sec_out);
	return ret;
}

/* zstd: compress n bytes of the open section as one frame. */
static int
td_file_sec_frame(struct td_file *f, const void *p, size_t n)
{
	const void *out;
	ssize_t c;

	if ((c = td_codec_compress_buf(f->codec, p, n, &out)) == -1)
		return -1;
	return td_file_write(f, out, (size_t)c);
}

/* zstd: gather the section's content into frames of TD_SEC_FRAME bytes. */
static int
td_file_sec_frames(struct td_file *f, const uint8_t *p, size_t n)
{
	size_t k;

	while (n != 0) {
		if (f->sec_in.len == 0 && n >= TD_SEC_FRAME) {
			k = TD_SEC_FRAME;
			if (td_file_sec_frame(f, p, k) == -1)
				return -1;
		} else {
			k = TD_SEC_FRAME - f->sec_in.len;
			if (k > n)
				k = n;
			if (td_buf_add(&f->sec_in, p, k) == -1)
				return -1;
			if (f->sec_in.len == TD_SEC_FRAME) {
				if (td_file_sec_frame(f, f->sec_in.data,
				    f->sec_in.len) == -1)
					return -1;
				td_buf_reset(&f->sec_in);
			}
		}
		p += k;
		n -= k;
	}
	return 0;
}

/* Drop what an open section holds in memory. */
static void
td_file_sec_release(struct td_file *f)
{
	td_buf_free(&f->sec_in);
	td_buf_free(&f->sec_out);
	td_codec_free(f->stream);
	f->stream = NULL;
}

/* Append content to the open section. */
int
td_file_section_write(struct td_file *f, const void *p, size_t n)
{
	if (f->sec_id == -1) {
		errno = EINVAL;
		return -1;
	}
	if (f->sec_len + n > TD_MAX_SECTION_SIZE) {
		errno = EFBIG;
		return -1;
	}
	f->sec_len += n;
	if (!f->compress)
		return td_file_write(f, p, n);
	if (f->stream == NULL)
		return td_file_sec_frames(f, p, n);
	while (n != 0) {
		size_t k = n > TD_FLUSH_AT ? TD_FLUSH_AT : n;

		if (td_codec_stream_feed(f->stream, p, k, &f->sec_out) == -1)
			return -1;
		if (f->sec_out.len >= TD_FLUSH_AT && td_file_sec_flush(f) == -1)
			return -1;
		p = (const uint8_t *)p + k;
		n -= k;
	}
	return 0;
}

/*
 * A section stored compressed in another file of this writer's version
 * (7) and codec, copied as it is stored: its block (the two u32 sizes,
 * then the codec's bytes) in pieces, never decompressed or held whole.
 */
int
td_file_section_raw_begin(struct td_file *f, enum td_opt id)
{
	if (f->done || f->sec_id != -1 || !td_file_meta_id(id) ||
	    f->sec_off[id] || f->p.version == 6 || !f->compress) {
		errno = EINVAL;
		return -1;
	}
	f->sec_id = id;
	f->sec_hdr = f->off;
	f->sec_off[id] = f->off;
	f->sec_len = 0;
	return td_file_section_header(f, id, true, 0);
}

int
td_file_section_raw_write(struct td_file *f, const void *p, size_t n)
{
	if (f->sec_id == -1) {
		errno = EINVAL;
		return -1;
	}
	return td_file_write(f, p, n);
}

int
td_file_section_raw_end(struct td_file *f)
{
	uint64_t size;

	if (f->sec_id == -1) {
		errno = EINVAL;
		return -1;
	}
	f->sec_id = -1;
	size = f->off - f->sec_hdr - 16;
	return td_fileio_pwrite(f->fd, &size, sizeof size, f->sec_hdr + 8);
}

/* Close the open section and patch its sizes. */
int
td_file_section_end(struct td_file *f)
{
	uint64_t size;
	uint32_t blk[2];

	if (f->sec_id == -1) {
		errno = EINVAL;
		return -1;
	}
	f->sec_id = -1;
	if (f->p.version == 6)
		return 0;
	if (f->compress) {
		/* zstd: the rest, or one empty frame for an empty section */
		if (f->stream == NULL && (f->sec_in.len > 0 ||
		    f->sec_len == 0) && td_file_sec_frame(f, f->sec_in.data,
		    f->sec_in.len) == -1)
			return -1;
		if (f->stream != NULL &&
		    (td_codec_stream_end(f->stream, &f->sec_out) == -1 ||
		    td_file_sec_flush(f) == -1))
			return -1;
		td_file_sec_release(f);
		size = f->off - f->sec_hdr - 16;
		if (size - 8 > UINT32_MAX) {
			errno = EFBIG;
			return -1;
		}
		blk[0] = (uint32_t)(size - 8);
		blk[1] = (uint32_t)f->sec_len;
		if (td_fileio_pwrite(f->fd, blk, sizeof blk, f->sec_hdr + 16))
			return -1;
	} else
		size = f->sec_len;
	return td_fileio_pwrite(f->fd, &size, sizeof size, f->sec_hdr + 8);
}

/* Forget the open section: cut the file back to where it began. */
int
td_file_section_cancel(struct td_file *f)
{
	if (f->sec_id == -1) {
		errno = EINVAL;
		return -1;
	}
	f->sec_off[f->sec_id] = 0;
	if (f->p.version == 6)
		f->v6_next--;
	f->sec_id = -1;
	td_file_sec_release(f);
	if (ftruncate(f->fd, f->sec_hdr) == -1 ||
	    lseek(f->fd, f->sec_hdr, SEEK_SET) == -1)
		return -1;
	f->off = f->sec_hdr;
	return 0;
}

/* Whether a section is open. */
int
td_file_in_section(const struct td_file *f)
{
	return f->sec_id != -1;
}

/* Whether section id is complete. */
int
td_file_has_section(const struct td_file *f, enum td_opt id)
{
	return id < TD_NSECT && f->sec_off[id] != 0 && f->sec_id != (int)id;
}

/* Write a whole section from memory. */
int
td_file_section_add(struct td_file *f, enum td_opt id, const void *p,
    size_t n)
{
	if (td_file_section_begin(f, id) == -1 ||
	    td_file_section_write(f, p, n) == -1 ||
	    td_file_section_end(f) == -1)
		return -1;
	return 0;
}

static int
td_file_option_rec(struct td_buf *b, enum td_opt id, const void *p, size_t n)
{
	size_t old = b->len;

	if (td_buf_add_u16(b, id) == -1 || td_buf_add_u32(b, n) == -1 ||
	    td_buf_add(b, p, n) == -1) {
		b->len = old;
		return -1;
	}
	return 0;
}

/* Queue an option. */
int
td_file_add_option(struct td_file *f, enum td_opt id, const void *p, size_t n)
{
	if (f->done || id == TD_OPT_DONE || id == TD_OPT_BUFFER ||
	    id == TD_OPT_CPUCOUNT || (id >= TD_OPT_STRINGS &&
	    id <= TD_OPT_CMDLINES) || n > TD_MAX_OPTION_SIZE) {
		errno = EINVAL;
		return -1;
	}
	if (f->options.len + 6 + n > TD_MAX_OPTIONS_TOTAL) {
		errno = EFBIG;
		return -1;
	}
	return td_file_option_rec(&f->options, id, p, n);
}

/* Append one page of a CPU. */
int
td_file_cpu_page(struct td_file *f, int cpu, const void *p, size_t n)
{
	if (f->done || cpu < 0 || cpu >= f->p.ncpus || n > f->p.page_size) {
		errno = EINVAL;
		return -1;
	}
	return td_spool_page(f->spools, cpu, p, n);
}

/* The codec of the CPU chunks (none for v6 or uncompressed). */
enum td_codec_id
td_file_chunk_codec(const struct td_file *f)
{
	return f->compress ? f->p.codec : TD_CODEC_NONE;
}

/* Append a chunk compressed elsewhere (after the CPU's pending pages). */
int
td_file_cpu_chunk(struct td_file *f, int cpu, const void *z, size_t zlen,
    uint32_t npages)
{
	if (f->done || !f->compress || cpu < 0 || cpu >= f->p.ncpus ||
	    npages == 0 || npages > TD_CHUNK_PAGES || zlen == 0 ||
	    zlen > UINT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	return td_spool_chunk(f->spools, cpu, z, zlen, npages);
}
static int
td_file_finish_v7(struct td_file *f)
{
	struct td_buf bo;
	uint64_t hdr, start, size, opts;
	uint32_t n = 0, cnt;
	int i, ret = -1;

	/* BUFFER section with the CPU data */
	hdr = f->off;
	if (td_file_section_header(f, TD_OPT_BUFFER, f->compress, 0) == -1)
		return -1;
	start = f->off;
	td_buf_init(&bo, TD_MAX_OPTION_SIZE);
	td_buf_add_u64(&bo, hdr);
	td_buf_add_str(&bo, "");
	td_buf_add_str(&bo, f->p.clock);
	td_buf_add_u32(&bo, f->p.page_size);
	td_buf_add_u32(&bo, 0);		/* patched below */
	for (i = 0; i < f->p.ncpus; i++) {
		if (td_spool_pages(f->spools, i) == 0)
			continue;
		if (td_file_pad(f, f->p.page_size) == -1)
			goto out;
		td_buf_add_u32(&bo, i);
		td_buf_add_u64(&bo, f->off);
		td_buf_add_u64(&bo, td_spool_bytes(f->spools, i));
		if (f->compress) {
			cnt = td_spool_chunks(f->spools, i);
			if (td_file_write(f, &cnt, sizeof cnt) == -1)
				goto out;
		}
		if (td_spool_copy(f->spools, i, f->fd, &f->off) == -1)
			goto out;
		n++;
	}
	memcpy(bo.data + 8 + 1 + strlen(f->p.clock) + 1 + 4, &n, 4);
	size = f->off - start;
	if (td_fileio_pwrite(f->fd, &size, sizeof size, hdr + 8) == -1)
		goto out;

	/* the options section */
	for (i = TD_OPT_HEADER_INFO; i <= TD_OPT_CMDLINES; i++)
		if (f->sec_off[i] && td_file_option_rec(&f->options, i,
		    &f->sec_off[i], 8) == -1)
			goto out;
	cnt = f->p.ncpus;
	if (td_file_option_rec(&f->options, TD_OPT_CPUCOUNT, &cnt, 4) == -1 ||
	    td_file_option_rec(&f->options, TD_OPT_BUFFER, bo.data,
	    bo.len) == -1)
		goto out;
	size = 0;
	if (td_file_option_rec(&f->options, TD_OPT_DONE, &size, 8) == -1)
		goto out;
	opts = f->off;
	if (td_file_section_header(f, TD_OPT_DONE, false,
	    f->options.len) == -1 ||
	    td_file_write(f, f->options.data, f->options.len) == -1)
		goto out;
	if (td_fileio_pwrite(f->fd, &opts, sizeof opts, f->opts_ptr_off) == -1)
		goto out;

	/* the strings, last: they must name themselves too */
	if (td_file_string(f, td_file_desc(TD_OPT_STRINGS)) == -1)
		goto out;
	{
		struct td_buf copy;

		td_buf_init(&copy, TD_MAX_STRINGS_SIZE);
		td_buf_add(&copy, f->strings.data, f->strings.len);
		ret = -1;
		if (td_file_sec_open(f, TD_OPT_STRINGS) == 0 &&
		    td_file_section_write(f, copy.data, copy.len) == 0 &&
		    td_file_section_end(f) == 0)
			ret = 0;
		td_buf_free(&copy);
	}
out:
	td_buf_free(&bo);
	return ret;
}

static int
td_file_finish_v6(struct td_file *f)
{
	struct td_buf b;
	uint64_t pos, clen;
	uint32_t ncpus = f->p.ncpus;
	uint16_t zero = 0;
	char clock[128];
	int i, ret = -1;

	if (f->v6_next != 6) {
		errno = EINVAL;
		return -1;
	}
	td_buf_init(&b, TD_MAX_SECTION_SIZE);
	td_buf_add_u32(&b, ncpus);
	td_buf_add(&b, "options  ", 10);
	td_buf_add(&b, f->options.data, f->options.len);
	td_buf_add_u16(&b, zero);
	td_buf_add(&b, "flyrecord", 10);
	snprintf(clock, sizeof clock, "[%s]", f->p.clock);
	clen = strlen(clock);
	/* data starts after the table and the clock, page aligned */
	pos = f->off + b.len + 16 * (uint64_t)ncpus + 8 + clen;
	/*
	 * A CPU without pages gets the page-aligned place where its data
	 * would start, and the file reaches it, as trace-cmd's own files:
	 * trace-cmd 3.1.6 cannot read a flyrecord whose CPUs all say offset
	 * 0 ("cannot read the rest of the header"), as the last piece of a
	 * rotated recording may be.
	 */
	for (i = 0; i < f->p.ncpus; i++) {
		uint64_t bytes = td_spool_bytes(f->spools, i);

		pos += (f->p.page_size - pos % f->p.page_size) %
		    f->p.page_size;
		td_buf_add_u64(&b, pos);
		td_buf_add_u64(&b, bytes);
		pos += bytes;
	}
	td_buf_add_u64(&b, clen);
	td_buf_add(&b, clock, clen);
	if (td_file_write(f, b.data, b.len) == -1)
		goto out;
	for (i = 0; i < f->p.ncpus; i++)
		if (td_file_pad(f, f->p.page_size) == -1 ||
		    (td_spool_bytes(f->spools, i) != 0 &&
		    td_spool_copy(f->spools, i, f->fd, &f->off) == -1))
			goto out;
	ret = 0;
out:
	td_buf_free(&b);
	return ret;
}

/* Close the spools (and remove them and the options side file). */
static void
td_file_close_spools(struct td_file *f, bool unlink_them)
{
	td_spool_close(f->spools, unlink_them);
	if (unlink_them && f->opts_path != NULL)
		unlink(f->opts_path);
}

/* Complete the file and move it into place. */
int
td_file_finish(struct td_file *f)
{
	int ret;

	if (f->done || f->sec_id != -1 || f->fd == -1) {
		errno = EINVAL;
		return -1;
	}
	if (td_spool_sync_all(f->spools) == -1)
		return -1;
	ret = f->p.version == 7 ? td_file_finish_v7(f) : td_file_finish_v6(f);
	if (ret == -1)
		return -1;
	if (!f->p.keep_part && rename(f->part, f->path) == -1)
		return -1;
	f->done = true;
	td_file_close_spools(f, true);
	close(f->fd);
	f->fd = -1;
	return 0;
}

/* Throw away an unfinished file. */
void
td_file_abort(struct td_file *f)
{
	int saved = errno;

	if (f->done)
		return;
	td_file_close_spools(f, true);
	if (f->fd != -1) {
		close(f->fd);
		f->fd = -1;
	}
	if (f->part != NULL)
		unlink(f->part);
	f->done = true;
	errno = saved;
}

/* Free a writer. */
void
td_file_free(struct td_file *f)
{
	if (f == NULL)
		return;
	if (!f->done && f->part != NULL)
		td_file_abort(f);
	td_spool_free(f->spools);
	td_file_sec_release(f);
	td_buf_free(&f->options);
	td_buf_free(&f->strings);
	if (f->codec != f->p.codec_ctx)
		td_codec_free(f->codec);
	free(f->path);
	free(f->part);
	free(f->opts_path);
	free((char *)(uintptr_t)f->p.clock);
	free(f);
}

/* Close and free a writer, its files left as they are. */
void
td_file_drop(struct td_file *f)
{
	if (f == NULL)
		return;
	f->done = true;
	if (f->fd != -1)
		close(f->fd);
	f->fd = -1;
	td_file_free(f);
}

/* Let go of an unfinished writer without removing anything. */
void
td_file_release(struct td_file *f)
{
	td_file_drop(f);
}

/* Share a block codec context from now on. */
int
td_file_share_codec(struct td_file *f, struct td_codec *ctx)
{
	if (ctx == NULL || !f->compress || f->codec == ctx)
		return 0;
	if (td_codec_id(ctx) != f->p.codec) {
		errno = EINVAL;
		return -1;
	}
	if (f->codec != f->p.codec_ctx)
		td_codec_free(f->codec);
	f->codec = f->p.codec_ctx = ctx;
	td_spool_set_codec(f->spools, ctx);
	return 0;
}

/* Bound a writer (restored ones have no bounds). */
void
td_file_set_limits(struct td_file *f, size_t chunk_mem, int spool_fds)
{
	f->p.chunk_mem = chunk_mem;
	f->p.spool_fds = f->p.unnamed_spools ? 0 : spool_fds;
	td_spool_set_limits(f->spools, f->p.chunk_mem, f->p.spool_fds);
}

/* What the writer holds in memory for its data. */
size_t
td_file_mem(const struct td_file *f)
{
	return td_spool_mem(f->spools) + f->options.cap + f->strings.cap +
	    f->sec_in.cap + f->sec_out.cap;
}

/* Pages received for a CPU. */
uint64_t
td_file_cpu_pages(const struct td_file *f, int cpu)
{
	if (cpu < 0 || cpu >= f->p.ncpus)
		return 0;
	return td_spool_pages(f->spools, cpu);
}

/* The parameters the writer was made with (bounds as last set). */
const struct td_file_params *
td_file_get_params(const struct td_file *f)
{
	return &f->p;
}

/* Size of the written file. */
uint64_t
td_file_size(const struct td_file *f)
{
	return f->off;
}

/* Bytes on disk so far: the file, its spools and its options. */
uint64_t
td_file_written(const struct td_file *f)
{
	uint64_t n = f->off + f->options.len;
	int i;

	for (i = 0; i < f->p.ncpus; i++)
		n += td_spool_bytes(f->spools, i);
	return n;
}
