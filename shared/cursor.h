/*
 * cursor.h: bounds-checked reading of bytes a peer or a disk handed us, the
 * reading side of buf.h.
 *
 * A cursor walks a byte range.  A read past its end takes nothing, returns
 * 0 (or NULL) and marks the cursor bad; every later read fails too, so a
 * decoder reads all its fields and checks once, at the end
 * (td_cur_end(): nothing bad and, where the whole range must be used,
 * nothing left).  The struct is public so cursors live on the stack; touch
 * its fields only through these functions.  Pure memory work: no I/O, no
 * allocation, any thread.
 */
#ifndef TD_CURSOR_H
#define TD_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_cur {
	const uint8_t	*p;
	size_t		 left;
	bool		 bad;
};

void		 td_cur_init(struct td_cur *c, const void *p, size_t len);
/* The next n bytes (NULL, and the cursor bad, when fewer are left). */
const void	*td_cur_take(struct td_cur *c, size_t n);
uint8_t		 td_cur_u8(struct td_cur *c);
/* Big-endian (the wire protocol's order). */
uint16_t	 td_cur_be16(struct td_cur *c);
uint32_t	 td_cur_be32(struct td_cur *c);
uint64_t	 td_cur_be64(struct td_cur *c);
/* Host order (checkpoints, trace.dat: written by this machine). */
uint32_t	 td_cur_u32(struct td_cur *c);
uint64_t	 td_cur_u64(struct td_cur *c);
/* Mark the cursor bad (a decoder's own check failed). */
void		 td_cur_fail(struct td_cur *c);
bool		 td_cur_bad(const struct td_cur *c);
size_t		 td_cur_left(const struct td_cur *c);
/* 0 when nothing was read out of bounds and nothing is left, else -1. */
int		 td_cur_end(const struct td_cur *c);

#endif
