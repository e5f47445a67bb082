/*
 * stream.c: the recording's byte stream on the agent's side, kept until
 * the listener acknowledges it: memory, then a spool file (see stream.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "compress.h"
#include "stream.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * Unacknowledged bytes q holds before new frames go to the spool: a few
 * of the listener's acknowledgements (one per MiB it takes in), so that a
 * listener that keeps up never makes the agent spool, while one that lags
 * (16 agents on 2 CPUs) costs the agent 4 MiB of memory, not 16
 * (bench/README.md, "A smaller agent").
 */
#define STREAM_MEM_MAX	(4u * 1024 * 1024)
/*
 * Memory (q's unacknowledged bytes and st) past which the pages stop
 * until it is under the low mark: without a spool, or with the spool
 * full or failing.
 */
#define STREAM_MEM_HIGH	(20u * 1024 * 1024)
#define STREAM_MEM_LOW	(12u * 1024 * 1024)
/*
 * Page bytes of one PAGES frame at most: an open batch is not sent until
 * it closes, so it waits in memory (in q, or st while spooling) on top of
 * what is unacknowledged.
 */
#define STREAM_BATCH	(256u * 1024)
/* No buffer of the stream ever passes this. */
#define STREAM_HARD_MAX	(512u * 1024 * 1024)
/*
 * st goes to the spool file in pieces of this much (st's buffer reaches
 * about this plus a frame: the newest frames' memory while spooling)
 */
#define STREAM_SPILL	(256u * 1024)
/* and comes back into q in pieces of this much */
#define STREAM_REFILL	(1u * 1024 * 1024)
/*
 * Acknowledged bytes at q's front are moved out once there are this many
 * (or half of q): every page q's buffer reaches stays in the agent's
 * resident memory, so q's end must not run far past what is unacknowledged.
 */
#define STREAM_COMPACT	(1u * 1024 * 1024)
/*
 * The listener acknowledges whole frames only, at its next checkpoint: q
 * stops taking more from the spool once this much is unacknowledged, so it
 * must hold more than a frame, or with a frame cut at q's end neither side
 * could move (the agent waiting for an ACK, the listener for the frame).
 */
_Static_assert(STREAM_MEM_MAX - STREAM_REFILL >= 2 * TD_MAX_FRAME,
    "q must hold two frames unacknowledged");

/* One recording's stream: memory, spool file, the open batch and section. */
struct stream {
	struct td_buf	 q;
	uint64_t	 qbase;		/* offset of q.data[0] */
	size_t		 qdrop;		/* acknowledged bytes of q */
	size_t		 qoff;		/* sent bytes of q */
	struct td_buf	 st;
	bool		 spooling;	/* new frames go to st */
	const char	*spool_dir;	/* NULL: memory only */
	uint64_t	 spool_max;
	int		 sfd;
	uint64_t	 shead, stail;
	uint64_t	 sent;
	uint64_t	*seq;		/* next page number of each CPU */
	uint32_t	 ncpus;
	size_t		 page_size;
	/* the PAGES frame being filled, at the end of *bq */
	struct td_buf	*bq;
	int		 wire;		/* TD_WIRE_*, 0: none */
	struct td_codec	*wz;		/* wire compression, or NULL */
	uint8_t		*zbuf;
	size_t		 zcap;
	uint64_t	 raw;		/* page bytes before compression */
	uint64_t	 framed;	/* bytes of their PAGES(_Z) frames */
	int		 bcpu;		/* -1: no batch open */
	uint32_t	 bcount;
	size_t		 bhead;
	uint32_t	 bmax;
	/* the open section's bytes, compressed TD_SECTION_Z_RAW at a time
	   (allocated while a section is written, as large as it needs) */
	struct td_codec	*sz;
	uint8_t		*sstage;
	size_t		 slen;
	size_t		 scap;
	uint8_t		*szbuf;
	size_t		 szcap;
};

/* Open the spool file (unnamed: nothing is left behind by a crash). */
int
stream_spool_open(struct stream *s)
{
	char *tmpl;

	if (s->sfd != -1)
		return 0;
	if (s->spool_dir == NULL || s->spool_max == 0) {
		errno = ENOSPC;
		return -1;
	}
	s->sfd = open(s->spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s->sfd == -1 && (errno == EOPNOTSUPP || errno == EISDIR ||
	    errno == EINVAL)) {
		xasprintf(&tmpl, "%s/tdagent-spool.XXXXXX", s->spool_dir);
		s->sfd = mkostemp(tmpl, O_CLOEXEC);
		if (s->sfd != -1)
			unlink(tmpl);
		free(tmpl);
	}
	return s->sfd == -1 ? -1 : 0;
}

/* A stream, its spool not opened yet (stream.h). */
struct stream *
stream_new(size_t page_size, uint32_t ncpus, int wire, const char *spool_dir,
    uint64_t spool_max)
{
	struct stream *s;
	int e;

	s = xcalloc(1, sizeof *s);
	s->sfd = -1;
	s->bcpu = -1;
	s->page_size = page_size;
	s->ncpus = ncpus;
	s->seq = xcalloc(ncpus, sizeof *s->seq);
	s->bmax = (STREAM_BATCH < TD_MAX_FRAME - 16 ? STREAM_BATCH :
	    TD_MAX_FRAME - 16) / page_size;
	if (s->bmax == 0)
		s->bmax = 1;
	s->wire = wire;
	if (wire != 0) {
		/* one PAGES_Z is one chunk of the listener's file */
		s->wz = td_codec_new(wire == TD_WIRE_ZSTD ? TD_CODEC_ZSTD :
		    TD_CODEC_ZLIB, 0);
		if (s->wz == NULL)
			goto fail;
		s->bmax = TD_CHUNK_PAGES;
		s->zcap = td_codec_bound(s->wz, (size_t)TD_CHUNK_PAGES *
		    page_size);
		s->zbuf = xmalloc(s->zcap);
	}
	/*
	 * The caps only stop a runaway: pages stop at stream_congested(),
	 * but the metadata sections of a big machine may pass it at the start.
	 */
	td_buf_init(&s->q, STREAM_HARD_MAX);
	td_buf_init(&s->st, STREAM_HARD_MAX);
	s->bq = &s->q;
	if (spool_dir != NULL && spool_max > 0) {
		s->spool_dir = xstrdup(spool_dir);
		s->spool_max = spool_max;
	}
	return s;
fail:
	e = errno;
	stream_free(s);
	errno = e;
	return NULL;
}

/* Free a stream and close its spool; NULL is fine. */
void
stream_free(struct stream *s)
{
	if (s == NULL)
		return;
	if (s->sfd != -1)
		close(s->sfd);
	td_buf_free(&s->q);
	td_buf_free(&s->st);
	td_codec_free(s->wz);
	free(s->zbuf);
	td_codec_free(s->sz);
	free(s->sstage);
	free(s->szbuf);
	free(s->seq);
	free((char *)(uintptr_t)s->spool_dir);
	free(s);
}

/* Where the open batch ends the sendable part of q. */
static size_t
stream_limit(const struct stream *s)
{
	return s->bcpu != -1 && s->bq == &s->q ? s->bhead : s->q.len;
}

/* Bytes not sent yet, in memory and in the spool. */
size_t
stream_pending(const struct stream *s)
{
	return (s->q.len - s->qoff) + (size_t)(s->stail - s->shead) +
	    s->st.len;
}

/* Bytes not acknowledged yet, in memory and in the spool. */
uint64_t
stream_unacked(const struct stream *s)
{
	return (s->q.len - s->qdrop) + (s->stail - s->shead) + s->st.len;
}

static size_t
stream_memory(const struct stream *s)
{
	return (s->q.len - s->qdrop) + s->st.len;
}

/* Whether memory is over its high watermark. */
bool
stream_congested(const struct stream *s)
{
	return stream_memory(s) > STREAM_MEM_HIGH;
}

/* Whether memory is under its low watermark. */
bool
stream_relieved(const struct stream *s)
{
	return stream_memory(s) < STREAM_MEM_LOW;
}

/* Bytes handed to connections, resends included. */
uint64_t
stream_total_sent(const struct stream *s)
{
	return s->sent;
}

/* Page bytes framed, before wire compression. */
uint64_t
stream_raw(const struct stream *s)
{
	return s->raw;
}

/* Bytes of the frames that carried pages. */
uint64_t
stream_framed(const struct stream *s)
{
	return s->framed;
}

/* Whether a PAGES batch is open. */
bool
stream_batch_open(const struct stream *s)
{
	return s->bcpu != -1;
}

/* Move st's closed frames to the spool file while there is room. */
static void
stream_spill(struct stream *s)
{
	size_t closed = s->bq == &s->st && s->bcpu != -1 ? s->bhead :
	    s->st.len;
	ssize_t w;

	if (!s->spooling || closed < STREAM_SPILL)
		return;
	if (s->stail - s->shead + closed > s->spool_max ||
	    stream_spool_open(s) == -1)
		return;		/* st grows until the pages stop */
	w = pwrite(s->sfd, s->st.data, closed, (off_t)s->stail);
	if (w != (ssize_t)closed)
		return;		/* a full disk: the same */
	s->stail += closed;
	memmove(s->st.data, s->st.data + closed, s->st.len - closed);
	s->st.len -= closed;
	if (s->bq == &s->st && s->bcpu != -1)
		s->bhead -= closed;
}

/* q is over its cap: new frames go to st (and the spool) from now on. */
static void
stream_start_spooling(struct stream *s)
{
	size_t k;

	if (s->spooling || s->spool_max == 0 || s->spool_dir == NULL ||
	    s->q.len - s->qdrop < STREAM_MEM_MAX)
		return;
	s->spooling = true;
	if (s->bq == &s->q && s->bcpu != -1) {
		/* the open batch moves along */
		k = s->q.len - s->bhead;
		td_buf_add(&s->st, s->q.data + s->bhead, k);
		s->q.len = s->bhead;
		s->bhead = 0;
	}
	s->bq = &s->st;
}

/* A frame was appended: spool what memory cannot hold. */
void
stream_added(struct stream *s)
{
	stream_start_spooling(s);
	stream_spill(s);
}

/* Drop acknowledged bytes from q's front once there are many. */
static void
stream_compact(struct stream *s)
{
	if (s->qdrop == 0 || (s->qdrop < s->q.len / 2 &&
	    s->qdrop < STREAM_COMPACT))
		return;
	memmove(s->q.data, s->q.data + s->qdrop, s->q.len - s->qdrop);
	s->q.len -= s->qdrop;
	s->qoff -= s->qdrop;
	if (s->bq == &s->q && s->bcpu != -1)
		s->bhead -= s->qdrop;
	s->qbase += s->qdrop;
	s->qdrop = 0;
}

/* Bring spooled bytes back into q as it empties, then st after them. */
static void
stream_refill(struct stream *s)
{
	size_t k;
	ssize_t r;

	if (!s->spooling || s->q.len - s->qoff > STREAM_REFILL ||
	    s->q.len - s->qdrop > STREAM_MEM_MAX - STREAM_REFILL)
		return;
	stream_compact(s);
	if (s->stail > s->shead) {
		k = s->stail - s->shead > STREAM_REFILL ? STREAM_REFILL :
		    (size_t)(s->stail - s->shead);
		if (td_buf_add_zero(&s->q, k) == -1)
			return;
		r = pread(s->sfd, s->q.data + s->q.len - k, k, (off_t)s->shead);
		if (r != (ssize_t)k) {
			s->q.len -= k;
			return;
		}
		s->shead += k;
		if (s->shead < s->stail)
			return;
		s->shead = s->stail = 0;
		if (ftruncate(s->sfd, 0) == -1)
			return;
	}
	/* the spool is empty: st follows q */
	k = s->q.len;
	if (td_buf_add(&s->q, s->st.data, s->st.len) == -1)
		return;
	if (s->bq == &s->st && s->bcpu != -1)
		s->bhead += k;
	s->st.len = 0;
	s->bq = &s->q;
	s->spooling = false;
}

/* What can be sent now (stream.h). */
size_t
stream_sendable(struct stream *s, const uint8_t **p)
{
	size_t limit;

	stream_refill(s);
	limit = stream_limit(s);
	*p = s->q.data + s->qoff;
	return limit > s->qoff ? limit - s->qoff : 0;
}

/* Whether memory holds something to send. */
bool
stream_can_send(const struct stream *s)
{
	return stream_limit(s) > s->qoff;
}

/* n bytes of what stream_sendable() offered went out. */
void
stream_sent(struct stream *s, size_t n)
{
	s->qoff += n;
	s->sent += n;
}

/* The listener has everything before off. */
int
stream_ack(struct stream *s, uint64_t off)
{
	if (off < s->qbase + s->qdrop)
		return 0;		/* old news */
	if (off > s->qbase + s->qoff) {
		errno = EPROTO;
		return -1;
	}
	s->qdrop = (size_t)(off - s->qbase);
	stream_compact(s);
	return 0;
}

/* A connection broke: what it did not acknowledge goes again. */
void
stream_rewind(struct stream *s)
{
	s->qoff = s->qdrop;
}

/* A new connection resumes at off (stream.h). */
int
stream_resume(struct stream *s, uint64_t off, uint64_t *lo, uint64_t *hi)
{
	*lo = s->qbase + s->qdrop;
	*hi = s->qbase + stream_limit(s);
	if (off < *lo || off > *hi) {
		errno = ERANGE;
		return -1;
	}
	s->qoff = (size_t)(off - s->qbase);
	/*
	 * The listener has everything before off on its disk: that is an
	 * acknowledgement, and may be the only one (it acknowledges what it
	 * takes in, and nothing after off was sent yet).  Without it a full q
	 * would wait for an ACK that never comes, and the spool behind it
	 * would never be sent.
	 */
	if (s->qoff > s->qdrop) {
		s->qdrop = s->qoff;
		stream_compact(s);
	}
	return 0;
}

/* Patch the page count of the open batch and close it. */
int
stream_batch_end(struct stream *s)
{
	struct td_buf h;

	if (s->bcpu == -1)
		return 0;
	td_buf_init(&h, TD_FRAME_HEADER + 16);
	if (td_msg_pack_pages_head(&h, s->bcpu, s->bcount,
	    s->seq[s->bcpu] - s->bcount, s->page_size) == -1) {
		td_buf_free(&h);
		return -1;
	}
	memcpy(s->bq->data + s->bhead, h.data, h.len);
	td_buf_free(&h);
	s->raw += (uint64_t)s->bcount * s->page_size;
	if (s->wz != NULL) {
		struct td_pages_z pz;
		ssize_t z;

		z = td_codec_compress(s->wz, s->bq->data + s->bhead +
		    TD_FRAME_HEADER + 16, (size_t)s->bcount * s->page_size,
		    s->zbuf, s->zcap);
		if (z <= 0)
			return -1;
		pz.cpu = (uint32_t)s->bcpu;
		pz.count = s->bcount;
		pz.first_seq = s->seq[s->bcpu] - s->bcount;
		pz.codec = (uint16_t)s->wire;
		pz.data = s->zbuf;
		pz.len = (size_t)z;
		s->bq->len = s->bhead;
		if (td_msg_pack_pages_z(s->bq, &pz) == -1)
			return -1;
	}
	s->framed += s->bq->len - s->bhead;
	s->bcpu = -1;
	stream_added(s);
	return 0;
}

/*
 * Frame the staged section bytes: SECTION_DATA_Z, or SECTION_DATA when
 * they do not compress (or no codec could be made).
 */
static int
stream_section_piece(struct stream *s)
{
	struct td_section_z sz;
	struct td_buf *q;
	ssize_t z = -1;

	if (s->slen == 0)
		return 0;
	if (s->sz != NULL && s->szcap < td_codec_bound(s->sz, s->slen)) {
		free(s->szbuf);
		s->szcap = td_codec_bound(s->sz, s->slen);
		s->szbuf = xmalloc(s->szcap);
	}
	if (s->sz != NULL)
		z = td_codec_compress(s->sz, s->sstage, s->slen, s->szbuf,
		    s->szcap);
	if ((q = stream_frame(s)) == NULL)
		return -1;
	if (z > 0 && (size_t)z < s->slen) {
		sz.codec = TD_WIRE_ZSTD;
		sz.raw_len = (uint32_t)s->slen;
		sz.data = s->szbuf;
		sz.len = (size_t)z;
		if (td_msg_pack_section_z(q, &sz) == -1)
			return -1;
	} else if (td_msg_pack_section_data(q, s->sstage, s->slen) == -1)
		return -1;
	s->slen = 0;
	stream_added(s);
	return 0;
}

/*
 * Bytes of the open section, staged and framed in pieces.  The staging
 * and the compressed piece grow to what the section needs (up to
 * TD_SECTION_Z_RAW): the small sections of the end (saved_cmdlines, a
 * few KiB) do not cost the recorder half a megabyte at its fullest.
 */
int
stream_section_data(struct stream *s, const void *p, size_t len)
{
	size_t k, cap;

	if (s->sz == NULL && s->sstage == NULL)
		s->sz = td_codec_new(TD_CODEC_ZSTD, 0);
	while (len > 0) {
		k = TD_SECTION_Z_RAW - s->slen;
		if (k > len)
			k = len;
		if (s->slen + k > s->scap) {
			cap = s->scap == 0 ? 4096 : s->scap;
			while (cap < s->slen + k)
				cap *= 2;
			if (cap > TD_SECTION_Z_RAW)
				cap = TD_SECTION_Z_RAW;
			s->sstage = xreallocarray(s->sstage, cap, 1);
			s->scap = cap;
		}
		memcpy(s->sstage + s->slen, p, k);
		s->slen += k;
		p = (const uint8_t *)p + k;
		len -= k;
		if (s->slen == TD_SECTION_Z_RAW &&
		    stream_section_piece(s) == -1)
			return -1;
	}
	return 0;
}

/* Frame the rest of the open section and free its staging. */
int
stream_section_flush(struct stream *s)
{
	int r = stream_section_piece(s);

	td_codec_free(s->sz);
	free(s->sstage);
	free(s->szbuf);
	s->sz = NULL;
	s->sstage = s->szbuf = NULL;
	s->slen = s->scap = s->szcap = 0;
	return r;
}

/* Where the next whole frame goes, the open batch closed first. */
struct td_buf *
stream_frame(struct stream *s)
{
	if (stream_batch_end(s) == -1)
		return NULL;
	return s->bq;
}

/* A batch of cpu open with room for a page: the open one or a new one. */
static int
stream_batch_begin(struct stream *s, int cpu)
{
	if (s->bcpu == cpu && s->bcount < s->bmax)
		return 0;
	if (stream_batch_end(s) == -1)
		return -1;
	s->bhead = s->bq->len;
	if (td_buf_add_zero(s->bq, TD_FRAME_HEADER + 16) == -1)
		return -1;
	s->bcpu = cpu;
	s->bcount = 0;
	return 0;
}

/* Room for pages read in place (stream.h). */
void *
stream_room(struct stream *s, int cpu, uint32_t *npages)
{
	if ((uint32_t)cpu >= s->ncpus || *npages == 0) {
		errno = EINVAL;
		return NULL;
	}
	if (stream_batch_begin(s, cpu) == -1)
		return NULL;
	if (*npages > s->bmax - s->bcount)
		*npages = s->bmax - s->bcount;
	return td_buf_room(s->bq, (size_t)*npages * s->page_size);
}

/* Queue one page of a CPU into the open batch. */
int
stream_page(struct stream *s, int cpu, const void *page, size_t len)
{
	if ((uint32_t)cpu >= s->ncpus || len > s->page_size) {
		errno = EINVAL;
		return -1;
	}
	if (stream_batch_begin(s, cpu) == -1)
		return -1;
	if (td_buf_add(s->bq, page, len) == -1 ||
	    td_buf_add_zero(s->bq, s->page_size - len) == -1)
		return -1;
	s->bcount++;
	s->seq[cpu]++;
	return 0;
}

/* Frame a chunk compressed elsewhere as one PAGES_Z (stream.h). */
int
stream_chunk(struct stream *s, int cpu, enum td_codec_id codec,
    const void *z, size_t zlen, uint32_t npages)
{
	struct td_pages_z pz;
	struct td_buf *q;
	size_t at;

	if ((uint32_t)cpu >= s->ncpus || npages == 0 ||
	    npages > TD_CHUNK_PAGES || zlen == 0 ||
	    (codec != TD_CODEC_ZSTD && codec != TD_CODEC_ZLIB)) {
		errno = EINVAL;
		return -1;
	}
	if ((q = stream_frame(s)) == NULL)
		return -1;
	pz.cpu = (uint32_t)cpu;
	pz.count = npages;
	pz.first_seq = s->seq[cpu];
	pz.codec = codec == TD_CODEC_ZSTD ? TD_WIRE_ZSTD : TD_WIRE_ZLIB;
	pz.data = z;
	pz.len = zlen;
	at = q->len;
	if (td_msg_pack_pages_z(q, &pz) == -1)
		return -1;
	s->seq[cpu] += npages;
	s->raw += (uint64_t)npages * s->page_size;
	s->framed += q->len - at;
	stream_added(s);
	return 0;
}
