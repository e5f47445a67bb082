/*
 * ring.c: per-CPU trace_pipe_raw readers through libtracefs.
 *
 * The file descriptor is opened here (not by tracefs_cpu_open()) so that the
 * recording loop can poll all CPUs in one epoll set; libtracefs then wraps
 * it with tracefs_cpu_alloc_fd() and does the reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <tracefs.h>

#include "instance.h"
#include "ring.h"
#include "xmalloc.h"
#include "banned.h"

struct ring {
	int			 cpu;
	int			 fd;
	struct tracefs_cpu	*tcpu;
};

/* Open the raw reader of one CPU. */
struct ring *
ring_open(struct instance *in, int cpu, size_t page_size)
{
	struct ring *r;
	char file[64], *path;
	int saved;

	snprintf(file, sizeof file, "per_cpu/cpu%d/trace_pipe_raw", cpu);
	if ((path = instance_path(in, file)) == NULL)
		return NULL;
	r = xcalloc(1, sizeof *r);
	r->cpu = cpu;
	r->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	free(path);
	if (r->fd == -1)
		goto fail;
	r->tcpu = tracefs_cpu_alloc_fd(r->fd, page_size, true);
	if (r->tcpu == NULL)
		goto fail;
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

/* Close the reader. */
void
ring_close(struct ring *r)
{
	if (r == NULL)
		return;
	tracefs_cpu_free_fd(r->tcpu);
	close(r->fd);
	free(r);
}
