/*
 * metadefer.h: header sections written now, framed later.
 *
 * The privileged parent reads the header sections (kallsyms, megabytes of
 * it, and the event formats) as root, but the recorder it forks frames
 * them: compressing them and holding them in the stream's queue in the
 * parent cost its peak memory two megabytes (the queue, the section
 * codec, its staging), and the recorder inherited all of it.  A deferral
 * is a meta_sink that only records what it is given (sections begun,
 * their bytes, ended; options) into a memfd, which is never mapped; after
 * the fork, metadefer_replay() feeds the same calls, in the same order
 * and with the same bytes, to the real sink, 64 KiB at a time, and the
 * memfd goes.
 *
 * Ownership: the deferral owns its memfd and staging; metadefer_free()
 * closes both (the parent's copy after the fork too).  One thread.  No
 * logging: -1 with errno, or NULL.
 */
#ifndef TD_METADEFER_H
#define TD_METADEFER_H

#include <stddef.h>

struct meta_sink;
struct metadefer;

/* A deferral with an empty memfd; NULL (errno) where there is no memfd. */
struct metadefer	*metadefer_new(void);
/* A sink that records into d (pages and chunks are refused: EINVAL). */
void			 metadefer_sink(struct meta_sink *s,
			    struct metadefer *d);
/*
 * Feed everything recorded to s, in order, then empty d; -1 with a
 * message in err (errno kept) when s or the memfd fails.
 */
int			 metadefer_replay(struct metadefer *d,
			    const struct meta_sink *s, char *err,
			    size_t errlen);
/* Close the memfd and free d; NULL is fine. */
void			 metadefer_free(struct metadefer *d);

#endif
