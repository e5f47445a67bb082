/*
 * tcmeta.h: the trace.dat header a trace-cmd record -N client sends on
 * its control connection (the initial format, the metadata sections and
 * the first options, no CPU data), read with shared/tdread and checked
 * against what its TINIT said, then handed to a recording: its params,
 * its sections and its options.
 *
 * Errors: -1 or NULL with a message in err (the client's fault: its
 * metadata is not a trace.dat header, or lies).  Nothing here logs.  Loop
 * thread only.
 */
#ifndef TD_TCMETA_H
#define TD_TCMETA_H

#include <stddef.h>
#include <stdint.h>

struct recording;
struct recording_params;
struct tcmeta;

/*
 * Read the header held in fd (a memfd) of a client that declared ncpus
 * CPUs of page_size bytes.
 */
struct tcmeta	*tcmeta_read(int fd, uint32_t ncpus, uint32_t page_size,
		    char *err, size_t errlen);
/* What the header says of the recording: clock, long and commit size. */
void		 tcmeta_params(struct tcmeta *m,
		    struct recording_params *p);
/* The file version and codec the client wrote ("v7 zstd"), for the log. */
const char	*tcmeta_describe(const struct tcmeta *m);
/*
 * Hand every metadata section and the client's options to r (those a
 * writer makes itself, section offsets, CPUCOUNT, BUFFER, are not).  The
 * sections decompressed are TD_TC_MAX_SECTIONS bytes at most in all, and
 * the one held is counted in r's memory account.  0, or -1 with err (the
 * client's metadata is too big, or the recording's reason).
 */
int		 tcmeta_feed(struct tcmeta *m, struct recording *r, char *err,
		    size_t errlen);
/*
 * What tcmeta_feed() put right ("" if nothing): a section whose size field
 * is not what it holds (trace-cmd read a file while it changed).
 */
const char	*tcmeta_repaired(const struct tcmeta *m);
void		 tcmeta_free(struct tcmeta *m);

#endif
