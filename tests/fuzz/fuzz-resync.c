/*
 * fuzz-resync.c: libFuzzer target for the resynchronisation preamble's
 * scanners (proto/resync.c), which read whatever a byte pipe holds before
 * a session: the listener's td_resync_scan() (tdlisten on a Unix socket,
 * and on TCP and vsock where the preamble is optional) and the agent's
 * td_resync_find_echo().
 *
 * The input's first byte chooses the piece size (1 + b % 64) and whether
 * the preamble is optional (b & 64); the rest is the stream.  It is fed
 * whole, then in pieces, the way listener/edge/preamble.c feeds it (what MORE
 * leaves unconsumed is carried over); each piece is a heap block of
 * exactly its size.  Besides "no crash, no leak, no undefined behaviour":
 *
 *   - used never passes the bytes given; MORE leaves fewer than 32;
 *   - whole or in pieces, the same outcome: done or not, where the session
 *     starts, bytes discarded, copies skipped, the nonces answered;
 *   - the bytes add up: discarded + 32 x (preambles + copies) = the
 *     session's start (all that was consumed, when not done);
 *   - every nonce answered is the one that follows a magic at that place
 *     of the stream; where the preamble is optional, a first byte other
 *     than the magic's starts the session at 0 with nothing answered;
 *   - the agent's scan, for the nonce of the first preamble answered (or
 *     the stream's first 16 bytes), finds its answer at the same place
 *     whole and in pieces, and that place holds exactly the preamble.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resync.h"
#include "fuzz.h"

#define MAX_ECHOES	64

/* What a feed found. */
struct outcome {
	bool		 done;
	size_t		 start;		/* consumed before the session */
	struct td_resync rs;
	size_t		 nechoes;
	uint8_t		 echoes[MAX_ECHOES][TD_RESYNC_NONCE_LEN];
	size_t		 echo_at[MAX_ECHOES];	/* where each preamble ended */
};

/* Feed s[0..len) to td_resync_scan() in pieces of piece bytes. */
static void
feed(const uint8_t *s, size_t len, size_t piece, bool optional,
    struct outcome *o)
{
	uint8_t carry[TD_RESYNC_LEN], *buf;
	size_t ncarry = 0, pos = 0, n, have, used;	/* pos: consumed */
	enum td_resync_step step;

	memset(o, 0, sizeof *o);
	o->rs.optional = optional;
	while (pos + ncarry < len) {
		n = len - pos - ncarry < piece ? len - pos - ncarry : piece;
		have = ncarry + n;
		buf = malloc(have);
		FUZZ_CHECK(buf != NULL);
		memcpy(buf, carry, ncarry);
		memcpy(buf + ncarry, s + pos + ncarry, n);
		FUZZ_CHECK(memcmp(buf, s + pos, have) == 0);
		for (;;) {
			step = td_resync_scan(&o->rs, buf, have, &used);
			FUZZ_CHECK(used <= have);
			pos += used;
			have -= used;
			memmove(buf, buf + used, have);
			if (step == TD_RESYNC_DONE) {
				o->done = true;
				o->start = pos;
				free(buf);
				return;
			}
			if (step == TD_RESYNC_MORE) {
				FUZZ_CHECK(have < TD_RESYNC_LEN);
				break;
			}
			FUZZ_CHECK(pos >= TD_RESYNC_LEN);
			FUZZ_CHECK(memcmp(s + pos - TD_RESYNC_LEN,
			    td_resync_magic, TD_RESYNC_MAGIC_LEN) == 0);
			FUZZ_CHECK(memcmp(s + pos - TD_RESYNC_NONCE_LEN,
			    o->rs.nonce, TD_RESYNC_NONCE_LEN) == 0);
			if (o->nechoes < MAX_ECHOES) {
				memcpy(o->echoes[o->nechoes], o->rs.nonce,
				    TD_RESYNC_NONCE_LEN);
				o->echo_at[o->nechoes++] = pos;
			}
		}
		memcpy(carry, buf, have);
		ncarry = have;
		free(buf);
	}
	o->start = pos;
}

/* The agent's scan for nonce, in pieces: where its answer ends, or 0. */
static size_t
find(const uint8_t *s, size_t len, size_t piece,
    const uint8_t nonce[TD_RESYNC_NONCE_LEN])
{
	uint8_t *buf;
	size_t pos = 0, ncarry = 0, n, have, used;

	while (pos + ncarry < len) {
		n = len - pos - ncarry < piece ? len - pos - ncarry : piece;
		have = ncarry + n;
		buf = malloc(have);
		FUZZ_CHECK(buf != NULL);
		memcpy(buf, s + pos, have);
		if (td_resync_find_echo(nonce, buf, have, &used)) {
			free(buf);
			FUZZ_CHECK(used >= TD_RESYNC_LEN && used <= have);
			return pos + used;
		}
		FUZZ_CHECK(used <= have && have - used < TD_RESYNC_LEN);
		pos += used;
		ncarry = have - used;
		free(buf);
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct outcome whole, cut;
	uint8_t nonce[TD_RESYNC_NONCE_LEN], pre[TD_RESYNC_LEN];
	size_t piece, len, a, b;
	const uint8_t *s;
	bool optional;

	if (size < 1)
		return 0;
	piece = 1 + data[0] % 64;
	optional = (data[0] & 64) != 0;
	s = data + 1;
	len = size - 1;

	feed(s, len, len > 0 ? len : 1, optional, &whole);
	feed(s, len, piece, optional, &cut);
	FUZZ_CHECK(whole.done == cut.done);
	FUZZ_CHECK(whole.start == cut.start);
	FUZZ_CHECK(whole.rs.discarded == cut.rs.discarded);
	FUZZ_CHECK(whole.rs.repeats == cut.rs.repeats);
	FUZZ_CHECK(whole.rs.preambles == cut.rs.preambles);
	FUZZ_CHECK(whole.nechoes == cut.nechoes);
	FUZZ_CHECK(memcmp(whole.echoes, cut.echoes,
	    whole.nechoes * TD_RESYNC_NONCE_LEN) == 0);
	FUZZ_CHECK(memcmp(whole.echo_at, cut.echo_at,
	    whole.nechoes * sizeof whole.echo_at[0]) == 0);
	FUZZ_CHECK(whole.rs.discarded + TD_RESYNC_LEN *
	    (whole.rs.preambles + whole.rs.repeats) == whole.start);
	FUZZ_CHECK(whole.rs.preambles == 0 || whole.rs.found);
	if (optional && len > 0 && s[0] != td_resync_magic[0])
		FUZZ_CHECK(whole.done && whole.start == 0 &&
		    whole.nechoes == 0);
	if (whole.done && whole.start < len)
		FUZZ_CHECK(!whole.rs.found ||
		    s[whole.start] != td_resync_magic[0] ||
		    len - whole.start < TD_RESYNC_MAGIC_LEN ||
		    memcmp(s + whole.start, td_resync_magic,
		    TD_RESYNC_MAGIC_LEN) != 0);

	if (whole.nechoes > 0)
		memcpy(nonce, whole.echoes[0], sizeof nonce);
	else {
		memset(nonce, 0, sizeof nonce);
		memcpy(nonce, s, len < sizeof nonce ? len : sizeof nonce);
	}
	a = find(s, len, len > 0 ? len : 1, nonce);
	b = find(s, len, piece, nonce);
	FUZZ_CHECK(a == b);
	if (a != 0) {
		td_resync_pack(pre, nonce);
		FUZZ_CHECK(memcmp(s + a - TD_RESYNC_LEN, pre,
		    TD_RESYNC_LEN) == 0);
	}
	if (whole.nechoes > 0)
		FUZZ_CHECK(a != 0 && a <= whole.echo_at[0]);
	return 0;
}
