/*
 * msgpack.h: the pieces of proto/msg.c that the other tdproto message
 * files (standbymsg.c, flightmsg.c) build their frames with: big-endian numbers, strings
 * (a be16 length and printable ASCII bytes, shorter than a cap), a frame
 * whose length is filled in at its end, and cursors over a payload that
 * end in EBADMSG.  Internal to proto/.
 */
#ifndef TD_MSGPACK_H
#define TD_MSGPACK_H

#include <stddef.h>
#include <stdint.h>

struct td_buf;
struct td_cur;
struct td_frame;

int	td_msg_put_u16(struct td_buf *b, uint16_t v);
int	td_msg_put_u32(struct td_buf *b, uint32_t v);
/* At most cap - 1 printable bytes: -1 (ENAMETOOLONG, EINVAL) otherwise. */
int	td_msg_put_str(struct td_buf *b, const char *s, size_t cap);
/* A frame begun at b's end; td_msg_end() writes its header (type) or, on
   ok == -1 or a length over the type's cap, takes it back and fails. */
size_t	td_msg_begin(struct td_buf *b);
int	td_msg_end(struct td_buf *b, size_t at, uint16_t type, int ok);
/* A cursor over f's payload, failed at once when f is not of type. */
void	td_msg_cur_init(struct td_cur *c, const struct td_frame *f,
	    uint16_t type);
/* 0 when every byte was used and nothing was out of bounds; -1 EBADMSG. */
int	td_msg_cur_end(const struct td_cur *c);
/* A string into out[cap]; the cursor fails unless printable and < cap. */
void	td_msg_cur_str(struct td_cur *c, char *out, size_t cap);
/*
 * A reply to request req (ANSWER, ARMED: the same layout): what, and text
 * of at most TD_MAX_ERROR_LEN bytes made printable (each other byte as
 * bad: the peer logs it).  Unpacked, what must lie in [lo, hi] and text
 * holds TD_MAX_ERROR_LEN + 1 bytes.
 */
int	td_msg_pack_reply(struct td_buf *b, uint16_t type, uint32_t req,
	    uint16_t what, const char *text, char bad);
int	td_msg_unpack_reply(const struct td_frame *f, uint16_t type,
	    uint32_t *req, uint16_t *what, char *text, uint16_t lo,
	    uint16_t hi);

#endif
