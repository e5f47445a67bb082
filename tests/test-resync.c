/*
 * test-resync.c: the resynchronisation preamble of a byte pipe: the pure
 * scanners (proto/resync.c) and the listener's scan of a real socket
 * (listener/edge/preamble.c, over a socket pair and a libevent loop).
 *
 * The scanners are fed the way their callers feed them, in pieces of
 * every size from 1 byte to more than a preamble, and must find the same
 * thing whatever the pieces: where the session starts, how many bytes
 * were discarded, how many preambles were answered and copies skipped.
 * The socket scan must answer each preamble with its own 32 bytes and
 * leave the session's first byte in the socket, unread.  The watch of a
 * running TLS session's raw bytes (preamble_watch()) must see a new
 * preamble, however the reads cut it, and nothing else.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "log.h"
#include "preamble.h"
#include "resync.h"
#include "tdlimits.h"

/* A ClientHello's first bytes, and a plain HELLO frame header's. */
static const uint8_t tls_start[] = { 0x16, 0x03, 0x01, 0x00, 0x05, 'h', 'e',
    'l', 'l', 'o' };
static const uint8_t hello_start[] = { 0x00, 0x00, 0x00, 0x40, 0x00, 0x01 };

static void
nonce_of(uint8_t nonce[TD_RESYNC_NONCE_LEN], uint8_t v)
{
	memset(nonce, v, TD_RESYNC_NONCE_LEN);
	nonce[0] ^= 0x5a;
}

/* Append the preamble of nonce v to buf at *len. */
static void
add_preamble(uint8_t *buf, size_t *len, uint8_t v)
{
	uint8_t nonce[TD_RESYNC_NONCE_LEN];

	nonce_of(nonce, v);
	td_resync_pack(buf + *len, nonce);
	*len += TD_RESYNC_LEN;
}

static void
add(uint8_t *buf, size_t *len, const void *p, size_t n)
{
	memcpy(buf + *len, p, n);
	*len += n;
}

/* Append a string literal, without its NUL. */
#define ADD_LIT(buf, len, lit)	add(buf, len, lit, sizeof lit - 1)

/* What a feed of a stream found. */
struct seen {
	size_t		start;		/* the session's first byte */
	bool		done;
	int		echoes;
	uint8_t		echoed[4][TD_RESYNC_NONCE_LEN];
	struct td_resync rs;
};

/*
 * Feed stream[0..len) to td_resync_scan() in pieces of piece bytes, the
 * way preamble.c does: what MORE leaves unconsumed is carried over.
 */
static void
feed(const uint8_t *stream, size_t len, size_t piece, bool optional,
    struct seen *s)
{
	uint8_t buf[8192];
	size_t have = 0, pos = 0, used, n;	/* buf holds stream[pos..) */
	enum td_resync_step step;

	memset(s, 0, sizeof *s);
	s->rs.optional = optional;
	for (;;) {
		n = len - pos - have < piece ? len - pos - have : piece;
		if (n == 0)
			return;		/* stream over, not done */
		memcpy(buf + have, stream + pos + have, n);
		have += n;
		for (;;) {
			step = td_resync_scan(&s->rs, buf, have, &used);
			assert_true(used <= have);
			memmove(buf, buf + used, have - used);
			have -= used;
			pos += used;
			if (step == TD_RESYNC_DONE) {
				s->done = true;
				s->start = pos;
				return;
			}
			if (step == TD_RESYNC_MORE) {
				assert_true(have < TD_RESYNC_LEN);
				break;
			}
			assert_true(s->echoes < 4);
			memcpy(s->echoed[s->echoes++], s->rs.nonce,
			    TD_RESYNC_NONCE_LEN);
		}
	}
}

static void
test_pack(void **state)
{
	uint8_t nonce[TD_RESYNC_NONCE_LEN], out[TD_RESYNC_LEN];

	nonce_of(nonce, 7);
	td_resync_pack(out, nonce);
	assert_memory_equal(out, td_resync_magic, TD_RESYNC_MAGIC_LEN);
	assert_memory_equal(out + TD_RESYNC_MAGIC_LEN, nonce,
	    TD_RESYNC_NONCE_LEN);
	/* the magic starts no TLS record and no frame */
	assert_true(td_resync_magic[0] < 20 || td_resync_magic[0] > 23);
	assert_true(td_resync_magic[0] != 0);
}

/* Stale bytes (with the magic's first bytes among them), then a preamble. */
static void
test_stale_then_preamble(void **state)
{
	uint8_t s[512], nonce[TD_RESYNC_NONCE_LEN];
	size_t len = 0, piece, stale;
	struct seen r;

	ADD_LIT(s, &len, "\x17\x03\x03\x00\x40 old session");
	add(s, &len, td_resync_magic, 5);	/* a false start */
	ADD_LIT(s, &len, "xyz");
	add(s, &len, td_resync_magic, TD_RESYNC_MAGIC_LEN - 1);
	add(s, &len, "q", 1);		/* another false start */
	stale = len;
	add_preamble(s, &len, 1);
	add(s, &len, tls_start, sizeof tls_start);
	nonce_of(nonce, 1);
	for (piece = 1; piece <= 2 * TD_RESYNC_LEN + 1; piece++) {
		feed(s, len, piece, false, &r);
		assert_true(r.done);
		assert_int_equal(r.start, stale + TD_RESYNC_LEN);
		assert_int_equal(r.echoes, 1);
		assert_memory_equal(r.echoed[0], nonce, TD_RESYNC_NONCE_LEN);
		assert_int_equal(r.rs.discarded, stale);
		assert_int_equal(r.rs.repeats, 0);
		assert_int_equal(r.rs.preambles, 1);
	}
}

/* No stale byte: the preamble, copies of it, a retry, HELLO (plain). */
static void
test_repeats_and_retry(void **state)
{
	uint8_t s[512], n1[TD_RESYNC_NONCE_LEN], n2[TD_RESYNC_NONCE_LEN];
	size_t len = 0, piece;
	struct seen r;

	add_preamble(s, &len, 1);
	add_preamble(s, &len, 1);
	add_preamble(s, &len, 1);
	add_preamble(s, &len, 2);
	add_preamble(s, &len, 2);
	add(s, &len, hello_start, sizeof hello_start);
	nonce_of(n1, 1);
	nonce_of(n2, 2);
	for (piece = 1; piece <= 3 * TD_RESYNC_LEN; piece++) {
		feed(s, len, piece, false, &r);
		assert_true(r.done);
		assert_int_equal(r.start, 5 * TD_RESYNC_LEN);
		assert_int_equal(r.echoes, 2);
		assert_memory_equal(r.echoed[0], n1, TD_RESYNC_NONCE_LEN);
		assert_memory_equal(r.echoed[1], n2, TD_RESYNC_NONCE_LEN);
		assert_int_equal(r.rs.discarded, 0);
		assert_int_equal(r.rs.repeats, 3);
		assert_int_equal(r.rs.preambles, 2);
	}
}

/* Where it is optional: a session without one, or one with it. */
static void
test_optional(void **state)
{
	uint8_t s[512];
	size_t len = 0;
	struct seen r;

	add(s, &len, tls_start, sizeof tls_start);
	feed(s, len, 1, true, &r);
	assert_true(r.done);
	assert_int_equal(r.start, 0);
	assert_int_equal(r.echoes, 0);
	feed(s, len, 1, false, &r);	/* required: all of it discarded */
	assert_false(r.done);
	assert_int_equal(r.rs.discarded, sizeof tls_start);
	len = 0;
	add(s, &len, hello_start, sizeof hello_start);
	feed(s, len, 3, true, &r);
	assert_true(r.done && r.start == 0);
	len = 0;
	add_preamble(s, &len, 9);
	add(s, &len, tls_start, sizeof tls_start);
	feed(s, len, 7, true, &r);
	assert_true(r.done);
	assert_int_equal(r.start, TD_RESYNC_LEN);
	assert_int_equal(r.echoes, 1);
	/* optional, but garbage first: not the magic's byte, a session */
	len = 0;
	add(s, &len, "G", 1);
	add_preamble(s, &len, 9);
	feed(s, len, 64, true, &r);
	assert_true(r.done && r.start == 0 && r.echoes == 0);
}

/* The magic's first bytes then something else, after a preamble. */
static void
test_broken_after(void **state)
{
	uint8_t s[512];
	size_t len = 0;
	struct seen r;

	add_preamble(s, &len, 3);
	add(s, &len, td_resync_magic, 6);
	add(s, &len, "!", 1);
	feed(s, len, 100, false, &r);
	assert_true(r.done);
	assert_int_equal(r.start, TD_RESYNC_LEN);	/* TLS will refuse it */
	/* a stream that stops in a copy: more is wanted */
	len = 0;
	add_preamble(s, &len, 3);
	add(s, &len, td_resync_magic, 6);
	feed(s, len, 100, false, &r);
	assert_false(r.done);
	assert_int_equal(r.echoes, 1);
}

/* The agent's scan for its answer. */
static void
test_find_echo(void **state)
{
	uint8_t s[512], mine[TD_RESYNC_NONCE_LEN];
	size_t len = 0, used, stale, piece, have, pos;
	uint8_t buf[512];
	bool found;

	ADD_LIT(s, &len, "\x17\x03\x03\x00\x10 ACK of the old session");
	add_preamble(s, &len, 4);	/* the answer to an older attempt */
	add(s, &len, td_resync_magic, 10);
	stale = len;
	add_preamble(s, &len, 5);
	nonce_of(mine, 5);
	for (piece = 1; piece <= 40; piece++) {
		have = pos = 0;
		found = false;
		while (!found && pos + have < len) {
			size_t n = len - pos - have < piece ?
			    len - pos - have : piece;

			memcpy(buf + have, s + pos + have, n);
			have += n;
			found = td_resync_find_echo(mine, buf, have, &used);
			if (!found) {
				assert_true(have - used < TD_RESYNC_LEN);
				memmove(buf, buf + used, have - used);
				have -= used;
				pos += used;
			}
		}
		assert_true(found);
		assert_int_equal(pos + used, len);
		assert_int_equal(pos + used - TD_RESYNC_LEN, stale);
	}
	/* another nonce's answer alone is not ours */
	len = 0;
	add_preamble(s, &len, 4);
	assert_false(td_resync_find_echo(mine, s, len, &used));
	assert_int_equal(used, len);
}

/* The listener's scan of a socket. */
struct sock_run {
	struct event_base	*base;
	struct preamble		*p;
	bool			 over;
	bool			 ok;
	char			 why[256];
	char			 what[256];
};

static void
done_cb(void *arg, bool ok, const char *why)
{
	struct sock_run *r = arg;

	r->over = true;
	r->ok = ok;
	snprintf(r->why, sizeof r->why, "%s", why != NULL ? why : "");
	preamble_describe(r->p, r->what, sizeof r->what);
	preamble_free(r->p);
	r->p = NULL;
	event_base_loopbreak(r->base);
}

/* Write the pieces to sv[1], one loop turn each, until the scan ends. */
static void
sock_run(struct sock_run *r, int sv[2], bool required,
    const uint8_t *const *pieces, const size_t *lens, int npieces)
{
	int i;

	memset(r, 0, sizeof *r);
	r->base = event_base_new();
	r->p = preamble_new(r->base, sv[0], required, done_cb, r);
	for (i = 0; i < npieces && !r->over; i++) {
		assert_int_equal(write(sv[1], pieces[i], lens[i]),
		    (ssize_t)lens[i]);
		event_base_loop(r->base, EVLOOP_NONBLOCK);
		event_base_loop(r->base, EVLOOP_NONBLOCK);
	}
	preamble_free(r->p);
	event_base_free(r->base);
}

static void
test_socket(void **state)
{
	uint8_t pre[TD_RESYNC_LEN], copy[TD_RESYNC_LEN], got[64];
	uint8_t nonce[TD_RESYNC_NONCE_LEN];
	const uint8_t *pieces[5];
	size_t lens[5];
	struct sock_run r;
	int sv[2];

	nonce_of(nonce, 6);
	td_resync_pack(pre, nonce);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	/* stale bytes, the preamble cut in two, then a copy and TLS at
	   once: answered once, the ClientHello left in the socket */
	memcpy(copy, pre, sizeof pre);
	pieces[0] = (const uint8_t *)"stale bytes";
	lens[0] = 11;
	pieces[1] = pre;
	lens[1] = 20;
	pieces[2] = pre + 20;
	lens[2] = TD_RESYNC_LEN - 20;
	pieces[3] = copy;
	lens[3] = sizeof copy;
	pieces[4] = tls_start;
	lens[4] = sizeof tls_start;
	sock_run(&r, sv, true, pieces, lens, 5);
	assert_true(r.over);
	assert_true(r.ok);
	assert_non_null(strstr(r.what, "11 bytes discarded"));
	assert_non_null(strstr(r.what, "1 preamble answered, 1 copy"));
	assert_int_equal(read(sv[1], got, sizeof got), TD_RESYNC_LEN);
	assert_memory_equal(got, pre, TD_RESYNC_LEN);
	assert_int_equal(read(sv[0], got, sizeof got),
	    (ssize_t)sizeof tls_start);
	assert_memory_equal(got, tls_start, sizeof tls_start);
	assert_int_equal(read(sv[1], got, sizeof got), -1);	/* no more */
	/* optional: a session's first byte, nothing answered or read */
	pieces[0] = tls_start;
	lens[0] = sizeof tls_start;
	sock_run(&r, sv, false, pieces, lens, 1);
	assert_true(r.over && r.ok);
	assert_int_equal(read(sv[0], got, sizeof got),
	    (ssize_t)sizeof tls_start);
	assert_int_equal(read(sv[1], got, sizeof got), -1);
	/* required, and the peer goes before a preamble */
	pieces[0] = (const uint8_t *)"junk";
	lens[0] = 4;
	pieces[1] = td_resync_magic;
	lens[1] = 7;
	sock_run(&r, sv, true, pieces, lens, 2);
	assert_false(r.over);
	close(sv[1]);
	memset(&r, 0, sizeof r);
	r.base = event_base_new();
	r.p = preamble_new(r.base, sv[0], true, done_cb, &r);
	event_base_loop(r.base, EVLOOP_NONBLOCK);
	assert_true(r.over);
	assert_false(r.ok);
	assert_non_null(strstr(r.why, "connection closed"));
	assert_non_null(strstr(r.what, "no resynchronisation preamble"));
	event_base_free(r.base);
	close(sv[0]);
}

/* Read what waits on the BIO chain of ssl (as OpenSSL's record layer would). */
static void
drain(SSL *ssl)
{
	char buf[7];
	size_t got;

	/* small reads: the magic is cut between them */
	while (BIO_read_ex(SSL_get_rbio(ssl), buf, sizeof buf, &got) == 1)
		;
}

/* The watch of a TLS session's raw bytes. */
static void
test_watch(void **state)
{
	uint8_t nonce[TD_RESYNC_NONCE_LEN], pre[TD_RESYNC_LEN], junk[300];
	SSL_CTX *ctx;
	SSL *ssl;
	int sv[2], i;

	ctx = SSL_CTX_new(TLS_server_method());
	assert_non_null(ctx);
	for (i = 0; i < (int)sizeof junk; i++)
		junk[i] = (uint8_t)(i * 7 + 1);
	nonce_of(nonce, 8);
	td_resync_pack(pre, nonce);

	/* ciphertext-like bytes, the magic's first byte among them: no */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	ssl = SSL_new(ctx);
	assert_int_equal(preamble_watch(ssl, sv[0]), 0);
	assert_int_equal(SSL_get_fd(ssl), sv[0]);
	junk[100] = td_resync_magic[0];
	assert_int_equal(write(sv[1], junk, sizeof junk), sizeof junk);
	assert_int_equal(write(sv[1], td_resync_magic, 15), 15);
	drain(ssl);
	assert_false(preamble_seen(ssl));
	/* a whole preamble, cut by the reads: yes */
	assert_int_equal(write(sv[1], pre, sizeof pre), sizeof pre);
	drain(ssl);
	assert_true(preamble_seen(ssl));
	SSL_free(ssl);
	close(sv[0]);
	close(sv[1]);

	/* the magic cut between two writes and reads of one byte */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	ssl = SSL_new(ctx);
	assert_int_equal(preamble_watch(ssl, sv[0]), 0);
	for (i = 0; i < TD_RESYNC_LEN; i++) {
		char c;
		size_t got;

		assert_int_equal(write(sv[1], pre + i, 1), 1);
		assert_int_equal(BIO_read_ex(SSL_get_rbio(ssl), &c, 1, &got),
		    1);
		assert_int_equal(preamble_seen(ssl),
		    i >= TD_RESYNC_MAGIC_LEN - 1);
	}
	SSL_free(ssl);
	close(sv[0]);
	close(sv[1]);

	/* a record's header read (5 bytes: TLS fails there), the rest
	   still in the socket */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	ssl = SSL_new(ctx);
	assert_int_equal(preamble_watch(ssl, sv[0]), 0);
	assert_int_equal(write(sv[1], junk, 40), 40);
	assert_int_equal(write(sv[1], pre, sizeof pre), sizeof pre);
	{
		char h[45];
		size_t got;

		assert_int_equal(BIO_read_ex(SSL_get_rbio(ssl), h, sizeof h,
		    &got), 1);
		assert_int_equal(got, sizeof h);
	}
	assert_true(preamble_seen(ssl));
	SSL_free(ssl);
	close(sv[0]);
	close(sv[1]);
	/* a session without the watch: never */
	ssl = SSL_new(ctx);
	assert_false(preamble_seen(ssl));
	SSL_free(ssl);
	SSL_CTX_free(ctx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pack),
		cmocka_unit_test(test_stale_then_preamble),
		cmocka_unit_test(test_repeats_and_retry),
		cmocka_unit_test(test_optional),
		cmocka_unit_test(test_broken_after),
		cmocka_unit_test(test_find_echo),
		cmocka_unit_test(test_socket),
		cmocka_unit_test(test_watch),
	};

	log_init("test-resync", -1, 0);
	return cmocka_run_group_tests_name("resync", tests, NULL, NULL);
}
