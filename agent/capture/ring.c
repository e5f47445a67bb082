/*
 * ring.c: per-CPU trace_pipe_raw readers through libtracefs.
 *
 * The file descriptor is opened here (not by tracefs_cpu_open()) so that the
 * recording loop can poll all CPUs in one epoll set; libtracefs then wraps
 * it with tracefs_cpu_alloc_fd() and does the single-page reads.  Batches
 * go through a pipe of our own: the kernel's splice of trace_pipe_raw
 * hands over only pages the writer has left, RING_BATCH at most (a pipe's
 * default capacity, so no F_SETPIPE_SZ and no /proc/sys limit).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <tracefs.h>

#include "instance.h"
#include "ring.h"
#include "xmalloc.h"
#include "banned.h"

#define RING_BATCH	16

/* One CPU's trace_pipe_raw reader, with its splice pipe when it batches. */
struct ring {
	int			 cpu;
	int			 fd;
	struct tracefs_cpu	*tcpu;
	size_t			 page_size;
	int			 pipe[2];	/* -1: no batches */
	size_t			 inpipe;	/* bytes spliced, not read */
	uint8_t			*batch;
};

static void
ring_no_batches(struct ring *r)
{
	if (r->pipe[0] != -1) {
		close(r->pipe[0]);
		close(r->pipe[1]);
	}
	r->pipe[0] = r->pipe[1] = -1;
	r->inpipe = 0;
	free(r->batch);
	r->batch = NULL;
}

/*
 * Whether cpu is online, from /sys/devices/system/cpu/online ("0-3,5");
 * true when that cannot be read.
 */
static bool
ring_cpu_online(int cpu)
{
	char text[4096], *p, *end;
	long lo, hi;
	ssize_t n;
	int fd;

	fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return true;
	n = read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 0)
		return true;
	text[n] = '\0';
	for (p = text; *p >= '0' && *p <= '9'; p = end + 1) {
		lo = hi = strtol(p, &end, 10);
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (cpu >= lo && cpu <= hi)
			return true;
		if (*end != ',')
			break;
	}
	return false;
}

/*
 * Open the raw reader of one CPU.  A CPU that is possible but was never
 * online (a virtual machine started with fewer vCPUs than it may have)
 * has no ring buffer: its trace_pipe_raw fails reads with ENODEV and
 * polls as ready for ever.  It counts as not present (ENOENT); one
 * brought online later is not recorded.
 */
struct ring *
ring_open(struct instance *in, int cpu, size_t page_size, bool batch)
{
	struct ring *r;
	char file[64], *path;
	int saved;

	if (!ring_cpu_online(cpu)) {
		errno = ENOENT;
		return NULL;
	}
	snprintf(file, sizeof file, "per_cpu/cpu%d/trace_pipe_raw", cpu);
	if ((path = instance_path(in, file)) == NULL)
		return NULL;
	r = xcalloc(1, sizeof *r);
	r->cpu = cpu;
	r->page_size = page_size;
	r->pipe[0] = r->pipe[1] = -1;
	r->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	free(path);
	if (r->fd == -1)
		goto fail;
	r->tcpu = tracefs_cpu_alloc_fd(r->fd, page_size, true);
	if (r->tcpu == NULL)
		goto fail;
	/* splice moves memory pages: a larger sub-buffer reads one by one */
	if (batch && page_size == (size_t)sysconf(_SC_PAGESIZE) &&
	    pipe2(r->pipe, O_NONBLOCK | O_CLOEXEC) == 0)
		r->batch = xmalloc(RING_BATCH * page_size);
	return r;
fail:
	saved = errno;
	if (r->fd != -1)
		close(r->fd);
	free(r);
	errno = saved;
	return NULL;
}

/* The descriptor to poll. */
int
ring_fd(const struct ring *r)
{
	return r->fd;
}

/* The CPU this reader serves. */
int
ring_cpu(const struct ring *r)
{
	return r->cpu;
}

/* Read one sub-buffer if there is one. */
ssize_t
ring_read(struct ring *r, void *buf)
{
	int n;

	n = tracefs_cpu_read(r->tcpu, buf, true);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		return -1;
	}
	return n;
}

/* Splice a batch of finished pages into the pipe; see ring.h. */
ssize_t
ring_fill(struct ring *r)
{
	ssize_t n;

	if (r->pipe[0] == -1)
		return 0;
	if (r->inpipe > 0)
		return (ssize_t)r->inpipe;
	n = splice(r->fd, NULL, r->pipe[1], NULL, RING_BATCH * r->page_size,
	    SPLICE_F_NONBLOCK);
	if (n <= 0) {
		if (n == 0 || errno == EAGAIN || errno == EINTR)
			return 0;
		if (errno == EINVAL || errno == ENOSYS) {
			ring_no_batches(r);	/* read(2) from now on */
			return 0;
		}
		return -1;
	}
	if (n % (ssize_t)r->page_size != 0) {
		errno = EIO;	/* the kernel moves whole pages */
		return -1;
	}
	r->inpipe = (size_t)n;
	return n;
}

/* Read n bytes of the spliced pages; see ring.h. */
const void *
ring_take(struct ring *r, void *buf, size_t n)
{
	uint8_t *p = buf != NULL ? buf : r->batch;
	ssize_t k;
	size_t got;

	if (n > r->inpipe || n % r->page_size != 0) {
		errno = EINVAL;
		return NULL;
	}
	for (got = 0; got < n; got += (size_t)k) {
		k = read(r->pipe[0], p + got, n - got);
		if (k == -1 && errno == EINTR) {
			k = 0;
			continue;
		}
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return NULL;
		}
	}
	r->inpipe -= n;
	return p;
}

/* Whether whole pages come in batches (else ring_read() does it all). */
bool
ring_batched(const struct ring *r)
{
	return r->pipe[0] != -1;
}

/* Close the reader. */
void
ring_close(struct ring *r)
{
	if (r == NULL)
		return;
	ring_no_batches(r);
	tracefs_cpu_free_fd(r->tcpu);
	close(r->fd);
	free(r);
}
