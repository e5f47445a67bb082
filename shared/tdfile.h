/*
 * tdfile.h: the trace.dat writer, shared by tdagent (local recording) and
 * tdlisten (files assembled from the network).
 *
 * It writes version 7 files as trace-cmd 3.1.6 reads them (16-byte section
 * headers, compressed metadata sections, chunked compressed CPU data, a
 * STRINGS section, linked options sections) and version 6 files (flyrecord
 * with options, no compression).  All sizes and offsets are 64-bit.
 *
 * Life cycle: td_file_create() opens "PATH.part" beside the final path; the
 * caller adds metadata sections (streamed, so kallsyms never sits in memory
 * whole), options, and CPU pages in any interleaving across CPUs; pages go to
 * one spool file per CPU in the same directory ("PATH.cpuN.part"), compressed
 * chunk by chunk.  td_file_finish() appends the CPU data, options and strings,
 * renames the file into place and removes the spools.  td_file_abort()
 * removes everything instead.  A file is therefore either complete at PATH or
 * absent: never a silently corrupt PATH.
 *
 * Version 6 fixes the order of metadata: HEADER_INFO, FTRACE_EVENTS,
 * EVENT_FORMATS, KALLSYMS, PRINTK, CMDLINES; a section out of that order
 * fails with EINVAL.  Version 7 takes them in any order, each at most once.
 *
 * Numbers are written in host byte order, which the file declares.  Memory
 * use is bounded: one chunk per CPU (compressed, also up to 16 KiB of
 * compressed chunks gathered for its spool until a checkpoint or the
 * finish) plus the options and strings, and while
 * a section is open 64 KiB of its content (zstd) or a zlib stream; the
 * compression context may be shared (codec_ctx).  Not thread safe; one
 * writer per recording.  Functions return 0 or -1 with errno set;
 * nothing here logs.
 *
 * Implemented by tdfile.c (the writer), tdspool.c (the per-CPU spools) and
 * tdfile-state.c (checkpoint and restore).
 */
#ifndef TD_TDFILE_H
#define TD_TDFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "compress.h"

struct td_buf;

/* Section and option ids, trace-cmd's numbering (never renumber). */
enum td_opt {
	TD_OPT_DONE		= 0,
	TD_OPT_DATE		= 1,
	TD_OPT_CPUSTAT		= 2,
	TD_OPT_BUFFER		= 3,
	TD_OPT_TRACECLOCK	= 4,
	TD_OPT_UNAME		= 5,
	TD_OPT_HOOK		= 6,
	TD_OPT_OFFSET		= 7,
	TD_OPT_CPUCOUNT		= 8,
	TD_OPT_VERSION		= 9,
	TD_OPT_PROCMAPS		= 10,
	TD_OPT_TRACEID		= 11,
	TD_OPT_TIME_SHIFT	= 12,
	TD_OPT_GUEST		= 13,
	TD_OPT_TSC2NSEC		= 14,
	TD_OPT_STRINGS		= 15,
	TD_OPT_HEADER_INFO	= 16,
	TD_OPT_FTRACE_EVENTS	= 17,
	TD_OPT_EVENT_FORMATS	= 18,
	TD_OPT_KALLSYMS		= 19,
	TD_OPT_PRINTK		= 20,
	TD_OPT_CMDLINES		= 21,
	TD_OPT_BUFFER_TEXT	= 22,
	/* tracedock's own: the time-sync samples with their error bounds,
	   ASCII; trace-cmd skips options it does not know */
	TD_OPT_TD_TSYNC		= 0x7464,
	/* tracedock's own, on the wire only (tdproto.md): a guest of the
	   agent's machine, its vCPU threads and KVM clock; the listener
	   turns it into GUEST options and never writes it */
	TD_OPT_TD_GUEST		= 0x7467,
	/* tracedock's own, ASCII: what a producer lost on the way (a
	   trace-cmd client's UDP datagrams), one line per CPU */
	TD_OPT_TD_LOSS		= 0x746c,
};

struct td_file_params {
	int		 version;	/* 6 or 7 */
	enum td_codec_id codec;		/* v7 only; v6 is never compressed */
	int		 level;		/* codec level, 0 = fast default */
	uint32_t	 page_size;	/* ring-buffer sub-buffer size */
	uint8_t		 long_size;	/* recorder's user-space long: 4 or 8 */
	int		 ncpus;		/* CPUs of the traced machine */
	const char	*clock;		/* trace clock name, e.g. "local" */
	/*
	 * NULL, or a context of codec for the writer to use instead of its
	 * own: writers of one thread may share one (tdlisten's sessions), as
	 * compressing leaves no state in it.  It must outlive the writer.
	 */
	struct td_codec	*codec_ctx;
	/*
	 * For a writer whose process loses the right to write in the
	 * directory after td_file_create() (tdagent's unprivileged
	 * recorder).  unnamed_spools: every CPU's spool is opened by
	 * td_file_create(), unnamed, so nothing is created or removed later;
	 * td_file_finish() frees their blocks as it copies them, so that it
	 * needs little room beyond the data (and a failed finish loses it).
	 * keep_part: td_file_finish() leaves the complete file as "PATH.part"
	 * for the caller to rename to PATH (td_file_abort() still tries to
	 * remove it: the caller removes it if that was not allowed).
	 */
	bool		 unnamed_spools;
	bool		 keep_part;
	/*
	 * Permissions of PATH.part and so of PATH (0: 0600); spools are
	 * 0600.  Each is made new (O_EXCL, O_NOFOLLOW): a name already there
	 * is removed first, never followed or truncated.
	 */
	mode_t		 mode;
	/*
	 * Bounds for a writer fed by a peer (0: none).  chunk_mem: bytes of
	 * unfinished chunks and gathered compressed chunks the writer may
	 * hold over all its CPUs; past it, the CPU written to has its chunk
	 * written out at once (shorter) and its buffers freed.  spool_fds:
	 * spool files open at once; others are closed, written out, and
	 * reopened by name when their CPU writes again (not with
	 * unnamed_spools).
	 */
	size_t		 chunk_mem;
	int		 spool_fds;
};

struct td_file;

struct td_file	*td_file_create(const char *path,
		    const struct td_file_params *p);
/* Stream a metadata section: begin, write its content in pieces, end. */
int		 td_file_section_begin(struct td_file *f, enum td_opt id);
int		 td_file_section_write(struct td_file *f, const void *p,
		    size_t n);
int		 td_file_section_end(struct td_file *f);
/*
 * Copy a section stored compressed in a file of this writer's version (7)
 * and codec as it is stored (its block, in pieces); EINVAL for a writer
 * that does not compress.
 */
int		 td_file_section_raw_begin(struct td_file *f, enum td_opt id);
int		 td_file_section_raw_write(struct td_file *f, const void *p,
		    size_t n);
int		 td_file_section_raw_end(struct td_file *f);
/* Drop the open section (its peer went away mid-section). */
int		 td_file_section_cancel(struct td_file *f);
/* Whether a section is open (a checkpoint must wait). */
int		 td_file_in_section(const struct td_file *f);
/* Whether a section has been written completely. */
int		 td_file_has_section(const struct td_file *f, enum td_opt id);
/* The three calls above in one, for a section held in memory. */
int		 td_file_section_add(struct td_file *f, enum td_opt id,
		    const void *p, size_t n);
/*
 * Queue an option record; written at td_file_finish().  All of a file's
 * options together are at most TD_MAX_OPTIONS_TOTAL bytes (EFBIG).
 */
int		 td_file_add_option(struct td_file *f, enum td_opt id,
		    const void *p, size_t n);
/* Append one ring-buffer page of a CPU; n < page_size is zero-padded. */
int		 td_file_cpu_page(struct td_file *f, int cpu, const void *p,
		    size_t n);
/*
 * The codec of the file's CPU chunks (TD_CODEC_NONE for an uncompressed or
 * version 6 file), and a way to append npages pages of a CPU that come
 * compressed with it already, as one chunk: they are stored as they are.
 * The caller has checked that the block decompresses to npages pages.
 */
enum td_codec_id td_file_chunk_codec(const struct td_file *f);
int		 td_file_cpu_chunk(struct td_file *f, int cpu, const void *z,
		    size_t zlen, uint32_t npages);
/* Write everything, rename into place.  The handle must then be freed. */
int		 td_file_finish(struct td_file *f);
/* Remove the partial output and spools. */
void		 td_file_abort(struct td_file *f);
/* Free a finished or aborted writer (aborts an unfinished one). */
void		 td_file_free(struct td_file *f);
/*
 * Checkpoints, for a writer that must survive its process (tdlisten's
 * resumable sessions).  td_file_checkpoint() writes out every page still
 * waiting in a chunk (as a shorter chunk) and every chunk still gathered
 * in memory, and appends to state a description of the writer: the .part
 * file and the spools on disk then hold exactly what it describes.
 * Options go to a side file ("PATH.opts.part"), appended: the state holds
 * their length only, so a checkpoint writes each option once, not all of
 * them every time.  It fails with EBUSY while a section is open.
 * td_file_restore() reopens the .part file, spools and options of path as
 * a checkpoint described them, cutting off anything written after it; the
 * writer then continues as if never interrupted.  The state is for the same
 * machine and build only; it is checked for consistency, not trusted.
 */
int		 td_file_checkpoint(struct td_file *f, struct td_buf *state);
struct td_file	*td_file_restore(const char *path, const void *state,
		    size_t len);
/* Close and free a writer, keeping its files as they are on disk. */
void		 td_file_release(struct td_file *f);
/*
 * Use ctx (see td_file_params.codec_ctx) from now on instead of the
 * writer's own context, for a writer made by td_file_restore().
 */
int		 td_file_share_codec(struct td_file *f, struct td_codec *ctx);
/* Set the bounds of td_file_params (for a writer td_file_restore() made). */
void		 td_file_set_limits(struct td_file *f, size_t chunk_mem,
		    int spool_fds);
/* Bytes of memory the writer holds for its data (buffers, options). */
size_t		 td_file_mem(const struct td_file *f);
/* Pages appended for one CPU so far. */
uint64_t	 td_file_cpu_pages(const struct td_file *f, int cpu);
/* What the file was made with. */
const struct td_file_params *td_file_get_params(const struct td_file *f);
/* Bytes written to the final file (after td_file_finish()). */
uint64_t	 td_file_size(const struct td_file *f);
/*
 * Bytes written so far, before the finish: the file, the spools and the
 * options queued (pages still in an unfinished chunk are not counted).
 */
uint64_t	 td_file_written(const struct td_file *f);

#endif
