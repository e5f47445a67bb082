/*
 * metadefer.c: header sections recorded into a memfd, replayed into the
 * real sink after the fork (see metadefer.h).
 *
 * The memfd holds records: u8 kind, u8 0, u16 0, u32 the section or
 * option id, u64 the length, then that many bytes (a section's piece, an
 * option's payload).  Records are staged in memory and written out
 * METADEFER_STAGE bytes at a time.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fileio.h"
#include "meta.h"
#include "metadefer.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* Staging on the way in, and the piece fed to the sink on the way out. */
#define METADEFER_STAGE	(64u * 1024)
#define METADEFER_HEAD	16

enum metadefer_kind {
	METADEFER_BEGIN = 1,
	METADEFER_WRITE,
	METADEFER_END,
	METADEFER_OPTION,
};

/* A memfd of recorded sink calls and the staging in front of it. */
struct metadefer {
	int	 fd;
	uint8_t	*stage;
	size_t	 slen;
	int	 err;		/* the first failure (errno), 0 if none */
};

/* A deferral with an empty memfd (metadefer.h). */
struct metadefer *
metadefer_new(void)
{
	struct metadefer *d;
	int fd;

	if ((fd = memfd_create("tdagent-headers", MFD_CLOEXEC)) == -1)
		return NULL;
	d = xcalloc(1, sizeof *d);
	d->fd = fd;
	return d;
}

/* Close the memfd and free d; NULL is fine. */
void
metadefer_free(struct metadefer *d)
{
	if (d == NULL)
		return;
	if (d->fd != -1)
		close(d->fd);
	free(d->stage);
	free(d);
}

/* Write all n bytes of p to the memfd. */
static int
metadefer_out(struct metadefer *d, const void *p, size_t n)
{
	uint64_t off = 0;

	return td_fileio_write(d->fd, p, n, &off);
}

/* Write the staged records out. */
static int
metadefer_flush(struct metadefer *d)
{
	if (d->slen > 0 && metadefer_out(d, d->stage, d->slen) == -1)
		return -1;
	d->slen = 0;
	return 0;
}

/* Record one call: its head, then its bytes (staged when they fit). */
static int
metadefer_add(struct metadefer *d, enum metadefer_kind kind, uint32_t id,
    const void *p, size_t n)
{
	uint8_t h[METADEFER_HEAD];
	uint64_t len = n;

	if (d->err != 0) {
		errno = d->err;
		return -1;
	}
	if (d->stage == NULL)
		d->stage = xmalloc(METADEFER_STAGE);
	memset(h, 0, sizeof h);
	h[0] = (uint8_t)kind;
	memcpy(h + 4, &id, sizeof id);
	memcpy(h + 8, &len, sizeof len);
	if (d->slen + sizeof h > METADEFER_STAGE && metadefer_flush(d) == -1)
		goto fail;
	memcpy(d->stage + d->slen, h, sizeof h);
	d->slen += sizeof h;
	if (n == 0)
		return 0;
	if (d->slen + n <= METADEFER_STAGE) {
		memcpy(d->stage + d->slen, p, n);
		d->slen += n;
		return 0;
	}
	if (metadefer_flush(d) == -1 || metadefer_out(d, p, n) == -1)
		goto fail;
	return 0;
fail:
	d->err = errno;
	return -1;
}

static int
metadefer_begin(void *arg, enum td_opt id)
{
	return metadefer_add(arg, METADEFER_BEGIN, (uint32_t)id, NULL, 0);
}

static int
metadefer_write(void *arg, const void *p, size_t n)
{
	return metadefer_add(arg, METADEFER_WRITE, 0, p, n);
}

static int
metadefer_end(void *arg)
{
	return metadefer_add(arg, METADEFER_END, 0, NULL, 0);
}

static int
metadefer_option(void *arg, enum td_opt id, const void *p, size_t n)
{
	if (n > TD_MAX_OPTION_SIZE) {
		errno = EMSGSIZE;
		return -1;
	}
	return metadefer_add(arg, METADEFER_OPTION, (uint32_t)id, p, n);
}

static int
metadefer_page(void *arg, int cpu, const void *p, size_t n)
{
	(void)arg, (void)cpu, (void)p, (void)n;
	errno = EINVAL;
	return -1;
}

static int
metadefer_chunk(void *arg, int cpu, enum td_codec_id codec, const void *z,
    size_t zlen, uint32_t npages)
{
	(void)arg, (void)cpu, (void)codec, (void)z, (void)zlen, (void)npages;
	errno = EINVAL;
	return -1;
}

static int
metadefer_batch_end(void *arg)
{
	(void)arg;
	return 0;
}

/* A sink that records into d (metadefer.h). */
void
metadefer_sink(struct meta_sink *s, struct metadefer *d)
{
	s->begin = metadefer_begin;
	s->write = metadefer_write;
	s->end = metadefer_end;
	s->option = metadefer_option;
	s->page = metadefer_page;
	s->room = NULL;
	s->chunk = metadefer_chunk;
	s->batch_end = metadefer_batch_end;
	s->arg = d;
}

/* Read exactly n bytes of the memfd (0, or -1 with errno; EIO: cut). */
static int
metadefer_in(struct metadefer *d, void *p, size_t n)
{
	ssize_t r;

	while (n > 0) {
		r = read(d->fd, p, n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		p = (uint8_t *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* Feed everything recorded to s (metadefer.h). */
int
metadefer_replay(struct metadefer *d, const struct meta_sink *s, char *err,
    size_t errlen)
{
	uint8_t h[METADEFER_HEAD], *buf = NULL;
	const char *what = "cannot read the header sections back";
	uint64_t len;
	uint32_t id;
	off_t end;
	size_t k;
	int ret = -1, r, e;

	if (d->err != 0) {
		errno = d->err;
		goto out;
	}
	if (metadefer_flush(d) == -1)
		goto out;
	free(d->stage);
	d->stage = NULL;
	if ((end = lseek(d->fd, 0, SEEK_CUR)) == -1 ||
	    lseek(d->fd, 0, SEEK_SET) == -1)
		goto out;
	buf = xmalloc(METADEFER_STAGE);
	while (lseek(d->fd, 0, SEEK_CUR) < end) {
		what = "cannot read the header sections back";
		if (metadefer_in(d, h, sizeof h) == -1)
			goto out;
		memcpy(&id, h + 4, sizeof id);
		memcpy(&len, h + 8, sizeof len);
		switch (h[0]) {
		case METADEFER_BEGIN:
			what = "cannot write the header sections";
			if (s->begin(s->arg, (enum td_opt)id) == -1)
				goto out;
			break;
		case METADEFER_WRITE:
			while (len > 0) {
				k = len > METADEFER_STAGE ? METADEFER_STAGE :
				    (size_t)len;
				what = "cannot read the header sections back";
				if (metadefer_in(d, buf, k) == -1)
					goto out;
				what = "cannot write the header sections";
				if (s->write(s->arg, buf, k) == -1)
					goto out;
				len -= k;
			}
			break;
		case METADEFER_END:
			what = "cannot write the header sections";
			if (s->end(s->arg) == -1)
				goto out;
			break;
		case METADEFER_OPTION: {
			uint8_t *o;

			if (len > TD_MAX_OPTION_SIZE) {
				errno = EIO;
				goto out;
			}
			o = xmalloc(len > 0 ? (size_t)len : 1);
			what = "cannot read the header sections back";
			if (metadefer_in(d, o, (size_t)len) == -1) {
				free(o);
				goto out;
			}
			what = "cannot write the header sections";
			r = s->option(s->arg, (enum td_opt)id, o, (size_t)len);
			e = errno;
			free(o);
			errno = e;
			if (r == -1)
				goto out;
			break;
		}
		default:
			errno = EIO;
			goto out;
		}
	}
	ret = 0;
out:
	e = errno;
	free(buf);
	if (ret == -1)
		snprintf(err, errlen, "%s: %s", what, strerror(e));
	/* the bytes go: the memfd is emptied whatever happened */
	if (ftruncate(d->fd, 0) == -1 || lseek(d->fd, 0, SEEK_SET) == -1)
		d->err = errno;
	errno = e;
	return ret;
}
