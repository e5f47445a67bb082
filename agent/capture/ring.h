/*
 * ring.h: one per-CPU reader of the instance's ring buffer.
 *
 * Opens per_cpu/cpuN/trace_pipe_raw non-blocking and reads whole sub-buffers
 * through libtracefs.  ring_fd() is for the caller's poll loop.  Reads never
 * block.  No logging; -1 with errno on failure.
 *
 * A batching reader (ring_open(..., true)) also moves the pages the kernel
 * has finished in batches: splice(2) into a pipe, then one read(2) of the
 * batch (ring_fill(), ring_take()), two system calls per 16 pages instead
 * of one per page; the batch can be read straight into the caller's
 * memory.  Where splice does not work (a sub-buffer that is not one memory
 * page, an old kernel) it reads page by page like the others.
 */
#ifndef TD_RING_H
#define TD_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ring;
struct instance;

struct ring	*ring_open(struct instance *in, int cpu, size_t page_size,
		    bool batch);
int		 ring_fd(const struct ring *r);
int		 ring_cpu(const struct ring *r);
/* Read one page into buf (page_size bytes); 0 when the ring is empty. */
ssize_t		 ring_read(struct ring *r, void *buf);
/*
 * Move up to a batch of the pages the kernel has finished writing into the
 * reader's pipe: the result is the bytes waiting there (those of an
 * earlier call first), a multiple of page_size; 0 when there is none (the
 * page being written is left for ring_read()) or the reader does not
 * batch.
 */
ssize_t		 ring_fill(struct ring *r);
/*
 * Read n bytes (whole pages, at most ring_fill()'s) of them into buf, or
 * with buf NULL into the reader's own batch buffer (valid until the next
 * call); the pages, or NULL with errno.
 */
const void	*ring_take(struct ring *r, void *buf, size_t n);
bool		 ring_batched(const struct ring *r);
void		 ring_close(struct ring *r);

#endif
