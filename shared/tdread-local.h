/*
 * tdread-local.h: the trace.dat reader's own state, shared by the files
 * that implement tdread.h: tdread.c (open: the initial format and where
 * every part lies), tdread-io.c (bounded reads of the file), tdread-sect.c
 * (metadata sections and options) and tdread-pages.c (CPU pages).  Nobody
 * else includes it; callers use tdread.h.
 *
 * Invariants once td_read_open() returned: fsize is the file's size at
 * open and every read goes through td_read_at(), which refuses a range
 * past it; version, swap, page_size, codec (and dec for v7), ncpus, cpu[]
 * and clock are set and checked against tdlimits.h; a CPU's off and size
 * lie inside the file.  The reader owns fd, dec, clock and cpu.  ioerr is
 * the pread() error of the current public call (reset at its start), so
 * that a failure is reported as the I/O error rather than EBADMSG.  One
 * thread per reader.  Functions return 0 or -1 with errno set (EBADMSG for
 * a malformed file); nothing here logs.
 */
#ifndef TD_TDREAD_LOCAL_H
#define TD_TDREAD_LOCAL_H

#include <byteswap.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "compress.h"
#include "tdfile.h"

#define TD_SECT_HDR		16
#define TD_SECT_COMPRESSED	0x1


/* Where the content of a v6 metadata section lies. */
struct td_v6_sect {
	uint64_t	 off;
	uint64_t	 size;
	bool		 present;
};

/* Stored data of one CPU of the top-level buffer. */
struct td_read_cpu {
	uint64_t	 off;		/* v7 compressed: the chunk count */
	uint64_t	 size;		/* bytes after the count */
};

/* An open file: its declared layout and where its parts lie. */
struct td_read {
	int			 fd;
	int			 ioerr;		/* pread() error of this call */
	uint64_t		 fsize;
	int			 version;
	bool			 header_only;	/* no CPU data needed */
	bool			 swap;
	int			 long_size;
	uint32_t		 page_size;
	enum td_codec_id	 codec;
	struct td_codec		*dec;
	uint64_t		 hdr_end;	/* end of the initial format */
	uint64_t		 opts_off;	/* v7: first options section */
	uint64_t		 v6_opts;	/* v6: first option record */
	uint64_t		 v6_opts_len;	/* v6: bytes of the records */
	struct td_v6_sect	 v6[TD_OPT_CMDLINES + 1];
	int			 ncpus;
	char			*clock;
	bool			 cpu_compressed;
	struct td_read_cpu	*cpu;
};

/* Callback of the options walk: <0 error, 0 go on, >0 stop. */
typedef int (*td_read_opt_fn)(struct td_read *, uint16_t, const uint8_t *,
    uint32_t, void *);

/*
 * Fail a read of the file: EBADMSG for a malformed file, or the error of
 * pread() if one happened during the current call.
 */
static inline int
td_read_bad(const struct td_read *r)
{
	errno = r->ioerr != 0 ? r->ioerr : EBADMSG;
	return -1;
}

/* A u16 of the file at p, in host order. */
static inline uint16_t
td_read_u16(const struct td_read *r, const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof v);
	return r->swap ? bswap_16(v) : v;
}

/* A u32 of the file at p, in host order. */
static inline uint32_t
td_read_u32(const struct td_read *r, const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof v);
	return r->swap ? bswap_32(v) : v;
}

/* A u64 of the file at p, in host order. */
static inline uint64_t
td_read_u64(const struct td_read *r, const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof v);
	return r->swap ? bswap_64(v) : v;
}

/* True if [off, off + n) lies inside the file. */
static inline bool
td_read_in_file(const struct td_read *r, uint64_t off, uint64_t n)
{
	return off <= r->fsize && n <= r->fsize - off;
}

/* tdread-io.c: bounded reads; *pos moves past what was read. */

/* Read exactly n bytes at off; EBADMSG if the range is not in the file. */
int	td_read_at(struct td_read *r, uint64_t off, void *p, size_t n);
/* A u32 at *pos. */
int	td_read_get32(struct td_read *r, uint64_t *pos, uint32_t *v);
/* A u64 at *pos. */
int	td_read_get64(struct td_read *r, uint64_t *pos, uint64_t *v);
/* Move *pos past n bytes, which must lie in the file. */
int	td_read_skip(struct td_read *r, uint64_t *pos, uint64_t n);
/* Read a NUL-terminated string of at most cap bytes (NUL included). */
int	td_read_str(struct td_read *r, uint64_t *pos, char *s, size_t cap);
/* Skip a NUL-terminated string of any length (bounded by the file). */
int	td_read_skip_str(struct td_read *r, uint64_t *pos);

/* tdread-sect.c: sections and options. */

/*
 * Call fn for every option record of the file, in file order; fn's
 * non-zero return stops the walk and is returned.
 */
int	td_read_opts_walk(struct td_read *r, td_read_opt_fn fn, void *arg);

#endif
