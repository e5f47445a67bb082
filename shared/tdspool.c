/*
 * tdspool.c: the per-CPU spools of the trace.dat writer (see tdspool.h).
 *
 * A CPU's pages are copied into its chunk buffer; a full chunk (or a
 * shorter one at a checkpoint, at the finish, or past the memory bound) is
 * compressed and appended to the CPU's spool file, through a small
 * gathering buffer so that a chunk that compresses well does not cost a
 * system call of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "compress.h"
#include "fileio.h"
#include "tdlimits.h"
#include "tdspool.h"
#include "xmalloc.h"
#include "banned.h"

/*
 * Compressed chunks of a CPU gather up to this much before they go to its
 * spool: a chunk of 10 pages of a syscall storm compresses to about 1.2 KiB,
 * and a pwritev() for each was 4.5% of tdlisten's CPU (bench/README.md).
 */
#define TD_SPOOL_STAGE	(16 * 1024)
/*
 * Unnamed spools are copied into the file this much at a time, each piece's
 * blocks freed once copied: a finish on a nearly full disk needs this much
 * room beyond the data, not the data twice (tdagent -o keeps what it
 * recorded when the disk fills up; see TD_AGENT_DISK_RESERVE).
 */
#define TD_SPOOL_COPY_STEP	(256 * 1024)

/*
 * One CPU's spool: pages waiting in a chunk, then chunks in a file.  The
 * chunk buffer grows page by page up to TD_CHUNK_PAGES; a spool file whose
 * descriptor was closed to stay within spool_fds (path set, fd -1) has
 * nothing waiting in memory and is reopened when its CPU writes again.
 */
struct td_spool {
	int		 fd;
	char		*path;
	uint8_t		*chunk;
	size_t		 ccap;		/* bytes allocated at chunk */
	size_t		 fill;
	uint8_t		*stage;		/* compressed chunks not written yet */
	size_t		 staged;
	uint64_t	 pages;
	uint64_t	 bytes;		/* bytes in the spool file */
	uint32_t	 nchunks;
};

/* The spools of one writer, and what they hold over all CPUs. */
struct td_spools {
	char		*path;		/* the output's final path */
	int		 ncpus;
	uint32_t	 page_size;
	struct td_codec	*codec;		/* NULL: pages stored as they are */
	size_t		 chunk_mem;
	int		 spool_fds;
	struct td_spool	*cpu;
	size_t		 held;		/* chunk buffers and stages */
	int		 nopen;		/* spool descriptors open */
	int		 evict;		/* next spool to close */
	bool		 unnamed;	/* read once: copied blocks are freed */
};

/* A new spool set: nothing opened, nothing held. */
struct td_spools *
td_spool_new(const char *path, int ncpus, uint32_t page_size,
    struct td_codec *codec)
{
	struct td_spools *sp;
	int i;

	sp = xcalloc(1, sizeof *sp);
	sp->path = xstrdup(path);
	sp->ncpus = ncpus;
	sp->page_size = page_size;
	sp->codec = codec;
	sp->cpu = xcalloc(ncpus, sizeof *sp->cpu);
	for (i = 0; i < ncpus; i++)
		sp->cpu[i].fd = -1;
	return sp;
}

/* Free a spool set, its files left as they are. */
void
td_spool_free(struct td_spools *sp)
{
	if (sp == NULL)
		return;
	td_spool_close(sp, false);
	free(sp->cpu);
	free(sp->path);
	free(sp);
}

/* Compress with another context of the same codec. */
void
td_spool_set_codec(struct td_spools *sp, struct td_codec *codec)
{
	sp->codec = codec;
}

/* Set the memory and descriptor bounds. */
void
td_spool_set_limits(struct td_spools *sp, size_t chunk_mem, int spool_fds)
{
	sp->chunk_mem = chunk_mem;
	sp->spool_fds = spool_fds;
}

static size_t
td_spool_chunk_size(const struct td_spools *sp)
{
	return (size_t)TD_CHUNK_PAGES * sp->page_size;
}

/*
 * Every CPU's spool at once, unnamed in the output's directory (named and
 * removed at once where O_TMPFILE is not supported): nothing to create or
 * remove later (unnamed_spools).
 */
int
td_spool_open_unnamed(struct td_spools *sp)
{
	const char *slash = strrchr(sp->path, '/');
	char *dir, *tmpl;
	int i, fd;

	if (slash == NULL)
		dir = xstrdup(".");
	else if (slash == sp->path)
		dir = xstrdup("/");
	else
		xasprintf(&dir, "%.*s", (int)(slash - sp->path), sp->path);
	for (i = 0; i < sp->ncpus; i++) {
		fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd == -1 && (errno == EOPNOTSUPP || errno == EISDIR ||
		    errno == EINVAL)) {
			xasprintf(&tmpl, "%s.part.cpu%d.XXXXXX", sp->path, i);
			fd = mkostemp(tmpl, O_CLOEXEC);
			if (fd != -1)
				unlink(tmpl);
			free(tmpl);
		}
		if (fd == -1) {
			free(dir);
			return -1;
		}
		sp->cpu[i].fd = fd;
		sp->nopen++;
	}
	free(dir);
	sp->unnamed = true;
	return 0;
}

/* Write the gathered chunks of a spool to its file. */
static int
td_spool_unstage(struct td_spool *s)
{
	ssize_t w;

	if (s->staged == 0)
		return 0;
	w = pwrite(s->fd, s->stage, s->staged, (off_t)s->bytes);
	if (w != (ssize_t)s->staged) {
		/* a short write to a regular file means no space */
		if (w >= 0)
			errno = ENOSPC;
		return -1;
	}
	s->bytes += w;
	s->staged = 0;
	return 0;
}

/* Put a compressed chunk {csize, usize, z} after the spool's others. */
static int
td_spool_put(struct td_spool *s, const void *z, size_t zlen, uint32_t usize,
    size_t *held)
{
	uint32_t hdr[2] = { (uint32_t)zlen, usize };
	struct iovec iov[2];
	ssize_t w;

	if (s->staged + sizeof hdr + zlen > TD_SPOOL_STAGE &&
	    td_spool_unstage(s) == -1)
		return -1;
	if (sizeof hdr + zlen <= TD_SPOOL_STAGE) {
		if (s->stage == NULL) {
			s->stage = xmalloc(TD_SPOOL_STAGE);
			*held += TD_SPOOL_STAGE;
		}
		memcpy(s->stage + s->staged, hdr, sizeof hdr);
		memcpy(s->stage + s->staged + sizeof hdr, z, zlen);
		s->staged += sizeof hdr + zlen;
	} else {
		iov[0].iov_base = hdr;
		iov[0].iov_len = sizeof hdr;
		iov[1].iov_base = (void *)(uintptr_t)z;
		iov[1].iov_len = zlen;
		w = pwritev(s->fd, iov, 2, (off_t)s->bytes);
		if (w != (ssize_t)(sizeof hdr + zlen)) {
			if (w >= 0)
				errno = ENOSPC;
			return -1;
		}
		s->bytes += w;
	}
	s->nchunks++;
	return 0;
}

/* The pages waiting in a spool's chunk buffer, as one chunk. */
static int
td_spool_flush(struct td_spools *sp, struct td_spool *s)
{
	const void *cbuf;
	ssize_t c, w;

	if (s->fill == 0)
		return 0;
	if (sp->codec != NULL) {
		c = td_codec_compress_buf(sp->codec, s->chunk, s->fill, &cbuf);
		if (c == -1 || td_spool_put(s, cbuf, (size_t)c,
		    (uint32_t)s->fill, &sp->held) == -1)
			return -1;
	} else {
		w = pwrite(s->fd, s->chunk, s->fill, (off_t)s->bytes);
		if (w != (ssize_t)s->fill) {
			if (w >= 0)
				errno = ENOSPC;
			return -1;
		}
		s->bytes += w;
	}
	s->fill = 0;
	return 0;
}

/* Everything of a spool into its file (a checkpoint, the finish). */
static int
td_spool_sync(struct td_spools *sp, struct td_spool *s)
{
	if (td_spool_flush(sp, s) == -1 || td_spool_unstage(s) == -1)
		return -1;
	if (s->stage != NULL)	/* an idle recording keeps no stage */
		sp->held -= TD_SPOOL_STAGE;
	free(s->stage);
	s->stage = NULL;
	return 0;
}

/* Write out all a spool holds in memory and free its buffers. */
static int
td_spool_shed(struct td_spools *sp, struct td_spool *s)
{
	if (td_spool_sync(sp, s) == -1)
		return -1;
	sp->held -= s->ccap;
	free(s->chunk);
	s->chunk = NULL;
	s->ccap = 0;
	return 0;
}

/*
 * Past the writer's chunk_mem, the spool just written to goes out at once
 * (a shorter chunk) and gives its memory back: what a peer sends to many
 * CPUs, a page each, cannot make the writer hold a chunk for every one.
 */
static int
td_spool_budget(struct td_spools *sp, struct td_spool *s)
{
	if (sp->chunk_mem == 0 || sp->held <= sp->chunk_mem)
		return 0;
	return td_spool_shed(sp, s);
}

/*
 * Close the descriptor of another CPU's spool (round robin), its content
 * written out first: the writer keeps at most spool_fds open.
 */
static int
td_spool_evict(struct td_spools *sp, int keep)
{
	struct td_spool *s;
	int i, c;

	for (i = 0; i < sp->ncpus; i++) {
		c = (sp->evict + i) % sp->ncpus;
		s = &sp->cpu[c];
		if (c == keep || s->fd == -1)
			continue;
		if (td_spool_shed(sp, s) == -1)
			return -1;
		close(s->fd);
		s->fd = -1;
		sp->nopen--;
		sp->evict = (c + 1) % sp->ncpus;
		return 0;
	}
	return 0;
}

/*
 * An open descriptor for the spool of a CPU: the file is created at the
 * CPU's first page and reopened (it must be there) after an eviction or a
 * restore.
 */
static int
td_spool_fd(struct td_spools *sp, int cpu)
{
	struct td_spool *s = &sp->cpu[cpu];
	int flags = O_RDWR | O_CLOEXEC;

	if (s->fd != -1)
		return 0;
	if (sp->spool_fds > 0 && sp->nopen >= sp->spool_fds &&
	    td_spool_evict(sp, cpu) == -1)
		return -1;
	if (s->path == NULL) {
		xasprintf(&s->path, "%s.cpu%d.part", sp->path, cpu);
		flags |= O_CREAT;
		s->fd = td_fileio_open_new(s->path, 0600);
	} else
		s->fd = open(s->path, flags | O_NOFOLLOW);
	if (s->fd == -1) {
		if (flags & O_CREAT) {
			free(s->path);
			s->path = NULL;
		}
		return -1;
	}
	sp->nopen++;
	return 0;
}

/* Room for one more page in a spool's chunk buffer. */
static void
td_spool_room(struct td_spools *sp, struct td_spool *s)
{
	size_t want = s->fill + sp->page_size;

	if (want <= s->ccap)
		return;
	/* without a budget, the whole chunk at once */
	if (sp->chunk_mem == 0)
		want = td_spool_chunk_size(sp);
	s->chunk = xreallocarray(s->chunk, want, 1);
	sp->held += want - s->ccap;
	s->ccap = want;
}

/* Append one page of a CPU. */
int
td_spool_page(struct td_spools *sp, int cpu, const void *p, size_t n)
{
	struct td_spool *s = &sp->cpu[cpu];

	if (td_spool_fd(sp, cpu) == -1)
		return -1;
	td_spool_room(sp, s);
	memcpy(s->chunk + s->fill, p, n);
	if (n < sp->page_size)
		memset(s->chunk + s->fill + n, 0, sp->page_size - n);
	s->fill += sp->page_size;
	s->pages++;
	if (s->fill == td_spool_chunk_size(sp) && td_spool_flush(sp, s) == -1)
		return -1;
	return td_spool_budget(sp, s);
}

/* Append a chunk compressed elsewhere (after the CPU's pending pages). */
int
td_spool_chunk(struct td_spools *sp, int cpu, const void *z, size_t zlen,
    uint32_t npages)
{
	struct td_spool *s = &sp->cpu[cpu];

	if (td_spool_fd(sp, cpu) == -1)
		return -1;
	if (td_spool_flush(sp, s) == -1 ||
	    td_spool_put(s, z, zlen, npages * sp->page_size, &sp->held) == -1)
		return -1;
	s->pages += npages;
	return td_spool_budget(sp, s);
}

/* Every open spool's memory into its file. */
int
td_spool_sync_all(struct td_spools *sp)
{
	int i;

	for (i = 0; i < sp->ncpus; i++)
		if (sp->cpu[i].fd != -1 && td_spool_sync(sp, &sp->cpu[i]) == -1)
			return -1;
	return 0;
}

/* Copy n bytes of a spool from *in into fd at its file position. */
static int
td_spool_copy_range(int sfd, loff_t *in, uint64_t n, int fd, uint64_t *off)
{
	ssize_t r;
	char buf[65536];
	bool plain = false;

	while (n != 0) {
		if (!plain) {
			r = copy_file_range(sfd, in, fd, NULL, n, 0);
			if (r == -1 && errno == EINTR)
				continue;
			if (r == -1 && (errno == EXDEV || errno == ENOSYS ||
			    errno == EINVAL || errno == EOPNOTSUPP)) {
				plain = true;
				continue;
			}
			if (r == -1)
				return -1;
			if (r == 0) {
				errno = EIO;
				return -1;
			}
			n -= r;
			*off += r;
			continue;
		}
		r = pread(sfd, buf, n > sizeof buf ? sizeof buf : n, *in);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		if (td_fileio_write(fd, buf, r, off) == -1)
			return -1;
		*in += r;
		n -= r;
	}
	return 0;
}

/*
 * Copy a spool into fd at its file position; an unnamed spool a step at
 * a time, each step's blocks freed behind it (nothing reads it again).
 */
int
td_spool_copy(struct td_spools *sp, int cpu, int fd, uint64_t *off)
{
	struct td_spool *s = &sp->cpu[cpu];
	loff_t in = 0, from;
	uint64_t left = s->bytes, n;

	if (td_spool_fd(sp, cpu) == -1)
		return -1;
	while (left != 0) {
		n = sp->unnamed && left > TD_SPOOL_COPY_STEP ?
		    TD_SPOOL_COPY_STEP : left;
		from = in;
		if (td_spool_copy_range(s->fd, &in, n, fd, off) == -1)
			return -1;
		left -= n;
		/* a file system without holes keeps the blocks: no matter */
		if (sp->unnamed)
			(void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE |
			    FALLOC_FL_KEEP_SIZE, from, (off_t)n);
	}
	return 0;
}

/* Close every spool, removing its file if asked; counts stay. */
void
td_spool_close(struct td_spools *sp, bool remove)
{
	int i;

	for (i = 0; sp != NULL && i < sp->ncpus; i++) {
		struct td_spool *s = &sp->cpu[i];

		if (s->fd != -1) {
			close(s->fd);
			sp->nopen--;
		}
		s->fd = -1;
		if (s->path != NULL && remove)
			unlink(s->path);
		free(s->path);
		s->path = NULL;
		free(s->chunk);
		s->chunk = NULL;
		s->ccap = 0;
		free(s->stage);
		s->stage = NULL;
		s->staged = 0;
	}
	if (sp != NULL)
		sp->held = 0;
}

/* Pages of a CPU. */
uint64_t
td_spool_pages(const struct td_spools *sp, int cpu)
{
	return sp->cpu[cpu].pages;
}

/* Bytes in a CPU's spool file. */
uint64_t
td_spool_bytes(const struct td_spools *sp, int cpu)
{
	return sp->cpu[cpu].bytes;
}

/* Chunks in a CPU's spool file. */
uint32_t
td_spool_chunks(const struct td_spools *sp, int cpu)
{
	return sp->cpu[cpu].nchunks;
}

/* Memory of the set. */
size_t
td_spool_mem(const struct td_spools *sp)
{
	return sp->held + (size_t)sp->ncpus * sizeof *sp->cpu;
}

/* A CPU's counts as a checkpoint gave them. */
void
td_spool_set_counts(struct td_spools *sp, int cpu, uint64_t pages,
    uint64_t bytes, uint32_t chunks)
{
	sp->cpu[cpu].pages = pages;
	sp->cpu[cpu].bytes = bytes;
	sp->cpu[cpu].nchunks = chunks;
}

/* The spool files of a restored writer, cut back to the checkpoint. */
int
td_spool_reopen(struct td_spools *sp)
{
	int i, e, fd;

	/* each spool is cut to size and closed: reopened when written to */
	for (i = 0; i < sp->ncpus; i++) {
		struct td_spool *s = &sp->cpu[i];

		if (s->bytes == 0 && s->pages == 0)
			continue;
		xasprintf(&s->path, "%s.cpu%d.part", sp->path, i);
		if ((fd = open(s->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) == -1)
			return -1;
		e = td_fileio_cut(fd, s->bytes);
		close(fd);
		if (e == -1)
			return -1;
	}
	/*
	 * A spool of a CPU that had nothing at the checkpoint was begun
	 * after it: cut it off too, or nothing would ever remove it (only
	 * the spools a writer opened go at finish and abort).
	 */
	for (i = 0; i < sp->ncpus; i++) {
		char *path;

		if (sp->cpu[i].path != NULL)
			continue;
		xasprintf(&path, "%s.cpu%d.part", sp->path, i);
		e = unlink(path) == -1 && errno != ENOENT;
		free(path);
		if (e)
			return -1;
	}
	return 0;
}
