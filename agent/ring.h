/*
 * ring.h: one per-CPU reader of the instance's ring buffer.
 *
 * Opens per_cpu/cpuN/trace_pipe_raw non-blocking and reads whole sub-buffers
 * through libtracefs.  ring_fd() is for the caller's poll loop.  Reads never
 * block.  No logging; -1 with errno on failure.
 */
#ifndef TD_RING_H
#define TD_RING_H

#include <stddef.h>
#include <sys/types.h>

struct ring;
struct instance;

struct ring	*ring_open(struct instance *in, int cpu, size_t page_size);
int		 ring_fd(const struct ring *r);
int		 ring_cpu(const struct ring *r);
/* Read one page into buf (page_size bytes); 0 when the ring is empty. */
ssize_t		 ring_read(struct ring *r, void *buf);
void		 ring_close(struct ring *r);

#endif
