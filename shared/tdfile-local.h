/*
 * tdfile-local.h: the trace.dat writer's own state, shared by the two
 * files that implement tdfile.h: tdfile.c (writing and finishing) and
 * tdfile-state.c (checkpoint and restore, which must describe and rebuild
 * every field).  Nobody else includes it; callers use tdfile.h.
 *
 * Invariants: sec_id is -1 or the id of the one open section, whose header
 * is at sec_hdr; sec_off[id] is the header offset of every section begun
 * (0: none); off is the end of what the .part file holds; options.len >=
 * opts_synced, the bytes already in the side file.  The writer owns every
 * buffer and descriptor here, its spools (reached only through tdspool.h)
 * and its codec unless it is p.codec_ctx.  Same thread rule and error
 * convention as tdfile.h: 0 or -1 with errno set, constructors NULL.
 */
#ifndef TD_TDFILE_LOCAL_H
#define TD_TDFILE_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "tdfile.h"

/* sec_off's size: every section id is below it (trace-cmd's end at 22). */
#define TD_NSECT	32
/*
 * Content per zstd frame of a metadata section.  A section is one block,
 * but a zstd block may be a run of independent frames (ZSTD_decompressDCtx,
 * which trace-cmd and tdread use, reads them all), so a section needs no
 * compression state between writes, only this much input: kallsyms comes
 * out 0.6% bigger than as one frame (16 KiB frames: 4%).
 */
#define TD_SEC_FRAME	(64 * 1024)

struct td_spools;

/* A trace.dat file being written: see the invariants above. */
struct td_file {
	char			*path;
	char			*part;
	int			 fd;
	uint64_t		 off;		/* end of what was written */
	struct td_file_params	 p;
	struct td_codec		*codec;		/* blocks; maybe p.codec_ctx */
	struct td_codec		*stream;	/* zlib: the open section */
	bool			 compress;
	uint64_t		 opts_ptr_off;	/* where the options offset goes */

	int			 sec_id;	/* section being written, -1 */
	uint64_t		 sec_hdr;
	uint64_t		 sec_len;
	struct td_buf		 sec_in;	/* zstd: a frame's content */
	struct td_buf		 sec_out;	/* zlib: compressed output */
	uint64_t		 sec_off[TD_NSECT];
	int			 v6_next;

	struct td_buf		 options;
	uint64_t		 opts_synced;	/* options in the side file */
	char			*opts_path;	/* PATH.opts.part */
	struct td_buf		 strings;
	struct td_spools	*spools;
	bool			 done;
};

/*
 * A writer for path with p checked and copied, its codec and spools made,
 * nothing opened; NULL with errno set (EINVAL for bad parameters).
 */
struct td_file	*td_file_alloc(const char *path,
		    const struct td_file_params *p);
/*
 * td_file_release() for the writer's own files.  A call from one object
 * file to another is what ld's --wrap intercepts (fuzz-session wraps
 * td_file_release and td_file_free): the restore's clean-up must not look
 * like a caller's.
 */
void		 td_file_drop(struct td_file *f);
/* Whether id is a metadata section a caller may write (16..21). */
bool		 td_file_meta_id(unsigned int id);
/* The nth (from 0) metadata section in a version 6 file's fixed order. */
enum td_opt	 td_file_v6_section(int n);

#endif
