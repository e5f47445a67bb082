/*
 * compress.h: the block codecs of trace.dat v7 (and later of the wire).
 *
 * A codec compresses one block into a caller-sized buffer; blocks are
 * independent, as trace-cmd expects (one block per metadata section, one per
 * chunk of CPU data).  A td_codec object keeps the library's context (made
 * on first use) so that repeated calls allocate nothing; it is not
 * thread-safe, use one per thread.  Block calls leave no state behind, so
 * any number of writers of one thread may share a context for them; a
 * streamed block (below) needs the context to itself until it ends.
 * No function here logs or exits.
 */
#ifndef TD_COMPRESS_H
#define TD_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum td_codec_id {
	TD_CODEC_NONE = 0,
	TD_CODEC_ZSTD,
	TD_CODEC_ZLIB,
};

struct td_codec;

/* Map "none", "zstd", "zlib" to an id; -1 if unknown. */
int		 td_codec_parse(const char *name, enum td_codec_id *id);
/* Name as written in the trace.dat initial format ("none" for none). */
const char	*td_codec_name(enum td_codec_id id);
/* Library version string as written after the name ("" for none). */
const char	*td_codec_version(enum td_codec_id id);

/* New codec context; level 0 picks the codec's fast default. */
struct td_codec	*td_codec_new(enum td_codec_id id, int level);
void		 td_codec_free(struct td_codec *c);
enum td_codec_id td_codec_id(const struct td_codec *c);
/* Worst-case compressed size of len bytes. */
size_t		 td_codec_bound(const struct td_codec *c, size_t len);
/* Compress src into dst; returns the compressed size or -1. */
ssize_t		 td_codec_compress(struct td_codec *c, const void *src,
		    size_t len, void *dst, size_t cap);
/*
 * Compress src into the context's own buffer, grown to the bound as needed
 * and kept: *out holds the result until the next call on c.  Writers that
 * share one context (tdlisten's sessions, one thread) share this buffer too.
 */
ssize_t		 td_codec_compress_buf(struct td_codec *c, const void *src,
		    size_t len, const void **out);
/*
 * Decompress src into dst, which must receive exactly want bytes; returns
 * want, or -1 on corrupt input or a size mismatch.
 */
ssize_t		 td_codec_decompress(struct td_codec *c, const void *src,
		    size_t len, void *dst, size_t want);

/*
 * Streaming compression of one block that is too big to hold in memory
 * (kallsyms): begin, feed pieces, end.  Output is appended to out, which the
 * caller drains as it likes.  The result decompresses with
 * td_codec_decompress() like any block.  For TD_CODEC_NONE the input is
 * copied through.
 */
struct td_buf;
int		 td_codec_stream_begin(struct td_codec *c);
int		 td_codec_stream_feed(struct td_codec *c, const void *src,
		    size_t len, struct td_buf *out);
int		 td_codec_stream_end(struct td_codec *c, struct td_buf *out);

#endif
