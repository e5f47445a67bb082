/*
 * stream.h: the byte stream of one recording on the agent's side: every
 * frame the listener must get (sections, options, pages, time-sync
 * samples, END), kept until the listener acknowledges it, whatever
 * happens to the connections that carry it (net.c).
 *
 * Its bytes live in three places, oldest first:
 *
 *	q	memory: from offset qbase; [0, qdrop) acknowledged, [qdrop,
 *		qoff) sent, [qoff, end) not sent yet.  Only q is ever sent.
 *	spool	a file: [shead, stail), when q reached its cap
 *	st	memory: the newest frames while the spool is in use
 *
 * New frames go to st while the spool is in use, else to q; the open PAGES
 * batch (consecutive pages of one CPU, one frame, compressed as one block
 * with wire compression) is always the last thing of that buffer and is
 * never sent before it is closed.  As q empties, the spool moves back into
 * q, and st after it once the spool is empty.  Offsets are counted from the
 * stream's first byte, the same on both sides.
 *
 * One thread uses a stream (the recorder's loop).  No logging, no sockets:
 * -1 with errno on failure.
 */
#ifndef TD_STREAM_H
#define TD_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "compress.h"

struct stream;
struct td_buf;

/*
 * A stream for pages of page_size bytes from ncpus CPUs, compressed on the
 * wire with wire (TD_WIRE_*, 0: none), spilling into an unnamed file in
 * spool_dir (NULL or spool_max 0: memory only); NULL with errno.
 */
struct stream	*stream_new(size_t page_size, uint32_t ncpus, int wire,
		    const char *spool_dir, uint64_t spool_max);
/* Open the spool file now (before the recorder drops root); -1, errno. */
int		 stream_spool_open(struct stream *s);
void		 stream_free(struct stream *s);

/*
 * Where the next frame goes: the open batch is closed first.  Append one
 * whole frame (td_msg_pack_*), then call stream_added().
 */
struct td_buf	*stream_frame(struct stream *s);
/* A frame was appended: spill to the spool if memory is over its cap. */
void		 stream_added(struct stream *s);
/*
 * Queue one page of a CPU into the open batch (a new one as needed).  A
 * page written in place at stream_room()'s pointer is taken without a copy.
 */
int		 stream_page(struct stream *s, int cpu, const void *page,
		    size_t len);
/*
 * Room for up to *npages whole pages of a CPU at the end of its open batch
 * (opened as needed), *npages lowered to what the batch still takes: the
 * caller reads pages there and queues them with stream_page(), in order,
 * with nothing else done to the stream in between.  NULL with errno
 * (ENOBUFS: over the cap).
 */
void		*stream_room(struct stream *s, int cpu, uint32_t *npages);
/*
 * Queue npages pages of a CPU that come compressed already as one block of
 * codec (TD_CODEC_ZSTD or TD_CODEC_ZLIB, whatever the stream's own wire
 * compression): one PAGES_Z frame, the pages numbered on from the CPU's
 * last.  The caller has checked that z decompresses to npages pages;
 * -1 with errno (EINVAL: not a chunk that can travel).
 */
int		 stream_chunk(struct stream *s, int cpu,
		    enum td_codec_id codec, const void *z, size_t zlen,
		    uint32_t npages);
/*
 * Bytes of the open section: staged and framed TD_SECTION_Z_RAW at a time,
 * as SECTION_DATA_Z (zstd) where that is smaller, else SECTION_DATA.
 * stream_section_flush() frames the rest (before SECTION_END) and lets
 * the staging memory go.
 */
int		 stream_section_data(struct stream *s, const void *p,
		    size_t len);
int		 stream_section_flush(struct stream *s);
/* Close the open PAGES batch, if any. */
int		 stream_batch_end(struct stream *s);
/* Whether a PAGES batch is open. */
bool		 stream_batch_open(const struct stream *s);

/*
 * What can be sent now (*p, the count), after moving spooled bytes back
 * into memory as it empties; stream_sent() says how much went.
 */
size_t		 stream_sendable(struct stream *s, const uint8_t **p);
void		 stream_sent(struct stream *s, size_t n);
/* Whether anything in memory is ready to be sent (no refill). */
bool		 stream_can_send(const struct stream *s);
/* The listener has everything before off: -1 (EPROTO) if never sent. */
int		 stream_ack(struct stream *s, uint64_t off);
/* The connection broke: what was sent and not acknowledged goes again. */
void		 stream_rewind(struct stream *s);
/*
 * A new connection resumes at off (the listener has everything before
 * it): -1 (ERANGE) if this stream no longer holds it; *lo and *hi then
 * say what it holds.
 */
int		 stream_resume(struct stream *s, uint64_t off, uint64_t *lo,
		    uint64_t *hi);

/* Bytes not yet sent (memory and spool). */
size_t		 stream_pending(const struct stream *s);
/* Bytes not yet acknowledged (memory and spool). */
uint64_t	 stream_unacked(const struct stream *s);
/* Memory is full (and the spool too, if any): stop adding pages. */
bool		 stream_congested(const struct stream *s);
/* Memory is back under its low watermark. */
bool		 stream_relieved(const struct stream *s);
/* Bytes handed to connections so far, resends included. */
uint64_t	 stream_total_sent(const struct stream *s);
/* Page bytes framed so far, before wire compression. */
uint64_t	 stream_raw(const struct stream *s);
/* Bytes of the frames that carry them (PAGES or PAGES_Z), once each. */
uint64_t	 stream_framed(const struct stream *s);

#endif
