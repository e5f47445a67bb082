/*
 * compress.c: zstd and zlib block compression behind one interface.
 *
 * zstd is the default because Debian 12's trace-cmd 3.1.6 reads only zstd
 * (and uncompressed) v7 files.  zlib is written in the same layout under the
 * name "zlib", which trace-cmd builds with zlib support read.  Fast levels
 * are the default: tracing data compresses well already at level 1 and the
 * recorder must keep up with the kernel.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>
#include <zstd.h>

#include "buf.h"
#include "compress.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * The library contexts are made on first use: a writer never decompresses
 * and a reader never compresses, and a zstd context of either kind holds
 * from a hundred kilobytes to over a megabyte.
 */
struct td_codec {
	enum td_codec_id id;
	int		 level;
	ZSTD_CCtx	*zc;
	ZSTD_DCtx	*zd;
	z_stream	 zs;
	int		 zs_live;
	uint8_t		*obuf;		/* td_codec_compress_buf() output */
	size_t		 obuf_size;
};

/* Map a codec name to its id. */
int
td_codec_parse(const char *name, enum td_codec_id *id)
{
	if (strcmp(name, "none") == 0)
		*id = TD_CODEC_NONE;
	else if (strcmp(name, "zstd") == 0)
		*id = TD_CODEC_ZSTD;
	else if (strcmp(name, "zlib") == 0)
		*id = TD_CODEC_ZLIB;
	else
		return -1;
	return 0;
}

/* Name of a codec as stored in files. */
const char *
td_codec_name(enum td_codec_id id)
{
	switch (id) {
	case TD_CODEC_ZSTD:
		return "zstd";
	case TD_CODEC_ZLIB:
		return "zlib";
	default:
		return "none";
	}
}

/* Version of the codec library as stored in files. */
const char *
td_codec_version(enum td_codec_id id)
{
	switch (id) {
	case TD_CODEC_ZSTD:
		return ZSTD_versionString();
	case TD_CODEC_ZLIB:
		return zlibVersion();
	default:
		return "";
	}
}

/* Allocate a codec context. */
struct td_codec *
td_codec_new(enum td_codec_id id, int level)
{
	struct td_codec *c;

	c = xcalloc(1, sizeof *c);
	c->id = id;
	c->level = level;
	return c;
}

/* The zstd compression context, made on first use. */
static ZSTD_CCtx *
td_codec_zc(struct td_codec *c)
{
	if (c->zc == NULL) {
		if ((c->zc = ZSTD_createCCtx()) == NULL) {
			errno = ENOMEM;
			return NULL;
		}
		ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel,
		    c->level > 0 ? c->level : 1);
		ZSTD_CCtx_setParameter(c->zc, ZSTD_c_contentSizeFlag, 0);
	}
	return c->zc;
}

/* Free a codec context; NULL is fine. */
void
td_codec_free(struct td_codec *c)
{
	if (c == NULL)
		return;
	if (c->zs_live)
		deflateEnd(&c->zs);
	ZSTD_freeCCtx(c->zc);
	ZSTD_freeDCtx(c->zd);
	free(c->obuf);
	free(c);
}

/* The codec a context was made for. */
enum td_codec_id
td_codec_id(const struct td_codec *c)
{
	return c->id;
}

/* Upper bound of the compressed size of len bytes. */
size_t
td_codec_bound(const struct td_codec *c, size_t len)
{
	switch (c->id) {
	case TD_CODEC_ZSTD:
		return ZSTD_compressBound(len);
	case TD_CODEC_ZLIB:
		return compressBound(len);
	default:
		return len;
	}
}

/* Compress one block. */
ssize_t
td_codec_compress(struct td_codec *c, const void *src, size_t len, void *dst,
    size_t cap)
{
	size_t n;
	uLongf zn;

	switch (c->id) {
	case TD_CODEC_ZSTD:
		if (td_codec_zc(c) == NULL)
			return -1;
		n = ZSTD_compress2(c->zc, dst, cap, src, len);
		if (ZSTD_isError(n)) {
			errno = EINVAL;
			return -1;
		}
		return (ssize_t)n;
	case TD_CODEC_ZLIB:
		if (len > ULONG_MAX || cap > ULONG_MAX) {
			errno = EOVERFLOW;
			return -1;
		}
		zn = cap;
		if (compress2(dst, &zn, src, len,
		    c->level > 0 ? c->level : 1) != Z_OK) {
			errno = EINVAL;
			return -1;
		}
		return (ssize_t)zn;
	default:
		if (len > cap) {
			errno = ENOSPC;
			return -1;
		}
		if (len != 0)	/* an empty td_buf has data == NULL */
			memcpy(dst, src, len);
		return (ssize_t)len;
	}
}

/* Compress one block into the context's own buffer. */
ssize_t
td_codec_compress_buf(struct td_codec *c, const void *src, size_t len,
    const void **out)
{
	size_t bound = td_codec_bound(c, len);
	ssize_t n;

	if (bound > c->obuf_size) {
		free(c->obuf);
		c->obuf = xmalloc(bound);
		c->obuf_size = bound;
	}
	n = td_codec_compress(c, src, len, c->obuf, c->obuf_size);
	*out = c->obuf;
	return n;
}

/* Decompress one block of known uncompressed size. */
ssize_t
td_codec_decompress(struct td_codec *c, const void *src, size_t len,
    void *dst, size_t want)
{
	size_t n;
	uLongf zn;

	switch (c->id) {
	case TD_CODEC_ZSTD:
		if (c->zd == NULL && (c->zd = ZSTD_createDCtx()) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		n = ZSTD_decompressDCtx(c->zd, dst, want, src, len);
		if (ZSTD_isError(n) || n != want)
			goto bad;
		return (ssize_t)n;
	case TD_CODEC_ZLIB:
		zn = want;
		if (uncompress(dst, &zn, src, len) != Z_OK || zn != want)
			goto bad;
		return (ssize_t)zn;
	default:
		if (len != want)
			goto bad;
		if (len != 0)
			memcpy(dst, src, len);
		return (ssize_t)len;
	}
bad:
	errno = EBADMSG;
	return -1;
}

/* Start a streamed block. */
int
td_codec_stream_begin(struct td_codec *c)
{
	switch (c->id) {
	case TD_CODEC_ZSTD:
		if (td_codec_zc(c) == NULL)
			return -1;
		ZSTD_CCtx_reset(c->zc, ZSTD_reset_session_only);
		return 0;
	case TD_CODEC_ZLIB:
		if (c->zs_live)
			deflateEnd(&c->zs);
		memset(&c->zs, 0, sizeof c->zs);
		if (deflateInit(&c->zs, c->level > 0 ? c->level : 1) != Z_OK) {
			errno = ENOMEM;
			return -1;
		}
		c->zs_live = 1;
		return 0;
	default:
		return 0;
	}
}

static int
td_codec_stream_run(struct td_codec *c, const void *src, size_t len,
    struct td_buf *out, int last)
{
	size_t room, left;
	int ret;

	if (c->id == TD_CODEC_NONE)
		return td_buf_add(out, src, len);
	if (c->id == TD_CODEC_ZSTD) {
		ZSTD_inBuffer in = { src, len, 0 };
		ZSTD_outBuffer ob;

		do {
			room = ZSTD_CStreamOutSize();
			if (td_buf_add_zero(out, room) == -1)
				return -1;
			out->len -= room;
			ob.dst = out->data + out->len;
			ob.size = room;
			ob.pos = 0;
			left = ZSTD_compressStream2(c->zc, &ob, &in,
			    last ? ZSTD_e_end : ZSTD_e_continue);
			if (ZSTD_isError(left)) {
				errno = EINVAL;
				return -1;
			}
			out->len += ob.pos;
		} while (last ? left != 0 : in.pos < in.size);
		return 0;
	}
	c->zs.next_in = (Bytef *)(uintptr_t)src;
	do {
		c->zs.avail_in = len > UINT_MAX ? UINT_MAX : (uInt)len;
		len -= c->zs.avail_in;
		do {
			room = 65536;
			if (td_buf_add_zero(out, room) == -1)
				return -1;
			out->len -= room;
			c->zs.next_out = out->data + out->len;
			c->zs.avail_out = room;
			ret = deflate(&c->zs, last && len == 0 ? Z_FINISH :
			    Z_NO_FLUSH);
			if (ret == Z_STREAM_ERROR) {
				errno = EINVAL;
				return -1;
			}
			out->len += room - c->zs.avail_out;
		} while (c->zs.avail_out == 0 ||
		    (last && len == 0 && ret != Z_STREAM_END));
	} while (len != 0);
	return 0;
}

/* Feed input to a streamed block. */
int
td_codec_stream_feed(struct td_codec *c, const void *src, size_t len,
    struct td_buf *out)
{
	if (len == 0)
		return 0;
	return td_codec_stream_run(c, src, len, out, 0);
}

/* Finish a streamed block. */
int
td_codec_stream_end(struct td_codec *c, struct td_buf *out)
{
	int ret;

	if (c->id == TD_CODEC_NONE)
		return 0;
	ret = td_codec_stream_run(c, "", 0, out, 1);
	if (c->id == TD_CODEC_ZLIB) {
		deflateEnd(&c->zs);
		c->zs_live = 0;
	}
	return ret;
}
