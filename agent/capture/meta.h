/*
 * meta.h: collect the header sections and options of a recording, and the
 * one interface everything recorded goes through (struct meta_sink).
 *
 * The content of every section is produced in trace.dat's own layout (the
 * same bytes in v6 and v7) and handed to a meta_sink, which frames it; so
 * are the pages.  Sinks: the trace.dat writer (meta_sink_file(), -o), the
 * network stream (net_meta_sink(), -h), and a tee that feeds several as
 * one (meta_sink_tee(), -o and -h together).  Sections are streamed in
 * pieces, so kallsyms (megabytes) never sits in memory whole.  Returns 0 or
 * -1 with a message in err; never logs.  For the recorder's thread.
 */
#ifndef TD_META_H
#define TD_META_H

#include <stddef.h>
#include <stdint.h>

#include "tdfile.h"

struct instance;
struct meta_tee;

/*
 * Where a recording goes: header sections streamed in pieces (begin, write
 * them, end), options, and the pages of each CPU, one at a time (page, n <=
 * the page size, zero-padded) or npages compressed elsewhere as one block
 * of codec (chunk); batch_end says a burst of pages is over (what was
 * gathered may go).  Each returns 0 or -1 with errno.
 */
struct meta_sink {
	int	(*begin)(void *arg, enum td_opt id);
	int	(*write)(void *arg, const void *p, size_t n);
	int	(*end)(void *arg);
	int	(*option)(void *arg, enum td_opt id, const void *p, size_t n);
	int	(*page)(void *arg, int cpu, const void *p, size_t n);
	/*
	 * Optional (NULL: none): room for up to *npages whole pages of cpu
	 * in the sink's own memory, *npages lowered to what it takes; the
	 * caller writes them there and hands each to page() in order, in
	 * place, before anything else reaches the sink.  NULL: copy.
	 */
	void	*(*room)(void *arg, int cpu, uint32_t *npages);
	int	(*chunk)(void *arg, int cpu, enum td_codec_id codec,
		    const void *z, size_t zlen, uint32_t npages);
	int	(*batch_end)(void *arg);
	void	*arg;
};

/* Per-CPU figures from per_cpu/cpuN/stats at the end of a recording. */
struct meta_cpustat {
	uint64_t	entries;
	uint64_t	overrun;
	uint64_t	commit_overrun;
	uint64_t	dropped;
	uint64_t	read;
};

/* A sink that writes into a td_file (a chunk: of the file's codec only). */
void	meta_sink_file(struct meta_sink *s, struct td_file *f);
/*
 * A tee: the sinks added to it fed as one, in the order added; an action
 * stops at the first sink that fails, and meta_tee_what() then names it.
 */
struct meta_tee	*meta_tee_new(void);
/* Feed s too; what names it in messages ("cannot write 'PATH'"). */
void	meta_tee_add(struct meta_tee *t, const struct meta_sink *s,
	    const char *what);
/* Stop feeding the sink whose arg is arg (a network given up). */
void	meta_tee_drop(struct meta_tee *t, void *arg);
/* The name of the sink that failed last, "" if none did. */
const char *meta_tee_what(const struct meta_tee *t);
/* The arg of the sink that failed last, or NULL. */
void	*meta_tee_failed_arg(const struct meta_tee *t);
/* A sink that feeds every sink of t. */
void	meta_sink_tee(struct meta_sink *s, struct meta_tee *t);
void	meta_tee_free(struct meta_tee *t);
/* Sub-buffer size and commit field size from events/header_page. */
int	meta_geometry(uint32_t *page_size, int *commit_size, char *err,
	    size_t errlen);
/*
 * What the end of a recording reads (saved_cmdlines, trace_clock, per-CPU
 * stats of ncpus CPUs): opened now with instance_keep(), for a
 * recorder that drops root before the end.
 */
int	meta_keep_end_files(struct instance *in, int ncpus);
/*
 * KALLSYMS' text when /proc/kallsyms is read a second time (no memfd,
 * meta_kallsyms()): size bytes (what the first read counted) from fd,
 * whole lines only, however the reads cut them; what a line cut at size
 * (the file grew) or a shorter file leaves is newlines, which parsers
 * skip.  0, or -1 when the sink fails.
 */
int	meta_kallsyms_copy(int fd, int64_t size, const struct meta_sink *s);
/* HEADER_INFO, FTRACE_EVENTS, EVENT_FORMATS, KALLSYMS, PRINTK. */
int	meta_write_headers(struct instance *in, const struct meta_sink *s,
	    char *err, size_t errlen);
/* CMDLINES (taken at the end, when the recorded tasks are known). */
int	meta_write_cmdlines(struct instance *in, const struct meta_sink *s,
	    char *err, size_t errlen);
/* TRACECLOCK, UNAME, VERSION, TRACEID. */
int	meta_write_options(struct instance *in, const struct meta_sink *s,
	    uint64_t trace_id, char *err, size_t errlen);
/* One CPUSTAT option per CPU; fills st[ncpus]. */
int	meta_write_cpustats(struct instance *in, int ncpus,
	    const struct meta_sink *s, struct meta_cpustat *st, char *err,
	    size_t errlen);
/* Parse the text of a per-CPU stats file. */
void	meta_parse_cpustat(const char *text, struct meta_cpustat *st);

#endif
