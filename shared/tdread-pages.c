/*
 * tdread-pages.c: the ring-buffer pages of each CPU of a trace.dat file
 * (see tdread.h), read raw or chunk by chunk and cut into pages for the
 * caller's callback.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "tdlimits.h"
#include "tdread.h"
#include "tdread-local.h"
#include "banned.h"

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
