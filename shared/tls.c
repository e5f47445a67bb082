/*
 * tls.c: TLS 1.3 contexts with mutual authentication (OpenSSL 3.0).
 *
 * Decisions worth knowing:
 * - Only the given CA file is trusted; the system's CA paths are never
 *   loaded, so a certificate from a public CA cannot pass for an agent.
 * - Session resumption is off on the server (no cache, no tickets): every
 *   connection runs the full certificate check, so a revoked agent cannot
 *   come back on an old session.  Agents connect rarely; the cost is small.
 * - OpenSSL's default purpose checks stay on: a server requires clientAuth
 *   (or no extendedKeyUsage) in a client certificate and the client requires
 *   serverAuth, so a listener's certificate cannot be used as an agent's.
 * - Keys are read with a password callback that refuses: an encrypted key
 *   gives an error instead of a prompt on a daemon's terminal.
 * - The CRL is checked at load time (signed by a CA of the CA file, not
 *   expired) so that a wrong file fails at start rather than making every
 *   handshake fail later.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tdlimits.h"
#include "tls.h"
#include "banned.h"

/* TLS 1.3 suites in the order we prefer them. */
#define TLS_CIPHERSUITES \
	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:" \
	"TLS_CHACHA20_POLY1305_SHA256"

static void	tls_set_verify(SSL_CTX *ctx, int mode);

/* Longest message prefix built before the OpenSSL reason is appended. */
#define TLS_PREFIX_LEN	512

/* Write the reason of OpenSSL error e into buf. */
static void
tls_reason(unsigned long e, char *buf, size_t len)
{
	const char *r;

	if (e == 0) {
		snprintf(buf, len, "unknown error");
		return;
	}
	/* OpenSSL keeps errno values of failed system calls as is. */
	if (ERR_SYSTEM_ERROR(e)) {
		snprintf(buf, len, "%s", strerror(ERR_GET_REASON(e)));
		return;
	}
	r = ERR_reason_error_string(e);
	if (r != NULL)
		snprintf(buf, len, "%s", r);
	else
		ERR_error_string_n(e, buf, len);
}

/* Fill err with the formatted prefix, ": " and the first queued reason. */
static void __attribute__((format(printf, 3, 4)))
tls_fail(char *err, size_t errlen, const char *fmt, ...)
{
	char prefix[TLS_PREFIX_LEN], reason[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	tls_reason(ERR_peek_error(), reason, sizeof reason);
	ERR_clear_error();
	if (errlen > 0)
		snprintf(err, errlen, "%s: %s", prefix, reason);
}

/* Fill err with a message that has no OpenSSL reason. */
static void __attribute__((format(printf, 3, 4)))
tls_failx(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	ERR_clear_error();
	if (errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Password callback that refuses, and notes that a password was wanted. */
static int
tls_nopass_cb(char *buf, int size, int rwflag, void *arg)
{
	*(int *)arg = 1;
	return -1;
}

/* Read one private key from a PEM file. */
static EVP_PKEY *
tls_read_key(const char *path, char *err, size_t errlen)
{
	EVP_PKEY *pkey;
	BIO *bio;
	int wanted_pass = 0;

	ERR_clear_error();
	if ((bio = BIO_new_file(path, "r")) == NULL) {
		tls_fail(err, errlen, "cannot read key '%s'", path);
		return NULL;
	}
	pkey = PEM_read_bio_PrivateKey(bio, NULL, tls_nopass_cb, &wanted_pass);
	BIO_free(bio);
	if (pkey == NULL && wanted_pass)
		tls_failx(err, errlen, "cannot read key '%s': encrypted keys "
		    "are not supported", path);
	else if (pkey == NULL)
		tls_fail(err, errlen, "cannot read key '%s'", path);
	return pkey;
}

/* "YYYY-MM-DD HH:MM:SS UTC" of t, or "?". */
static void
tls_date(const ASN1_TIME *t, char *buf, size_t len)
{
	struct tm tm;

	memset(&tm, 0, sizeof tm);
	if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1 ||
	    strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, len, "?");
}

/* Load our certificate chain and matching key into ctx. */
static int
tls_load_identity(SSL_CTX *ctx, const char *cert, const char *key,
    char *err, size_t errlen)
{
	EVP_PKEY *pkey;
	X509 *leaf;

	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		tls_fail(err, errlen, "cannot read certificate '%s'", cert);
		return -1;
	}
	if ((pkey = tls_read_key(key, err, errlen)) == NULL)
		return -1;
	leaf = SSL_CTX_get0_certificate(ctx);
	if (leaf == NULL || X509_check_private_key(leaf, pkey) != 1) {
		tls_failx(err, errlen, "key '%s' does not match certificate "
		    "'%s'", key, cert);
		goto out_pkey;
	}
	if (SSL_CTX_use_PrivateKey(ctx, pkey) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		tls_fail(err, errlen, "cannot use key '%s'", key);
		goto out_pkey;
	}
	EVP_PKEY_free(pkey);
	return 0;

out_pkey:
	EVP_PKEY_free(pkey);
	return -1;
}

/* Whether one of the certificates in store issued and signed crl. */
static int
tls_crl_signed(X509_STORE *store, X509_CRL *crl)
{
	STACK_OF(X509_OBJECT) *objs;
	X509_OBJECT *obj;
	EVP_PKEY *pub;
	X509 *x;
	int i, ok = 0;

	if (!X509_STORE_lock(store))
		return 0;
	objs = X509_STORE_get0_objects(store);
	for (i = 0; i < sk_X509_OBJECT_num(objs) && !ok; i++) {
		obj = sk_X509_OBJECT_value(objs, i);
		if ((x = X509_OBJECT_get0_X509(obj)) == NULL)
			continue;
		if (X509_NAME_cmp(X509_get_subject_name(x),
		    X509_CRL_get_issuer(crl)) != 0)
			continue;
		if ((pub = X509_get0_pubkey(x)) != NULL &&
		    X509_CRL_verify(crl, pub) == 1)
			ok = 1;
	}
	X509_STORE_unlock(store);
	ERR_clear_error();
	return ok;
}

/* Add the CRLs of a PEM file to ctx's store and turn on CRL checks. */
static int
tls_load_crl(SSL_CTX *ctx, const char *path, const char *ca, char *err,
    size_t errlen)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	const ASN1_TIME *next;
	unsigned long e;
	X509_CRL *crl;
	BIO *bio;
	int n = 0;

	ERR_clear_error();
	if ((bio = BIO_new_file(path, "r")) == NULL) {
		tls_fail(err, errlen, "cannot read CRL '%s'", path);
		return -1;
	}
	while ((crl = PEM_read_bio_X509_CRL(bio, NULL, NULL, NULL)) != NULL) {
		if (!tls_crl_signed(store, crl)) {
			tls_failx(err, errlen, "CRL '%s' is not signed by a CA "
			    "in '%s'", path, ca);
			goto out_crl;
		}
		next = X509_CRL_get0_nextUpdate(crl);
		if (next != NULL && X509_cmp_current_time(next) <= 0) {
			tls_failx(err, errlen, "CRL '%s' has expired", path);
			goto out_crl;
		}
		if (X509_STORE_add_crl(store, crl) != 1) {
			tls_fail(err, errlen, "cannot use CRL '%s'", path);
			goto out_crl;
		}
		X509_CRL_free(crl);
		n++;
	}
	/* The loop ends at the end of the file with "no start line". */
	e = ERR_peek_last_error();
	if (n == 0 || ERR_GET_LIB(e) != ERR_LIB_PEM ||
	    ERR_GET_REASON(e) != PEM_R_NO_START_LINE) {
		if (n == 0 && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
			tls_failx(err, errlen, "cannot read CRL '%s': no CRL "
			    "in file", path);
		else
			tls_fail(err, errlen, "cannot read CRL '%s'", path);
		goto out_bio;
	}
	ERR_clear_error();
	BIO_free(bio);
	X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
	return 0;

out_crl:
	X509_CRL_free(crl);
out_bio:
	BIO_free(bio);
	return -1;
}

/* A context of method speaking TLS 1.3 only, our suites first. */
static SSL_CTX *
tls_ctx_base(const SSL_METHOD *method, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	ERR_clear_error();
	if ((ctx = SSL_CTX_new(method)) == NULL) {
		tls_fail(err, errlen, "cannot create TLS context");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
		tls_fail(err, errlen, "cannot require TLS 1.3");
		goto out_ctx;
	}
	/*
	 * AES-128-GCM first (OpenSSL's default order puts AES-256 first):
	 * four fewer AES rounds per block for every byte of trace data, and
	 * still a full-strength TLS 1.3 suite.
	 */
	if (SSL_CTX_set_ciphersuites(ctx, TLS_CIPHERSUITES) != 1) {
		tls_fail(err, errlen, "cannot set the TLS 1.3 cipher suites");
		goto out_ctx;
	}
	return ctx;

out_ctx:
	SSL_CTX_free(ctx);
	return NULL;
}

/* Build the part common to both sides: protocol, identity, trust. */
static SSL_CTX *
tls_ctx_new(const SSL_METHOD *method, const char *cert, const char *key,
    const char *ca, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	ERR_clear_error();
	if (cert == NULL || key == NULL || ca == NULL) {
		tls_failx(err, errlen, "a certificate, a key and a CA file "
		    "are all needed");
		return NULL;
	}
	if ((ctx = tls_ctx_base(method, err, errlen)) == NULL)
		return NULL;
	if (tls_load_identity(ctx, cert, key, err, errlen) == -1)
		goto out_ctx;
	if (SSL_CTX_load_verify_file(ctx, ca) != 1) {
		tls_fail(err, errlen, "cannot read CA certificates '%s'", ca);
		goto out_ctx;
	}
	return ctx;

out_ctx:
	SSL_CTX_free(ctx);
	return NULL;
}

/* What makes a context a server's: the client check, CRL, no resumption. */
static int
tls_server_setup(SSL_CTX *ctx, const char *ca, const char *crl, char *err,
    size_t errlen)
{
	STACK_OF(X509_NAME) *names;

	/* Tell clients which CA we want (TLS 1.3 certificate_authorities). */
	if ((names = SSL_load_client_CA_file(ca)) == NULL) {
		tls_fail(err, errlen, "cannot read CA certificates '%s'", ca);
		return -1;
	}
	SSL_CTX_set_client_CA_list(ctx, names);
	if (crl != NULL && tls_load_crl(ctx, crl, ca, err, errlen) == -1)
		return -1;
	tls_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	if (SSL_CTX_set_num_tickets(ctx, 0) != 1) {
		tls_fail(err, errlen, "cannot turn session tickets off");
		return -1;
	}
	return 0;
}

/* Server context: TLS 1.3, our chain and key, clients verified against ca. */
SSL_CTX *
td_tls_server_ctx(const char *cert, const char *key, const char *ca,
    const char *crl, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	ctx = tls_ctx_new(TLS_server_method(), cert, key, ca, err, errlen);
	if (ctx == NULL)
		return NULL;
	if (tls_server_setup(ctx, ca, crl, err, errlen) == -1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* Give ctx the certificate, chain and key that old holds in memory. */
static int
tls_copy_identity(SSL_CTX *ctx, SSL_CTX *old, char *err, size_t errlen)
{
	STACK_OF(X509) *chain = NULL;
	EVP_PKEY *pkey;
	X509 *leaf;

	ERR_clear_error();
	leaf = SSL_CTX_get0_certificate(old);
	pkey = SSL_CTX_get0_privatekey(old);
	if (leaf == NULL || pkey == NULL ||
	    SSL_CTX_get0_chain_certs(old, &chain) != 1) {
		tls_failx(err, errlen, "no certificate and key in memory");
		return -1;
	}
	if (SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, pkey) != 1 ||
	    (chain != NULL && SSL_CTX_set1_chain(ctx, chain) != 1) ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		tls_fail(err, errlen, "cannot reuse the certificate and key "
		    "in memory");
		return -1;
	}
	return 0;
}

/*
 * A new server context for a reload: the CA and the CRL are read again
 * (they are public, so readable after tdlisten gave up root); so are the
 * certificate and key when they can be, else the ones old holds are kept.
 */
SSL_CTX *
td_tls_server_reload(SSL_CTX *old, const char *cert, const char *key,
    const char *ca, const char *crl, bool *kept, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	*kept = false;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if ((ctx = tls_ctx_base(TLS_server_method(), err, errlen)) == NULL)
		return NULL;
	if (tls_load_identity(ctx, cert, key, err, errlen) == -1) {
		/*
		 * A fresh context: the one that failed may hold a new
		 * certificate without its key.  err keeps the reason.
		 */
		SSL_CTX_free(ctx);
		if ((ctx = tls_ctx_base(TLS_server_method(), NULL, 0)) ==
		    NULL || tls_copy_identity(ctx, old, err, errlen) == -1)
			goto out_ctx;
		*kept = true;
	}
	if (SSL_CTX_load_verify_file(ctx, ca) != 1) {
		tls_fail(err, errlen, "cannot read CA certificates '%s'", ca);
		goto out_ctx;
	}
	if (tls_server_setup(ctx, ca, crl, err, errlen) == -1)
		goto out_ctx;
	return ctx;

out_ctx:
	SSL_CTX_free(ctx);
	return NULL;
}

/* Whether our certificate is valid now (tls.h). */
int
td_tls_check_dates(SSL_CTX *ctx, const char *cert, char *err, size_t errlen)
{
	X509 *leaf = SSL_CTX_get0_certificate(ctx);
	char date[40];

	if (leaf == NULL)
		return 0;
	if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0) {
		tls_date(X509_get0_notAfter(leaf), date, sizeof date);
		tls_failx(err, errlen, "certificate '%s' expired on %s: the "
		    "listener will refuse it; make a new one (tdcert issue)",
		    cert, date);
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0) {
		tls_date(X509_get0_notBefore(leaf), date, sizeof date);
		tls_failx(err, errlen, "certificate '%s' is valid from %s "
		    "only: is this machine's clock right?", cert, date);
		return -1;
	}
	return 0;
}

/* Client context: TLS 1.3, our chain and key, the server verified by ca. */
SSL_CTX *
td_tls_client_ctx(const char *cert, const char *key, const char *ca,
    char *err, size_t errlen)
{
	SSL_CTX *ctx;

	ctx = tls_ctx_new(TLS_client_method(), cert, key, ca, err, errlen);
	if (ctx == NULL)
		return NULL;
	tls_set_verify(ctx, SSL_VERIFY_PEER);
	return ctx;
}

/* Set SNI and the name or address the server's certificate must match. */
int
td_tls_client_prepare(SSL *ssl, const char *host, char *err, size_t errlen)
{
	X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
	char lit[INET6_ADDRSTRLEN];
	struct in6_addr a6;
	struct in_addr a4;
	size_t len;

	ERR_clear_error();
	if (host == NULL || *host == '\0') {
		tls_failx(err, errlen, "no host name to verify the server "
		    "against");
		return -1;
	}
	len = strlen(host);
	if (host[0] == '[' && host[len - 1] == ']' && len - 2 < sizeof lit) {
		memcpy(lit, host + 1, len - 2);
		lit[len - 2] = '\0';
	} else if (len < sizeof lit)
		memcpy(lit, host, len + 1);
	else
		lit[0] = '\0';
	if (inet_pton(AF_INET, lit, &a4) == 1 ||
	    inet_pton(AF_INET6, lit, &a6) == 1) {
		/* RFC 6066: no SNI for address literals. */
		if (X509_VERIFY_PARAM_set1_ip_asc(param, lit) != 1) {
			tls_fail(err, errlen, "cannot verify address '%s'",
			    lit);
			return -1;
		}
		return 0;
	}
	if (host[0] == '[') {
		tls_failx(err, errlen, "bad address '%s'", host);
		return -1;
	}
	if (SSL_set_tlsext_host_name(ssl, host) != 1) {
		tls_fail(err, errlen, "cannot send server name '%s'", host);
		return -1;
	}
	X509_VERIFY_PARAM_set_hostflags(param,
	    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set1_host(ssl, host) != 1) {
		tls_fail(err, errlen, "cannot verify host name '%s'", host);
		return -1;
	}
	return 0;
}

/*
 * A certificate name as one directory name, one-to-one: bytes of
 * [A-Za-z0-9_] (and '.', '-' past the first) stay, every other byte,
 * '%' included, becomes %XX.  Mapping them all to '_' made "web/1" and
 * "web_1" one identity: one directory, one quota, each other's recordings
 * to resume (issue 13).
 */
int
td_tls_escape(const void *name, size_t len, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = name;
	unsigned char c;
	size_t i, o = 0;

	if (outlen > 0)
		out[0] = '\0';
	if (len == 0 || len > TD_MAX_IDENTITY_LEN)
		return -1;
	for (i = 0; i < len; i++) {
		c = p[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' ||
		    ((c == '.' || c == '-') && i > 0)) {
			if (o + 1 >= outlen || o + 1 > TD_MAX_IDENTITY_LEN)
				goto out_long;
			out[o++] = (char)c;
			continue;
		}
		if (o + 3 >= outlen || o + 3 > TD_MAX_IDENTITY_LEN)
			goto out_long;
		out[o++] = '%';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	out[o] = '\0';
	return 0;
out_long:
	if (outlen > 0)
		out[0] = '\0';
	return -1;
}

/* Escaped first DNS subjectAltName of x; 1 if x has none. */
static int
tls_identity_san(X509 *x, char *out, size_t outlen)
{
	GENERAL_NAMES *gens;
	GENERAL_NAME *gen;
	int i, rc = 1;

	gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	if (gens == NULL)
		return 1;
	for (i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
		gen = sk_GENERAL_NAME_value(gens, i);
		if (gen->type != GEN_DNS)
			continue;
		rc = td_tls_escape(ASN1_STRING_get0_data(gen->d.dNSName),
		    ASN1_STRING_length(gen->d.dNSName), out, outlen);
		break;
	}
	GENERAL_NAMES_free(gens);
	return rc;
}

/* Escaped first commonName of x's subject. */
static int
tls_identity_cn(X509 *x, char *out, size_t outlen)
{
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_ENTRY *ent;
	unsigned char *utf8;
	int i, len, rc;

	if ((i = X509_NAME_get_index_by_NID(name, NID_commonName, -1)) < 0)
		return -1;
	ent = X509_NAME_get_entry(name, i);
	/* A BMPString or UniversalString must not turn into "_a_b_c". */
	len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(ent));
	if (len < 0)
		return -1;
	rc = td_tls_escape(utf8, len, out, outlen);
	OPENSSL_free(utf8);
	return rc;
}

/* Directory-safe name of the verified peer. */
int
td_tls_peer_identity(SSL *ssl, char *out, size_t outlen)
{
	X509 *x;
	int rc;

	if (outlen > 0)
		out[0] = '\0';
	x = SSL_get0_peer_certificate(ssl);
	if (x == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
		return -1;
	if ((rc = tls_identity_san(x, out, outlen)) == 1)
		rc = tls_identity_cn(x, out, outlen);
	ERR_clear_error();
	return rc;
}

/* Describe and clear the first OpenSSL error of this thread. */
void
td_tls_error(char *err, size_t errlen, const char *what)
{
	char reason[256];
	unsigned long e;

	if ((e = ERR_peek_error()) == 0)
		snprintf(reason, sizeof reason, "no error reported by OpenSSL");
	else
		tls_reason(e, reason, sizeof reason);
	ERR_clear_error();
	if (errlen > 0)
		snprintf(err, errlen, "%s: %s", what, reason);
}

/*
 * The date that made the peer's certificate fail (its notAfter when it had
 * expired, its notBefore when not valid yet), kept on the SSL by
 * tls_verify_cb(): OpenSSL keeps no peer certificate after a failed check.
 */
static int tls_date_idx = -1;

static void
tls_date_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
    long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	ASN1_TIME_free(ptr);
}

/* The verify callback of both sides: OpenSSL's verdict, the date kept. */
static int
tls_verify_cb(int ok, X509_STORE_CTX *x)
{
	X509 *cur = X509_STORE_CTX_get_current_cert(x);
	SSL *ssl = X509_STORE_CTX_get_ex_data(x,
	    SSL_get_ex_data_X509_STORE_CTX_idx());
	int e = X509_STORE_CTX_get_error(x);
	const ASN1_TIME *t = NULL;

	if (ok || ssl == NULL || cur == NULL || tls_date_idx == -1 ||
	    SSL_get_ex_data(ssl, tls_date_idx) != NULL)
		return ok;
	if (e == X509_V_ERR_CERT_HAS_EXPIRED)
		t = X509_get0_notAfter(cur);
	else if (e == X509_V_ERR_CERT_NOT_YET_VALID)
		t = X509_get0_notBefore(cur);
	if (t != NULL)
		SSL_set_ex_data(ssl, tls_date_idx, ASN1_STRING_dup(t));
	return ok;
}

/* Install tls_verify_cb() on ctx with mode. */
static void
tls_set_verify(SSL_CTX *ctx, int mode)
{
	if (tls_date_idx == -1)
		tls_date_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL,
		    tls_date_free);
	SSL_CTX_set_verify(ctx, mode, tls_verify_cb);
}

/*
 * What the certificate check v (of the peer) that failed means, and what
 * fixes it, into out ("" when there is nothing to add).
 */
static void
tls_explain_verify(SSL *ssl, long v, const char *peer, const char *self,
    char *out, size_t len)
{
	const ASN1_TIME *t = tls_date_idx == -1 ? NULL :
	    SSL_get_ex_data(ssl, tls_date_idx);
	char date[40];

	switch (v) {
	case X509_V_ERR_CERT_HAS_EXPIRED:
		tls_date(t, date, sizeof date);
		snprintf(out, len, "%s's certificate expired on %s: %s needs a "
		    "new one (tdcert issue)", peer, date, peer);
		break;
	case X509_V_ERR_CERT_NOT_YET_VALID:
		tls_date(t, date, sizeof date);
		snprintf(out, len, "%s's certificate is valid from %s only: is "
		    "the clock of %s or of this machine wrong?", peer, date,
		    peer);
		break;
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		snprintf(out, len, "%s's certificate is for another name: "
		    "connect by the name in it, or give it with --server-name",
		    peer);
		break;
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
	case X509_V_ERR_CERT_SIGNATURE_FAILURE:
		snprintf(out, len, "%s's certificate is not signed by the CA "
		    "of %s's --ca: issue it from that CA (tdcert), or give %s "
		    "the CA that signed it", peer, self, self);
		break;
	case X509_V_ERR_CERT_REVOKED:
		snprintf(out, len, "%s's certificate is in %s's --crl: %s needs "
		    "a new one", peer, self, peer);
		break;
	default:
		out[0] = '\0';
		break;
	}
}

/*
 * What the OpenSSL error e of a failed handshake (an alert of the peer,
 * bytes that are no TLS) means, and what fixes it, into out ("" when
 * there is nothing to add).
 */
static void
tls_explain_error(SSL *ssl, unsigned long e, const char *peer,
    const char *self, char *out, size_t len)
{
	X509 *own = SSL_get_certificate(ssl);
	char date[40];

	out[0] = '\0';
	if (e == 0 || ERR_GET_LIB(e) != ERR_LIB_SSL)
		return;
	switch (ERR_GET_REASON(e)) {
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
		tls_date(own ? X509_get0_notAfter(own) : NULL, date,
		    sizeof date);
		if (own != NULL && X509_cmp_current_time(
		    X509_get0_notAfter(own)) < 0)
			snprintf(out, len, "%s's certificate expired on %s: it "
			    "needs a new one (tdcert issue)", self, date);
		else
			snprintf(out, len, "%s says %s's certificate has "
			    "expired, which is valid until %s here: is the "
			    "clock of %s wrong?", peer, self, date, peer);
		break;
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
		snprintf(out, len, "%s does not know the CA that signed %s's "
		    "certificate: issue it from the CA of %s's --ca "
		    "(tdcert), or give %s this CA", peer, self, peer, peer);
		break;
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
		snprintf(out, len, "%s revoked %s's certificate (its --crl): "
		    "%s needs a new one", peer, self, self);
		break;
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		snprintf(out, len, "%s wants a certificate: give %s --cert "
		    "and --key", peer, self);
		break;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
		snprintf(out, len, "%s does not speak TLS: --insecure (on both "
		    "sides), or is that the HTTP port?", peer);
		break;
	}
}

/* What a failed handshake's cause means and what fixes it (tls.h). */
void
td_tls_explain(SSL *ssl, unsigned long e, char *out, size_t len)
{
	long v = SSL_get_verify_result(ssl);
	bool server = SSL_is_server(ssl);
	const char *peer = server ? "the agent" : "the listener";
	const char *self = server ? "this listener" : "this agent";

	if (len == 0)
		return;
	if (v != X509_V_OK)
		tls_explain_verify(ssl, v, peer, self, out, len);
	else
		tls_explain_error(ssl, e, peer, self, out, len);
}

/*
 * Describe a failed handshake, naming the failed certificate check, then
 * in brackets what it means and what fixes it, when that is known.
 */
void
td_tls_handshake_error(SSL *ssl, char *err, size_t errlen, const char *what)
{
	long v = SSL_get_verify_result(ssl);
	char why[600];
	size_t n;

	td_tls_explain(ssl, ERR_peek_error(), why, sizeof why);
	if (v == X509_V_OK)
		td_tls_error(err, errlen, what);
	else {
		ERR_clear_error();
		if (errlen > 0)
			snprintf(err, errlen, "%s: certificate verify failed: "
			    "%s", what, X509_verify_cert_error_string(v));
	}
	if (why[0] != '\0' && errlen > 0 && (n = strlen(err)) < errlen)
		snprintf(err + n, errlen - n, " (%s)", why);
}

/* Version of the OpenSSL library, for the start-up log line. */
const char *
td_tls_version(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}
