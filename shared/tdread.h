/*
 * tdread.h: a small bounded reader of trace.dat files, versions 6 and 7
 * (v7 compressed with zstd or zlib, or not compressed).
 *
 * It exists because no tool on a Debian 12 machine reads zlib-compressed v7
 * files, and because replaying and recovering recordings needs a reader that
 * is safe on damaged input.  The test tools use it, and tdlisten parses
 * with it the trace.dat headers that foreign producers send (a stock
 * trace-cmd record -N client: td_read_open_header()).  It gives back the
 * bytes the writer (tdfile.h) was handed: the decompressed content of each
 * metadata section, the raw data of each option, and every ring-buffer page
 * of each CPU of the top-level buffer.  It does not interpret events.
 * Implemented by tdread.c (open), tdread-io.c (bounded reads),
 * tdread-sect.c (sections, options) and tdread-pages.c (pages).
 *
 * Bounds: every length and offset read from the file is checked against the
 * file size and against the caps of tdlimits.h before anything is allocated or
 * read, so a hostile or truncated file makes a call fail with EBADMSG and
 * never crash or allocate without bound.  Memory use is one decompressed
 * chunk (at most TD_MAX_CHUNK_SIZE) plus one page while pages are walked,
 * one options section (at most TD_MAX_SECTION_SIZE, and never more than the
 * file holds) while options are looked up, and the caller's buffer.
 *
 * Numbers are converted from the endianness the file declares; pages are
 * handed out as stored.  A handle is not thread safe.  Functions return 0 or
 * -1 with errno set, constructors a pointer or NULL; nothing here logs.
 */
#ifndef TD_TDREAD_H
#define TD_TDREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compress.h"
#include "tdfile.h"

struct td_buf;
struct td_read;

/*
 * Open and check a trace.dat file: the initial format, the options (v7) or
 * the whole header (v6), and the table of CPU data.  NULL with errno set on
 * failure: EBADMSG for a malformed file, EOPNOTSUPP for an unknown codec or
 * version, or the error of open/read.
 */
struct td_read	*td_read_open(const char *path);
/*
 * Read the trace.dat header that a trace-cmd record -N client sends (the
 * initial format, the metadata sections, then the CPU count and options
 * of v6 or the first options section of v7, and no CPU data) from fd, a
 * regular file or memfd (the reader keeps a duplicate).  Everything else
 * as td_read_open(); every CPU then has no data.
 */
struct td_read	*td_read_open_header(int fd);
/* Close a reader; NULL is fine. */
void		 td_read_close(struct td_read *r);

/* File version: 6 or 7. */
int		 td_read_version(const struct td_read *r);
/* Codec of the metadata and CPU data (always TD_CODEC_NONE for v6). */
enum td_codec_id td_read_codec(const struct td_read *r);
/* Ring-buffer page size declared by the file. */
uint32_t	 td_read_page_size(const struct td_read *r);
/* Size of a long of the recording machine: 4 or 8. */
int		 td_read_long_size(const struct td_read *r);
/* CPU count of the recording (CPUCOUNT option in v7, header in v6). */
int		 td_read_ncpus(const struct td_read *r);
/* Trace clock of the top-level buffer ("" if the file names none). */
const char	*td_read_clock(const struct td_read *r);
/* Bytes of stored data of one CPU, as the file declares them. */
uint64_t	 td_read_cpu_size(const struct td_read *r, int cpu);

/*
 * Replace the content of out with the decompressed content of a metadata
 * section: TD_OPT_HEADER_INFO, _FTRACE_EVENTS, _EVENT_FORMATS, _KALLSYMS,
 * _PRINTK, _CMDLINES, or TD_OPT_STRINGS (all STRINGS sections concatenated,
 * v7 only).  The bytes are the same for v6 and v7.  ENOENT if the file has
 * no such section, EINVAL for another id, ENOBUFS if out's cap is too small.
 */
int		 td_read_section(struct td_read *r, enum td_opt id,
		    struct td_buf *out);
/*
 * Where the stored bytes of metadata section id are, for a copy in pieces
 * that never holds the section whole (rotate.c): *off and *n in the file,
 * and whether they are a compressed block (v7), which only
 * td_read_section() reads.  -1 with errno (ENOENT: no such section).
 * td_read_bytes(): n bytes at off, all inside the file, or -1.
 */
int		 td_read_section_span(struct td_read *r, enum td_opt id,
		    uint64_t *off, uint64_t *n, bool *compressed);
int		 td_read_bytes(struct td_read *r, uint64_t off, void *p,
		    size_t n);

/*
 * Replace the content of out with the data of the nth (from 0) option
 * record with this id, in file order across all options sections (v7) or
 * in the options block (v6).  ENOENT if there are not that many.
 */
int		 td_read_option(struct td_read *r, enum td_opt id, int nth,
		    struct td_buf *out);

/*
 * Call cb for every option record, in file order across all options
 * sections (v7) or in the options block (v6), DONE records excluded;
 * p is valid during the call only.  A non-zero return of cb stops the walk
 * and is returned; -1 with errno for a malformed file.
 */
int		 td_read_options(struct td_read *r,
		    int (*cb)(void *arg, uint16_t id, const void *p,
		    size_t n), void *arg);

/*
 * Call cb for every page of a CPU of the top-level buffer, in order,
 * decompressing chunks as needed.  Pages are page_size bytes except perhaps
 * a short last one; the memory is valid only during the call.  A CPU
 * without data gives no call.  The chunk table is checked before the first
 * call, so a malformed layout gives EBADMSG with no page delivered; a chunk
 * that fails to decompress stops the walk at that chunk.  If cb returns
 * non-zero the walk stops and -1 is returned with cb's errno.  EINVAL for a
 * CPU out of range.
 */
int		 td_read_cpu_pages(struct td_read *r, int cpu,
		    int (*cb)(void *arg, const void *page, size_t len),
		    void *arg);

#endif
