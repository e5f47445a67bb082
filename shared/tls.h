/*
 * tls.h: the TLS set-up both programs share (OpenSSL 3.0), mutual
 * authentication against a private CA.
 *
 * Contexts speak TLS 1.3 only and trust exactly the CA file they are given,
 * never the system's CAs: tdlisten accepts only agents holding a certificate
 * of that CA (and not revoked when a CRL is given), tdagent accepts only a
 * listener whose certificate matches the host name or address it dialed
 * (td_tls_client_prepare() on each new SSL).  Certificates, keys and CRLs
 * are read once, when the context is built; a changed CRL needs a new
 * context (td_tls_server_reload() builds one without reading the key again
 * when it cannot be read).
 *
 * With TLS 1.3 the client finishes its handshake before the server has
 * checked the client's certificate, so an agent learns that it was refused
 * only on its first read (the alert), never from SSL_connect().
 *
 * Nothing here logs or exits: constructors return NULL and actions -1 with a
 * message in the caller's err buffer ("cannot read key 'a.key': ...").
 * Contexts may be shared by threads once built; an SSL belongs to one.
 */
#ifndef TD_TLS_H
#define TD_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

/*
 * Server context: cert (a PEM chain, leaf first) and its key, clients must
 * present a certificate issued by ca; crl (PEM, may be NULL) revokes some.
 */
SSL_CTX		*td_tls_server_ctx(const char *cert, const char *key,
		    const char *ca, const char *crl, char *err, size_t errlen);
/*
 * A server context for a reload (SIGHUP): ca and crl are read again and
 * must be good; cert and key too when they can be read and match, else
 * the certificate chain and key that old holds are used (*kept is set and
 * err says why the files were not used).  NULL: keep old (err says why).
 */
SSL_CTX		*td_tls_server_reload(SSL_CTX *old, const char *cert,
		    const char *key, const char *ca, const char *crl,
		    bool *kept, char *err, size_t errlen);
/* Client context: our certificate and key, the server must chain to ca. */
SSL_CTX		*td_tls_client_ctx(const char *cert, const char *key,
		    const char *ca, char *err, size_t errlen);
/*
 * Make a client SSL check that the server is host (a DNS name, sent as SNI,
 * or an IPv4/IPv6 literal, "[::1]" accepted); call before the handshake.
 */
int		 td_tls_client_prepare(SSL *ssl, const char *host, char *err,
		    size_t errlen);
/*
 * The verified peer's name (first DNS subjectAltName, else the subject's
 * commonName) escaped as a directory name, see td_tls_escape(); out
 * needs TD_MAX_IDENTITY_LEN + 1 bytes.  -1 without a verified certificate
 * or with a name too long.
 */
int		 td_tls_peer_identity(SSL *ssl, char *out, size_t outlen);
/*
 * Copy len bytes of name into out as a directory name, one-to-one: bytes
 * of [A-Za-z0-9_], and '.' and '-' past the first, are kept; any other
 * byte, '%' included, becomes "%XX" (upper-case hex), so two names never
 * give one result.  -1 if name is empty, longer than TD_MAX_IDENTITY_LEN,
 * or its escaped form is (or does not fit out).
 */
int		 td_tls_escape(const void *name, size_t len, char *out,
		    size_t outlen);
/*
 * "what: reason" for the first error queued by OpenSSL in this thread, then
 * clear the queue.
 */
void		 td_tls_error(char *err, size_t errlen, const char *what);
/*
 * Like td_tls_error() after a failed handshake, but names the certificate
 * check that failed ("what: certificate verify failed: certificate has
 * expired") when verification of the peer was the cause.
 */
void		 td_tls_handshake_error(SSL *ssl, char *err, size_t errlen,
		    const char *what);
/*
 * Whether ctx's own certificate (read from cert, named in err) is valid
 * now: 0, or -1 with err saying when it expired or from when it is valid.
 * A peer refuses such a certificate with an alert that says little; the
 * agent checks before it connects (a test program may want to send one).
 */
int		 td_tls_check_dates(SSL_CTX *ctx, const char *cert, char *err,
		    size_t errlen);
/*
 * What a failed handshake's cause means and what fixes it, from this
 * side's view of ssl (whose certificate, which date; "the listener does
 * not speak TLS: --insecure (on both sides), or is that the HTTP port?"):
 * the failed certificate check of the peer, else OpenSSL error e (an
 * alert of the peer, bytes that are no TLS); "" when nothing is known.
 */
void		 td_tls_explain(SSL *ssl, unsigned long e, char *out,
		    size_t len);
/* Version string of the OpenSSL library in use. */
const char	*td_tls_version(void);

#endif
