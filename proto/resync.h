/*
 * resync.h: the resynchronisation preamble of a byte pipe, as pure code.
 *
 * A virtio-serial port outlives the agent and the listener's connection
 * from QEMU: what one side wrote and the other never read (the tail of an
 * old TLS session, a guest that rebooted mid-recording, the ACKs of a
 * listener that was killed) may still be in the pipe when a new session
 * starts.  Before its TLS handshake (or its HELLO with --insecure) the
 * agent writes a preamble, TD_RESYNC_MAGIC followed by a fresh random
 * nonce; the listener discards bytes until it finds one and answers with
 * the same 32 bytes; the agent discards bytes until it sees its own
 * nonce come back.  Only then does the session start, on both sides right
 * after the preamble.  docs/tdproto.md, "Resynchronisation", has the bytes
 * and the cases.
 *
 * The scanners look at the front of a stream and say how many bytes to
 * consume; they keep no pointer into it, never log, never allocate.
 */
#ifndef TD_RESYNC_H
#define TD_RESYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TD_RESYNC_MAGIC_LEN	16
#define TD_RESYNC_NONCE_LEN	16
#define TD_RESYNC_LEN		(TD_RESYNC_MAGIC_LEN + TD_RESYNC_NONCE_LEN)

/*
 * The magic.  Its first byte can start neither a TLS record (20..23) nor
 * a frame (a length's high byte: 0 for every frame tdproto allows), so
 * a listener where the preamble is optional (TCP, vsock) tells it from a
 * session's first byte.
 */
extern const uint8_t	td_resync_magic[TD_RESYNC_MAGIC_LEN];

/* The preamble of nonce: the magic, then the nonce. */
void	td_resync_pack(uint8_t out[TD_RESYNC_LEN],
	    const uint8_t nonce[TD_RESYNC_NONCE_LEN]);

/* The listener's scan of one connection's first bytes. */
struct td_resync {
	bool		 optional;	/* a first byte that is not the
					   magic's starts the session */
	bool		 seen;		/* a byte was looked at */
	bool		 found;		/* a preamble was found */
	uint8_t		 nonce[TD_RESYNC_NONCE_LEN];	/* its nonce */
	uint64_t	 discarded;	/* bytes that were no preamble */
	uint64_t	 repeats;	/* copies of a preamble skipped */
	uint32_t	 preambles;	/* preambles of a new nonce */
};

enum td_resync_step {
	TD_RESYNC_MORE,		/* consume *used, then look at more bytes */
	TD_RESYNC_ECHO,		/* consume *used; answer the preamble of
				   r->nonce, then look again */
	TD_RESYNC_DONE,		/* consume *used: the session starts at
				   the next byte */
};

/*
 * Look at the len bytes at the front of a connection's stream (what was
 * not consumed yet).  Before a preamble, bytes that cannot start one are
 * discarded (counted); a preamble is answered (ECHO).  After it, copies
 * of the same preamble are skipped, one of another nonce (an agent that
 * tried again) is answered too, and the first byte that cannot start the
 * magic starts the session (DONE).  MORE with bytes left unconsumed: they
 * may start a preamble (fewer than TD_RESYNC_LEN), the caller keeps them.
 */
enum td_resync_step	td_resync_scan(struct td_resync *r, const uint8_t *p,
			    size_t len, size_t *used);

/*
 * The agent's scan for the answer to its preamble (nonce) in p: true
 * with *used just past it; false with *used the bytes that cannot start
 * it (to discard; the rest, fewer than TD_RESYNC_LEN, may).
 */
bool	td_resync_find_echo(const uint8_t nonce[TD_RESYNC_NONCE_LEN],
	    const uint8_t *p, size_t len, size_t *used);

#endif
