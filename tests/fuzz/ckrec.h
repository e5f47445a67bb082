/*
 * ckrec.h: the small recording whose checkpoints fuzz-restore restores,
 * shared by fuzz-restore.c (which records it once at start, into a
 * template directory) and seedgen.c (whose "restore" seeds are its
 * checkpoints).  Both must make the very same bytes, so everything in it
 * is built in and deterministic.
 *
 * Each variant (v6, v7 with each codec) is one writer at PATH: 2 CPUs,
 * 256-byte pages, the six sections and an option, with CKREC_POINTS
 * checkpoints along the way (after create, between sections, with pages
 * waiting in chunks, at the end), then more pages no checkpoint covers,
 * and td_file_release(): the files on disk then hold every checkpoint's
 * content and more, as a listener's files do after a crash.
 */
#ifndef TD_CKREC_H
#define TD_CKREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "tdfile.h"

#define CKREC_VARIANTS	4
#define CKREC_POINTS	4
#define CKREC_NCPUS	2
#define CKREC_PAGE	256

/* What the writer held at one checkpoint. */
struct ckrec_point {
	struct td_buf	 state;		/* td_file_checkpoint() */
	struct td_buf	 listener;	/* checkpoint_write(): PATH.state */
	uint64_t	 pages[CKREC_NCPUS];
	unsigned int	 sections;	/* bit (id - HEADER_INFO) per section */
	uint32_t	 samples;	/* time-sync samples PATH.state keeps */
	uint32_t	 dropped;	/* ... and counts as dropped */
	bool		 paired;	/* PATH.state has a host (hv0) */
};

/* Variant v's name ("v6", "v7-none", "v7-zstd", "v7-zlib"). */
const char	*ckrec_name(int v);
/* The variant a checkpoint state is for (its first "tdck" block). */
int		 ckrec_variant(const void *state, size_t len);
/* Section id's content (HEADER_INFO .. CMDLINES), in the v6 layout. */
void		 ckrec_section(int id, struct td_buf *out);
/* Page seq of a CPU: CKREC_PAGE bytes. */
void		 ckrec_page(uint8_t *p, int cpu, uint64_t seq);
/*
 * Record variant v at path, filling pt[CKREC_POINTS] (its td_bufs are
 * initialized here; the caller frees them with ckrec_points_free()).
 * Returns 0, or -1 with errno.
 */
int		 ckrec_make(const char *path, int v, struct ckrec_point *pt);
void		 ckrec_points_free(struct ckrec_point *pt);

#endif
