/*
 * preamble.h: the resynchronisation preamble on tdlisten's side of a
 * connection (proto/resync.h), before its TLS handshake or its HELLO.
 *
 * On a Unix socket (QEMU's chardev: a guest's virtio-serial port) the
 * preamble is required: bytes are discarded until one is found, each
 * preamble of a new nonce is answered, copies are skipped.  Over TCP and
 * vsock it is optional: a first byte that is not the magic's starts the
 * session at once (an agent over TCP writes none; a serial port carried
 * to the TCP port does).  Bytes are peeked at and consumed only when they
 * belong to the preamble or before it, so the session's first byte is
 * still in the socket when the done callback runs.  Nothing here owns the
 * descriptor.  Loop thread only.
 */
#ifndef TD_PREAMBLE_H
#define TD_PREAMBLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

struct event_base;
struct preamble;

/*
 * The scan is over: ok, or not with why (the connection must go).  The
 * callback may free p (and must, sooner or later).
 */
typedef void	(*preamble_done_cb)(void *arg, bool ok, const char *why);

/*
 * Scan fd's first bytes (required: no session without a preamble); out
 * of memory is fatal.
 */
struct preamble	*preamble_new(struct event_base *base, int fd, bool required,
		    preamble_done_cb done, void *arg);
/* Stop scanning and free; NULL is fine. */
void		 preamble_free(struct preamble *p);
/*
 * What the scan did, for a log line: "a preamble after 120 bytes
 * discarded (2 copies skipped)", "no preamble (TCP)".
 */
void		 preamble_describe(const struct preamble *p, char *buf,
		    size_t len);
/* Whether a preamble was found (and answered). */
bool		 preamble_found(const struct preamble *p);
/*
 * Once the session runs: give ssl a BIO on fd that watches the raw bytes
 * for the magic, so that a TLS error can say it was a new session's
 * preamble (the agent started over: a guest rebooted).  -1 when OpenSSL
 * cannot make it (the session goes on unwatched).
 */
int		 preamble_watch(SSL *ssl, int fd);
/*
 * Whether the raw bytes of a watched ssl held the magic, read or still
 * waiting in the socket (peeked at: call it once the session failed).
 */
bool		 preamble_seen(SSL *ssl);

#endif
