/*
 * buf.h: growable byte buffers with a hard cap, in the shape of git's strbuf
 * and curl's dynbuf.
 *
 * The struct is public so buffers can live on the stack or inside other
 * structs; touch len and data only through these functions or read-only.
 * Every buffer has a maximum size fixed at td_buf_init(); an append that
 * would pass it fails with ENOBUFS and leaves the buffer unchanged, so data
 * sized by a peer can never grow memory without bound.  Integers are
 * appended in host byte order (trace.dat is written in the recorder's order).
 */
#ifndef TD_BUF_H
#define TD_BUF_H

#include <stddef.h>
#include <stdint.h>

struct td_buf {
	uint8_t	*data;
	size_t	 len;
	size_t	 cap;
	size_t	 max;
};

void	td_buf_init(struct td_buf *b, size_t max);
void	td_buf_free(struct td_buf *b);
void	td_buf_reset(struct td_buf *b);
/*
 * Append n bytes.  Bytes already written in place at td_buf_room()'s
 * pointer (p is the buffer's end) are taken without a copy.
 */
int	td_buf_add(struct td_buf *b, const void *p, size_t n);
/*
 * Room for n more bytes at the buffer's end, which the caller may fill and
 * then append in place with td_buf_add(); valid until the next call that
 * changes the buffer.  NULL with ENOBUFS past the cap.
 */
void	*td_buf_room(struct td_buf *b, size_t n);
int	td_buf_add_zero(struct td_buf *b, size_t n);
int	td_buf_add_u16(struct td_buf *b, uint16_t v);
int	td_buf_add_u32(struct td_buf *b, uint32_t v);
int	td_buf_add_u64(struct td_buf *b, uint64_t v);
/* Append s including its terminating NUL. */
int	td_buf_add_str(struct td_buf *b, const char *s);
int	td_buf_printf(struct td_buf *b, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Read a whole file into b (appending); -1 with errno on error or cap. */
int	td_buf_read_file(struct td_buf *b, const char *path);

#endif
