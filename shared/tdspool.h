/*
 * tdspool.h: the per-CPU spools of a trace.dat writer, private to the
 * writer (tdfile.c, tdfile-state.c); callers outside shared/ use tdfile.h.
 *
 * A spool set holds, for each CPU of a recording, the pages waiting to
 * fill a chunk (TD_CHUNK_PAGES pages) and, behind them, a file of finished
 * chunks: "PATH.cpuN.part" beside the output, made at the CPU's first page,
 * or unnamed files opened at once (td_spool_open_unnamed()).  With a codec
 * each chunk is compressed and stored as {u32 csize, u32 usize, data}, its
 * small chunks gathered in memory (16 KiB per CPU) before they are written;
 * without one, pages are stored as they are.  At the finish the writer
 * copies each CPU's file into the trace.dat file (td_spool_copy()).
 *
 * Memory: one chunk buffer and one gathering buffer per CPU that is being
 * written, bounded over all CPUs by chunk_mem (0: no bound), which sends
 * the CPU just written to out at once (a shorter chunk) when passed;
 * descriptors: at most spool_fds open (0: no bound), others closed and
 * reopened by name when their CPU is written again.
 *
 * The set owns its files' descriptors and names, never the codec (the
 * writer's).  Counts (pages, bytes, chunks) survive td_spool_close(), so
 * the writer can still answer for them.  Not thread safe: the writer's
 * thread only.  Actions return 0, or -1 with errno set (ENOSPC for a short
 * write); nothing here logs.
 */
#ifndef TD_TDSPOOL_H
#define TD_TDSPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_codec;
struct td_spools;

/*
 * A spool set of ncpus CPUs for the output at path, for pages of
 * page_size bytes, compressed with codec (NULL: stored as they are).
 * Nothing is opened yet.
 */
struct td_spools *td_spool_new(const char *path, int ncpus,
		    uint32_t page_size, struct td_codec *codec);
/* Close every spool, keep their files, and free the set; NULL is fine. */
void		 td_spool_free(struct td_spools *sp);
/* Compress with codec from now on (the same codec id as before). */
void		 td_spool_set_codec(struct td_spools *sp,
		    struct td_codec *codec);
/* The bounds above: chunk_mem bytes, spool_fds descriptors (0: none). */
void		 td_spool_set_limits(struct td_spools *sp, size_t chunk_mem,
		    int spool_fds);
/*
 * Open every CPU's spool now, unnamed in the output's directory (named and
 * removed at once where O_TMPFILE is not supported), for a writer that may
 * not create or remove files later.  Never with spool_fds.
 */
int		 td_spool_open_unnamed(struct td_spools *sp);
/*
 * Append one page of a CPU (the caller checked cpu and n <= page_size);
 * a short page is zero-padded.
 */
int		 td_spool_page(struct td_spools *sp, int cpu, const void *p,
		    size_t n);
/*
 * Append npages pages of a CPU compressed elsewhere with the set's codec,
 * as one chunk, after the CPU's waiting pages (the caller checked it).
 */
int		 td_spool_chunk(struct td_spools *sp, int cpu, const void *z,
		    size_t zlen, uint32_t npages);
/*
 * Write everything waiting in memory into the spool files (waiting pages
 * as a shorter chunk): the files then hold what the counts say.
 */
int		 td_spool_sync_all(struct td_spools *sp);
/*
 * Copy a CPU's spool file to fd at its file position (after
 * td_spool_sync_all()), adding the bytes copied to *off.
 */
int		 td_spool_copy(struct td_spools *sp, int cpu, int fd,
		    uint64_t *off);
/*
 * Close every spool and free its buffers, removing its file if remove;
 * the counts stay.
 */
void		 td_spool_close(struct td_spools *sp, bool remove);
/* Pages appended for a CPU. */
uint64_t	 td_spool_pages(const struct td_spools *sp, int cpu);
/* Bytes in a CPU's spool file. */
uint64_t	 td_spool_bytes(const struct td_spools *sp, int cpu);
/* Chunks in a CPU's spool file. */
uint32_t	 td_spool_chunks(const struct td_spools *sp, int cpu);
/* Bytes of memory the set holds (buffers and its per-CPU table). */
size_t		 td_spool_mem(const struct td_spools *sp);
/*
 * Restoring a checkpoint: set a CPU's counts as the checkpoint gave them,
 * for every CPU, then td_spool_reopen().
 */
void		 td_spool_set_counts(struct td_spools *sp, int cpu,
		    uint64_t pages, uint64_t bytes, uint32_t chunks);
/*
 * Name the spool file of every CPU that had pages or bytes and cut it to
 * its bytes (EIO if shorter), leaving it closed until written to; remove
 * the spool file of every other CPU (begun after the checkpoint, it would
 * never be removed otherwise).
 */
int		 td_spool_reopen(struct td_spools *sp);

#endif
