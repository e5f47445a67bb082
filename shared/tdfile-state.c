/*
 * tdfile-state.c: checkpoint and restore of the trace.dat writer (tdfile.h),
 * for a writer that must outlive its process (tdlisten's resumable
 * recordings).  A checkpoint writes out what the writer holds in memory
 * and describes the rest; a restore checks a description, rebuilds the
 * writer from it and cuts its files back to what it says.
 *
 * Checkpoint state, host byte order: "tdck" u32 3, the parameters (version,
 * codec, level, page size, long size, CPUs, clock), the offsets, the
 * section offsets, u64 the length of the queued options (their bytes are
 * in PATH.opts.part, appended at each checkpoint), the strings, per CPU
 * {pages, spool bytes, chunks}, then the open section {id or UINT32_MAX,
 * header offset, content length, the content of its unfinished zstd
 * frame}.  Versions 1 (no open section) and 2 (the options' bytes in the
 * state) are still read.
 *
 * A checkpoint may fall inside a section: a large kallsyms must not hold
 * up the acknowledgements its sender waits for.  Not with zlib, whose one
 * stream per section keeps state no checkpoint can hold (EBUSY).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cursor.h"
#include "fileio.h"
#include "tdlimits.h"
#include "tdfile.h"
#include "tdfile-local.h"
#include "tdspool.h"
#include "banned.h"

#define TD_CK_MAGIC	0x6b636474	/* "tdck" */
#define TD_CK_VERSION	3
#define TD_CK_NO_SECTION UINT32_MAX

/* Append the options queued since the last checkpoint to the side file. */
static int
td_file_opts_sync(struct td_file *f)
{
	int fd, ret, e;

	if (f->opts_synced == f->options.len)
		return 0;
	fd = open(f->opts_path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1)
		return -1;
	ret = td_fileio_pwrite(fd, f->options.data + f->opts_synced,
	    f->options.len - f->opts_synced, f->opts_synced);
	e = errno;
	if (close(fd) == -1 && ret == 0) {
		ret = -1;
		e = errno;
	}
	if (ret == -1) {
		errno = e;
		return -1;
	}
	f->opts_synced = f->options.len;
	return 0;
}

/* Write out what the writer holds and describe it into b. */
int
td_file_checkpoint(struct td_file *f, struct td_buf *b)
{
	size_t old = b->len;
	uint32_t clen;
	int i, ok;

	if (f->done || f->fd == -1) {
		errno = EINVAL;
		return -1;
	}
	if (f->sec_id != -1 && f->stream != NULL) {
		errno = EBUSY;
		return -1;
	}
	if (td_spool_sync_all(f->spools) == -1)
		return -1;
	if (td_file_opts_sync(f) == -1)
		return -1;
	clen = (uint32_t)strlen(f->p.clock);
	ok = td_buf_add_u32(b, TD_CK_MAGIC) == 0 &&
	    td_buf_add_u32(b, TD_CK_VERSION) == 0 &&
	    td_buf_add_u32(b, (uint32_t)f->p.version) == 0 &&
	    td_buf_add_u32(b, (uint32_t)f->p.codec) == 0 &&
	    td_buf_add_u32(b, (uint32_t)f->p.level) == 0 &&
	    td_buf_add_u32(b, f->p.page_size) == 0 &&
	    td_buf_add_u32(b, f->p.long_size) == 0 &&
	    td_buf_add_u32(b, (uint32_t)f->p.ncpus) == 0 &&
	    td_buf_add_u32(b, clen) == 0 &&
	    td_buf_add(b, f->p.clock, clen) == 0 &&
	    td_buf_add_u64(b, f->off) == 0 &&
	    td_buf_add_u64(b, f->opts_ptr_off) == 0 &&
	    td_buf_add_u32(b, (uint32_t)f->v6_next) == 0 &&
	    td_buf_add(b, f->sec_off, sizeof f->sec_off) == 0 &&
	    td_buf_add_u64(b, f->options.len) == 0 &&
	    td_buf_add_u64(b, f->strings.len) == 0 &&
	    td_buf_add(b, f->strings.data, f->strings.len) == 0;
	for (i = 0; ok && i < f->p.ncpus; i++)
		ok = td_buf_add_u64(b, td_spool_pages(f->spools, i)) == 0 &&
		    td_buf_add_u64(b, td_spool_bytes(f->spools, i)) == 0 &&
		    td_buf_add_u32(b, td_spool_chunks(f->spools, i)) == 0;
	ok = ok && td_buf_add_u32(b, f->sec_id == -1 ? TD_CK_NO_SECTION :
	    (uint32_t)f->sec_id) == 0 &&
	    td_buf_add_u64(b, f->sec_id == -1 ? 0 : f->sec_hdr) == 0 &&
	    td_buf_add_u64(b, f->sec_id == -1 ? 0 : f->sec_len) == 0 &&
	    td_buf_add_u32(b, f->sec_id == -1 ? 0 :
	    (uint32_t)f->sec_in.len) == 0 &&
	    (f->sec_id == -1 || td_buf_add(b, f->sec_in.data,
	    f->sec_in.len) == 0);
	if (!ok) {
		b->len = old;
		errno = ENOBUFS;
		return -1;
	}
	return 0;
}

/*
 * Whether a checkpoint's open section (sid, f->sec_hdr, f->sec_len and
 * pending zstd content of len bytes) fits the rest of the state; opens it.
 */
static int
td_file_restore_section(struct td_file *f, uint32_t sid, uint32_t len)
{
	if (!td_file_meta_id(sid) || f->sec_off[sid] != f->sec_hdr ||
	    f->sec_hdr == 0 || f->sec_len > TD_MAX_SECTION_SIZE)
		return -1;
	if (f->p.version == 6 && (f->v6_next < 1 ||
	    td_file_v6_section(f->v6_next - 1) != (enum td_opt)sid))
		return -1;
	/* zlib sections are never checkpointed open */
	if (f->compress && f->p.codec != TD_CODEC_ZSTD)
		return -1;
	if (f->compress ? len >= TD_SEC_FRAME || len > f->sec_len :
	    len != 0 || f->sec_hdr + f->sec_len > f->off)
		return -1;
	f->sec_id = (int)sid;
	return 0;
}

/*
 * The options of a version 3 checkpoint: the first n bytes of the side
 * file, which is cut there (what was appended after the checkpoint goes).
 */
static int
td_file_restore_opts(struct td_file *f, uint64_t n)
{
	ssize_t r;
	int fd, e;

	if (n == 0) {
		if (unlink(f->opts_path) == -1 && errno != ENOENT)
			return -1;
		return 0;
	}
	if ((fd = open(f->opts_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if (td_buf_add_zero(&f->options, n) == -1)
		goto out_close;
	do
		r = pread(fd, f->options.data, n, 0);
	while (r == -1 && errno == EINTR);
	if (r != (ssize_t)n) {
		if (r >= 0)
			errno = EIO;	/* the checkpoint promised more */
		goto out_close;
	}
	if (ftruncate(fd, (off_t)n) == -1)
		goto out_close;
	close(fd);
	f->opts_synced = n;
	return 0;
out_close:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* A writer rebuilt from a checkpoint's description, its files cut back. */
struct td_file *
td_file_restore(const char *path, const void *state, size_t len)
{
	struct td_cur c;
	struct td_file_params p;
	struct td_file *f = NULL;
	char clock[256];
	const void *at;
	uint64_t n, chunk, opts, pages, bytes;
	uint32_t clen, ckv, sid, nchunks;
	int i, e;

	memset(&p, 0, sizeof p);
	td_cur_init(&c, state, len);
	if (td_cur_u32(&c) != TD_CK_MAGIC)
		goto bad;
	ckv = td_cur_u32(&c);
	if (ckv < 1 || ckv > TD_CK_VERSION)
		goto bad;
	p.version = (int)td_cur_u32(&c);
	p.codec = (enum td_codec_id)td_cur_u32(&c);
	p.level = (int)td_cur_u32(&c);
	p.page_size = td_cur_u32(&c);
	p.long_size = (uint8_t)td_cur_u32(&c);
	p.ncpus = (int)td_cur_u32(&c);
	clen = td_cur_u32(&c);
	if (td_cur_bad(&c) || clen >= sizeof clock ||
	    (at = td_cur_take(&c, clen)) == NULL)
		goto bad;
	memcpy(clock, at, clen);
	clock[clen] = '\0';
	p.clock = clock;
	if (p.version == 7 && p.codec != TD_CODEC_NONE &&
	    p.codec != TD_CODEC_ZLIB && p.codec != TD_CODEC_ZSTD)
		goto bad;
	/*
	 * Writers use fast levels (0 picks the codec's); a state that asks
	 * for zstd 22 would cost hundreds of MB per recording: damaged.
	 */
	if (p.level < 0 || p.level > TD_MAX_RESTORE_LEVEL)
		goto bad;
	if ((f = td_file_alloc(path, &p)) == NULL)
		goto bad;
	f->off = td_cur_u64(&c);
	f->opts_ptr_off = td_cur_u64(&c);
	f->v6_next = (int)td_cur_u32(&c);
	if ((at = td_cur_take(&c, sizeof f->sec_off)) == NULL)
		goto bad;
	memcpy(f->sec_off, at, sizeof f->sec_off);
	n = td_cur_u64(&c);
	opts = ckv >= 3 ? n : 0;
	if (td_cur_bad(&c) || n > TD_MAX_SECTION_SIZE ||
	    (ckv >= 3 && n > TD_MAX_OPTIONS_TOTAL) ||
	    (ckv < 3 && (n > td_cur_left(&c) ||
	    (at = td_cur_take(&c, n)) == NULL ||
	    td_buf_add(&f->options, at, n) == -1)))
		goto bad;
	n = td_cur_u64(&c);
	if (td_cur_bad(&c) || n > td_cur_left(&c) ||
	    (at = td_cur_take(&c, n)) == NULL ||
	    td_buf_add(&f->strings, at, n) == -1)
		goto bad;
	if (f->v6_next < 0 || f->v6_next > 6 || f->off < f->opts_ptr_off)
		goto bad;
	/* td_file_string() walks the table with strlen() */
	if (f->strings.len != 0 && f->strings.data[f->strings.len - 1] != '\0')
		goto bad;
	chunk = (size_t)TD_CHUNK_PAGES * f->p.page_size;
	for (i = 0; i < f->p.ncpus; i++) {
		pages = td_cur_u64(&c);
		bytes = td_cur_u64(&c);
		nchunks = td_cur_u32(&c);
		if (td_cur_bad(&c) || (!f->compress && bytes != pages *
		    f->p.page_size) || (f->compress && nchunks > pages) ||
		    pages > UINT64_MAX / chunk)
			goto bad;
		td_spool_set_counts(f->spools, i, pages, bytes, nchunks);
	}
	sid = ckv == 1 ? TD_CK_NO_SECTION : td_cur_u32(&c);
	if (sid != TD_CK_NO_SECTION) {
		f->sec_hdr = td_cur_u64(&c);
		f->sec_len = td_cur_u64(&c);
		clen = td_cur_u32(&c);
		if (td_cur_bad(&c) || td_file_restore_section(f, sid, clen) == -1 ||
		    (at = td_cur_take(&c, clen)) == NULL ||
		    td_buf_add(&f->sec_in, at, clen) == -1)
			goto bad;
	} else if (ckv != 1 && (td_cur_u64(&c) != 0 || td_cur_u64(&c) != 0 ||
	    td_cur_u32(&c) != 0))
		goto bad;
	/* sections begin before the file's end; only an open v6 one at it */
	for (i = 0; i < TD_NSECT; i++)
		if (f->sec_off[i] > f->off || (f->sec_off[i] == f->off &&
		    (f->sec_id != i || f->p.version != 6)))
			goto bad;
	if (td_cur_bad(&c) || td_cur_left(&c) != 0)
		goto bad;
	f->fd = open(f->part, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (f->fd == -1 || td_fileio_cut(f->fd, f->off) == -1)
		goto fail;
	if (ckv >= 3 && td_file_restore_opts(f, opts) == -1)
		goto fail;
	if (td_spool_reopen(f->spools) == -1)
		goto fail;
	return f;
bad:
	errno = EINVAL;
fail:
	e = errno;
	td_file_drop(f);	/* keep the files: they are not ours */
	errno = e;
	return NULL;
}
