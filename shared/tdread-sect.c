/*
 * tdread-sect.c: the metadata sections and options of a trace.dat file
 * (see tdread.h): td_read_section(), td_read_option(), and the walk of the
 * options that td_read_open() scans.
 *
 * v7 sections are found through their section-offset options (16..21), as
 * trace-cmd does, and failing that by walking the chain of section headers
 * from the end of the initial format; STRINGS, which has no option, is
 * always found by the walk.  Options sections are required to appear at
 * increasing offsets, which bounds the walk of the list even on a file whose
 * DONE records point backwards.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "compress.h"
#include "tdlimits.h"
#include "tdfile.h"
#include "tdread.h"
#include "tdread-local.h"
#include "banned.h"

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
int
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

int
td_read_section_span(struct td_read *r, enum td_opt id, uint64_t *off,
    uint64_t *n, bool *compressed)
{
	uint8_t h[TD_SECT_HDR];
	struct td_read_find f;
	struct td_buf ob;
	uint64_t pos;
	int ret;

	if (id < TD_OPT_HEADER_INFO || id > TD_OPT_CMDLINES) {
		errno = EINVAL;
		return -1;
	}
	r->ioerr = 0;
	*compressed = false;
	if (r->version == 6) {
		if (!r->v6[id].present) {
			errno = ENOENT;
			return -1;
		}
		*off = r->v6[id].off;
		*n = r->v6[id].size;
		return 0;
	}
	/* its section-offset option, else the first header of the chain */
	td_buf_init(&ob, 64);
	f.id = id;
	f.nth = 0;
	f.out = &ob;
	f.found = false;
	ret = td_read_opts_walk(r, td_read_find_cb, &f);
	if (ret < 0) {
		td_buf_free(&ob);
		return -1;
	}
	if (f.found) {
		if (ob.len != 8) {
			td_buf_free(&ob);
			return td_read_bad(r);
		}
		pos = td_read_u64(r, ob.data);
		td_buf_free(&ob);
	} else {
		td_buf_free(&ob);
		for (pos = r->hdr_end; pos < r->fsize; pos += TD_SECT_HDR +
		    td_read_u64(r, h + 8)) {
			if (td_read_at(r, pos, h, sizeof h) == -1)
				return -1;
			if (!td_read_in_file(r, pos + TD_SECT_HDR,
			    td_read_u64(r, h + 8)))
				return td_read_bad(r);
			if (td_read_u16(r, h) == id)
				break;
		}
		if (pos >= r->fsize) {
			errno = ENOENT;
			return -1;
		}
	}
	if (pos < r->hdr_end || td_read_at(r, pos, h, sizeof h) == -1 ||
	    td_read_u16(r, h) != id ||
	    !td_read_in_file(r, pos + TD_SECT_HDR, td_read_u64(r, h + 8)))
		return td_read_bad(r);
	*off = pos + TD_SECT_HDR;
	*n = td_read_u64(r, h + 8);
	*compressed = (td_read_u16(r, h + 2) & TD_SECT_COMPRESSED) != 0;
	return 0;
}

int
td_read_bytes(struct td_read *r, uint64_t off, void *p, size_t n)
{
	if (!td_read_in_file(r, off, n)) {
		errno = EINVAL;
		return -1;
	}
	return td_read_at(r, off, p, n);
}

/* A caller's callback for td_read_options(). */
struct td_read_user {
	int	(*cb)(void *, uint16_t, const void *, size_t);
	void	*arg;
};

static int
td_read_user_cb(struct td_read *r, uint16_t id, const uint8_t *p,
    uint32_t n, void *arg)
{
	struct td_read_user *u = arg;

	return u->cb(u->arg, id, p, n);
}

/* Every option record, in file order, to the caller's cb. */
int
td_read_options(struct td_read *r,
    int (*cb)(void *arg, uint16_t id, const void *p, size_t n), void *arg)
{
	struct td_read_user u = { cb, arg };

	r->ioerr = 0;
	return td_read_opts_walk(r, td_read_user_cb, &u);
}
