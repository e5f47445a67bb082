/*
 * resync.c: the resynchronisation preamble's scanners (see resync.h).
 */
#include <string.h>

#include "resync.h"
#include "banned.h"

/* 16 random bytes; the first is neither a TLS record type nor 0 */
const uint8_t td_resync_magic[TD_RESYNC_MAGIC_LEN] = {
	0xc5, 0x7e, 0x1d, 0x93, 0xa4, 0x0b, 0x6f, 0xe2,
	0x58, 0xd1, 0x3c, 0x87, 0xf0, 0x29, 0xb6, 0x4a,
};

/* Fill out with the magic and nonce. */
void
td_resync_pack(uint8_t out[TD_RESYNC_LEN],
    const uint8_t nonce[TD_RESYNC_NONCE_LEN])
{
	memcpy(out, td_resync_magic, TD_RESYNC_MAGIC_LEN);
	memcpy(out + TD_RESYNC_MAGIC_LEN, nonce, TD_RESYNC_NONCE_LEN);
}

/*
 * The first offset of p where pat may start: pat's first bytes, as many
 * of them as p still has; len when there is none.
 */
static size_t
resync_candidate(const uint8_t *p, size_t len, const uint8_t *pat,
    size_t plen)
{
	const uint8_t *q;
	size_t i, n;

	for (i = 0; i < len; i = (size_t)(q - p) + 1) {
		if ((q = memchr(p + i, pat[0], len - i)) == NULL)
			return len;
		n = len - (size_t)(q - p) < plen ? len - (size_t)(q - p) :
		    plen;
		if (memcmp(q, pat, n) == 0)
			return (size_t)(q - p);
	}
	return len;
}

/* Scan a connection's first bytes (resync.h). */
enum td_resync_step
td_resync_scan(struct td_resync *r, const uint8_t *p, size_t len,
    size_t *used)
{
	size_t i, n;

	*used = 0;
	if (len == 0)
		return TD_RESYNC_MORE;
	if (!r->seen && r->optional && p[0] != td_resync_magic[0]) {
		r->seen = true;
		return TD_RESYNC_DONE;	/* no preamble: the session */
	}
	r->seen = true;
	if (!r->found) {
		i = resync_candidate(p, len, td_resync_magic,
		    TD_RESYNC_MAGIC_LEN);
		r->discarded += i;
		*used = i;
		if (len - i < TD_RESYNC_LEN)
			return TD_RESYNC_MORE;
		memcpy(r->nonce, p + i + TD_RESYNC_MAGIC_LEN,
		    TD_RESYNC_NONCE_LEN);
		r->found = true;
		r->preambles++;
		*used = i + TD_RESYNC_LEN;
		return TD_RESYNC_ECHO;
	}
	for (i = 0; i < len; i += TD_RESYNC_LEN) {
		n = len - i < TD_RESYNC_MAGIC_LEN ? len - i :
		    TD_RESYNC_MAGIC_LEN;
		if (memcmp(p + i, td_resync_magic, n) != 0) {
			*used = i;
			return TD_RESYNC_DONE;
		}
		if (len - i < TD_RESYNC_LEN)
			break;
		*used = i + TD_RESYNC_LEN;
		if (memcmp(p + i + TD_RESYNC_MAGIC_LEN, r->nonce,
		    TD_RESYNC_NONCE_LEN) == 0) {
			r->repeats++;
			continue;
		}
		/* the agent tried again, with a new nonce */
		memcpy(r->nonce, p + i + TD_RESYNC_MAGIC_LEN,
		    TD_RESYNC_NONCE_LEN);
		r->preambles++;
		return TD_RESYNC_ECHO;
	}
	*used = i;
	return TD_RESYNC_MORE;
}

/* Look for the answer to the agent's preamble (resync.h). */
bool
td_resync_find_echo(const uint8_t nonce[TD_RESYNC_NONCE_LEN],
    const uint8_t *p, size_t len, size_t *used)
{
	uint8_t want[TD_RESYNC_LEN];
	size_t i;

	td_resync_pack(want, nonce);
	i = resync_candidate(p, len, want, sizeof want);
	if (len - i >= sizeof want) {
		*used = i + sizeof want;
		return true;
	}
	*used = i;
	return false;
}
