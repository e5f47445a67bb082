/*
 * hstage.c: header sections held back for the header cache (hstage.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "buf.h"
#include "conn.h"
#include "fileio.h"
#include "hstage.h"
#include "stream.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

/* Sections shorter than this go whole: a reference would save little. */
#define HSTAGE_MIN	1024

/* One staged section: [off, off + len) of the file. */
struct hstage_sec {
	struct td_section_ref ref;	/* id, length, SHA-256 */
	uint64_t	 off;
	int		 offered;	/* index in the last offer, -1 */
};

/* The stage. */
struct hstage {
	int		 fd;
	uint64_t	 end;		/* bytes in the file */
	EVP_MD_CTX	*md;		/* of the open section */
	bool		 open;
	unsigned	 n;
	struct hstage_sec sec[TD_HCACHE_OFFER_MAX];
};

struct hstage *
hstage_new(void)
{
	struct hstage *h = xcalloc(1, sizeof *h);

	h->fd = memfd_create("tdagent-headers", MFD_CLOEXEC);
	if (h->fd == -1) {
		char path[] = "/tmp/tdagent-headers-XXXXXX";

		/* no memfd: an unlinked file */
		if ((h->fd = mkostemp(path, O_CLOEXEC)) == -1) {
			free(h);
			return NULL;
		}
		(void)unlink(path);
	}
	if ((h->md = EVP_MD_CTX_new()) == NULL) {
		hstage_free(h);
		errno = ENOMEM;
		return NULL;
	}
	return h;
}

void
hstage_free(struct hstage *h)
{
	if (h == NULL)
		return;
	if (h->fd != -1)
		close(h->fd);
	EVP_MD_CTX_free(h->md);
	free(h);
}

int
hstage_begin(struct hstage *h, uint16_t id)
{
	struct hstage_sec *s;

	if (h->open || h->n == TD_HCACHE_OFFER_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1) {
		errno = ENOMEM;
		return -1;
	}
	s = &h->sec[h->n];
	memset(s, 0, sizeof *s);
	s->ref.id = id;
	s->off = h->end;
	s->offered = -1;
	h->open = true;
	return 0;
}

int
hstage_write(struct hstage *h, const void *p, size_t n)
{
	uint64_t off = 0;

	if (!h->open) {
		errno = EINVAL;
		return -1;
	}
	EVP_DigestUpdate(h->md, p, n);
	h->sec[h->n].ref.length += n;
	h->end += n;
	return td_fileio_write(h->fd, p, n, &off);
}

int
hstage_end(struct hstage *h)
{
	unsigned int len = 0;

	if (!h->open) {
		errno = EINVAL;
		return -1;
	}
	EVP_DigestFinal_ex(h->md, h->sec[h->n].ref.sha, &len);
	h->open = false;
	h->n++;
	return len == TD_HCACHE_SHA_LEN ? 0 : -1;
}

void
hstage_offer(struct hstage *h, struct td_section_offer *o)
{
	struct hstage_sec *s;
	unsigned i, j;
	bool dup;

	memset(o, 0, sizeof *o);
	for (i = 0; i < h->n; i++) {
		s = &h->sec[i];
		s->offered = -1;
		for (dup = false, j = 0; j < i; j++)
			dup |= h->sec[j].ref.id == s->ref.id;
		if (dup || s->ref.id == 21 || s->ref.length < HSTAGE_MIN ||
		    s->ref.length > TD_MAX_SECTION_SIZE)
			continue;	/* CMDLINES changes every time */
		s->offered = o->count;
		o->ref[o->count++] = s->ref;
	}
}

/* One staged section, whole, through the stream's section framing. */
static int
hstage_whole(struct hstage *h, struct stream *st, const struct hstage_sec *s)
{
	static uint8_t buf[65536];
	uint64_t left = s->ref.length, off = s->off;
	struct td_buf *q;
	ssize_t k;

	if ((q = stream_frame(st)) == NULL ||
	    td_msg_pack_section(q, s->ref.id) == -1)
		return -1;
	stream_added(st);
	while (left > 0) {
		k = pread(h->fd, buf, left < sizeof buf ? left : sizeof buf,
		    (off_t)off);
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		if (stream_section_data(st, buf, (size_t)k) == -1)
			return -1;
		left -= (uint64_t)k;
		off += (uint64_t)k;
	}
	if (stream_section_flush(st) == -1 ||
	    (q = stream_frame(st)) == NULL || td_msg_pack_section_end(q) == -1)
		return -1;
	stream_added(st);
	return 0;
}

int
hstage_frame(struct hstage *h, struct stream *st,
    const struct td_section_have *have, unsigned *refs, uint64_t *saved)
{
	struct hstage_sec *s;
	struct td_buf *q;
	unsigned i;

	*refs = 0;
	*saved = 0;
	for (i = 0; i < h->n; i++) {
		s = &h->sec[i];
		if (have != NULL && s->offered >= 0 &&
		    s->offered < have->count && have->have[s->offered]) {
			if ((q = stream_frame(st)) == NULL ||
			    td_msg_pack_section_ref(q, &s->ref) == -1)
				return -1;
			stream_added(st);
			(*refs)++;
			*saved += s->ref.length;
		} else if (hstage_whole(h, st, s) == -1)
			return -1;
	}
	return 0;
}

int
hstage_send(struct hstage *h, struct conn *c, uint16_t version,
    struct stream *s, char *note, size_t notelen, char *err, size_t errlen)
{
	struct td_section_offer o;
	struct td_section_have hv;
	struct td_frame f;
	struct td_buf b;
	uint64_t saved;
	unsigned refs;
	bool fatal, asked = false;

	note[0] = '\0';
	hstage_offer(h, &o);
	if (version >= 4 && o.count > 0) {
		td_buf_init(&b, TD_FRAME_HEADER + 2 +
		    TD_HCACHE_REF_LEN * TD_HCACHE_OFFER_MAX);
		if (td_msg_pack_section_offer(&b, &o) == -1 ||
		    conn_write_all(c, b.data, b.len, NULL) == -1) {
			td_buf_free(&b);
			snprintf(err, errlen, "lost the listener: %s",
			    strerror(errno));
			return -1;
		}
		td_buf_free(&b);
		/* nothing else comes before the answer: no stream yet */
		if (conn_read_frame(c, &f, err, errlen) == -1)
			return -1;
		if (f.type == TD_MSG_ERROR)
			return conn_error_frame(&f, &fatal, err, errlen,
			    "the listener refused");
		if (td_msg_unpack_section_have(&f, &hv) == -1 ||
		    hv.count != o.count) {
			snprintf(err, errlen, "the listener sent %s, not a "
			    "good SECTION_HAVE", td_msg_name(f.type));
			return -1;
		}
		conn_consume(c, &f);
		asked = true;
	}
	if (hstage_frame(h, s, asked ? &hv : NULL, &refs, &saved) == -1) {
		snprintf(err, errlen, "cannot frame the header sections: %s",
		    strerror(errno));
		return -1;
	}
	if (asked)
		snprintf(note, notelen, "header cache: the listener has %u of "
		    "%u sections offered (%" PRIu64 " bytes not sent)", refs,
		    (unsigned)o.count, saved);
	return 0;
}
