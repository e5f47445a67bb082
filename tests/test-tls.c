/*
 * test-tls.c: TLS contexts with mutual authentication (shared/tls.c) and the
 * certificate tool scripts/tdcert.
 *
 * The group set-up makes a throw-away PKI in a temporary directory with
 * scripts/tdcert (found through TD_SRCDIR): a CA with a listener, two agents
 * (one then revoked) and a second, unrelated CA with its own listener and
 * agent.  The certificates tdcert refuses to make (expired, hostile names)
 * are made here with the OpenSSL API, signed by the same CA.  Handshakes run
 * over a real loopback TCP connection, both ends non-blocking and stepped in
 * turn in one thread (polling while data is in flight), so that every
 * outcome is deterministic.  Each refusal is checked for its reason (the
 * X.509 verify result or the TLS error), not only for failing, so that a
 * test cannot pass for the wrong reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tdlimits.h"
#include "tls.h"
#include "banned.h"

#define DAY	(24L * 60 * 60)

/* Temporary directory holding every file the tests make. */
static char	 topdir[PATH_MAX];
/* Value of OPENSSL for tdcert's child process (NULL: inherit). */
static const char *tdcert_openssl;
/* Whether tdcert's messages are thrown away (for its usage text). */
static int	 tdcert_quiet;

/* Absolute path of rel inside topdir, in one of a ring of buffers. */
static const char *
P(const char *rel)
{
	static char bufs[16][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 16];

	if (snprintf(b, PATH_MAX, "%s/%s", topdir, rel) >= PATH_MAX)
		fail_msg("path too long: %s/%s", topdir, rel);
	return b;
}

/* Run scripts/tdcert with the NULL-terminated arguments; its exit status. */
static int
tdcert(const char *arg, ...)
{
	const char *srcdir = getenv("TD_SRCDIR");
	char script[PATH_MAX];
	char *argv[16];
	va_list ap;
	int argc = 0, status, fd;
	pid_t pid;

	if (snprintf(script, sizeof script, "%s/scripts/tdcert",
	    srcdir != NULL ? srcdir : ".") >= (int)sizeof script)
		fail_msg("TD_SRCDIR too long");
	argv[argc++] = strdup("sh");
	argv[argc++] = strdup(script);
	va_start(ap, arg);
	for (; arg != NULL && argc < 15; arg = va_arg(ap, const char *))
		argv[argc++] = strdup(arg);
	va_end(ap);
	argv[argc] = NULL;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The paths tdcert prints would only clutter the log. */
		if ((fd = open("/dev/null", O_WRONLY)) >= 0) {
			dup2(fd, STDOUT_FILENO);
			if (tdcert_quiet)
				dup2(fd, STDERR_FILENO);
		}
		if (tdcert_openssl != NULL)
			setenv("OPENSSL", tdcert_openssl, 1);
		execv("/bin/sh", argv);
		_exit(127);
	}
	while (argc > 0)
		free(argv[--argc]);
	assert_true(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static X509 *
read_cert(const char *path)
{
	X509 *x;
	FILE *f;

	assert_non_null(f = fopen(path, "r"));
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(x);
	return x;
}

static EVP_PKEY *
read_key(const char *path)
{
	EVP_PKEY *k;
	FILE *f;

	assert_non_null(f = fopen(path, "r"));
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(k);
	return k;
}

static void
add_ext(X509 *x, X509V3_CTX *v3, int nid, const char *value)
{
	X509_EXTENSION *ext;

	ext = X509V3_EXT_nconf_nid(NULL, v3, nid, value);
	assert_non_null(ext);
	assert_int_equal(X509_add_ext(x, ext, -1), 1);
	X509_EXTENSION_free(ext);
}

/*
 * Write base.pem and base.key: a certificate signed by pki's CA valid from
 * now + nb to now + na seconds, with commonName cn, extendedKeyUsage eku and
 * subjectAltName san (none if NULL).  If pass is set the key is encrypted.
 */
static void
make_cert(const char *base, const char *cn, const char *san, const char *eku,
    long nb, long na, const char *pass)
{
	static uint64_t serial = 0x7d000000;
	char path[PATH_MAX];
	EVP_PKEY *cakey, *key;
	X509 *ca, *x;
	X509V3_CTX v3;
	FILE *f;

	ca = read_cert(P("pki/ca.pem"));
	cakey = read_key(P("pki/ca.key"));
	assert_non_null(key = EVP_EC_gen("P-256"));
	assert_non_null(x = X509_new());
	assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
	ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial++);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), nb));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), na));
	assert_int_equal(X509_set_pubkey(x, key), 1);
	assert_int_equal(X509_NAME_add_entry_by_txt(X509_get_subject_name(x),
	    "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0), 1);
	assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(ca)),
	    1);
	X509V3_set_ctx(&v3, ca, x, NULL, NULL, 0);
	add_ext(x, &v3, NID_basic_constraints, "critical,CA:FALSE");
	add_ext(x, &v3, NID_key_usage, "critical,digitalSignature");
	add_ext(x, &v3, NID_ext_key_usage, eku);
	add_ext(x, &v3, NID_authority_key_identifier, "keyid");
	if (san != NULL)
		add_ext(x, &v3, NID_subject_alt_name, san);
	assert_true(X509_sign(x, cakey, EVP_sha256()) > 0);

	snprintf(path, sizeof path, "%s.pem", base);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	snprintf(path, sizeof path, "%s.key", base);
	assert_non_null(f = fopen(path, "w"));
	if (pass != NULL)
		assert_int_equal(PEM_write_PrivateKey(f, key,
		    EVP_aes_256_cbc(), (const unsigned char *)pass,
		    strlen(pass), NULL, NULL), 1);
	else
		assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0,
		    NULL, NULL), 1);
	fclose(f);
	X509_free(x);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(cakey);
}

/* Write a CRL of pki's CA, revoking nothing, whose nextUpdate is past. */
static void
make_expired_crl(const char *path)
{
	EVP_PKEY *cakey;
	X509_CRL *crl;
	ASN1_TIME *t;
	X509 *ca;
	FILE *f;

	ca = read_cert(P("pki/ca.pem"));
	cakey = read_key(P("pki/ca.key"));
	assert_non_null(crl = X509_CRL_new());
	assert_int_equal(X509_CRL_set_version(crl, X509_CRL_VERSION_2), 1);
	assert_int_equal(X509_CRL_set_issuer_name(crl,
	    X509_get_subject_name(ca)), 1);
	assert_non_null(t = X509_gmtime_adj(NULL, -2 * DAY));
	assert_int_equal(X509_CRL_set1_lastUpdate(crl, t), 1);
	assert_non_null(X509_gmtime_adj(t, -DAY));
	assert_int_equal(X509_CRL_set1_nextUpdate(crl, t), 1);
	ASN1_TIME_free(t);
	assert_true(X509_CRL_sign(crl, cakey, EVP_sha256()) > 0);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(PEM_write_X509_CRL(f, crl), 1);
	fclose(f);
	X509_CRL_free(crl);
	X509_free(ca);
	EVP_PKEY_free(cakey);
}

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int
group_teardown(void **state)
{
	if (topdir[0] != '\0')
		nftw(topdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* Make the PKI every test uses; see the comment at the top. */
static int
group_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(topdir, sizeof topdir, "%s/test-tls.XXXXXX",
	    tmp != NULL ? tmp : "/tmp");
	if (mkdtemp(topdir) == NULL) {
		topdir[0] = '\0';
		return -1;
	}
	if (tdcert("init", P("pki"), NULL) != 0 ||
	    tdcert("issue", P("pki"), "listener", "--server", NULL) != 0 ||
	    tdcert("issue", P("pki"), "agent1", NULL) != 0 ||
	    tdcert("issue", P("pki"), "agent2", NULL) != 0 ||
	    tdcert("revoke", P("pki"), "agent2", NULL) != 0 ||
	    tdcert("init", P("other"), NULL) != 0 ||
	    tdcert("issue", P("other"), "agent1", NULL) != 0 ||
	    tdcert("issue", P("other"), "listener", "--server", NULL) != 0) {
		fprintf(stderr, "test-tls: scripts/tdcert failed (is TD_SRCDIR "
		    "set and openssl installed?)\n");
		return -1;
	}
	make_cert(P("expired"), "expired", "DNS:expired", "clientAuth",
	    -2 * DAY, -DAY, NULL);
	make_cert(P("notyet"), "notyet", "DNS:notyet", "clientAuth",
	    DAY, 2 * DAY, NULL);
	make_cert(P("evil"), "../etc/pass wd", NULL, "clientAuth",
	    -DAY, DAY, NULL);
	make_cert(P("sanfirst"), "cn-ignored",
	    "IP:10.1.1.1,DNS:San.Example,DNS:second", "clientAuth",
	    -DAY, DAY, NULL);
	make_cert(P("longname"), "short", "DNS:"
	    "a123456789b123456789c123456789d123456789e123456789f123456789"
	    "g123456789", "clientAuth", -DAY, DAY, NULL);
	make_cert(P("locked"), "locked", "DNS:locked", "clientAuth",
	    -DAY, DAY, "secret");
	make_expired_crl(P("expired-crl.pem"));
	return 0;
}

/* One end of a connection under test. */
struct side {
	SSL	*ssl;
	int	 state;		/* 0 running, 1 handshake done, -1 failed */
	char	 err[512];
};

/* A loopback TCP connection with a client and a server SSL on it. */
struct conn {
	int		 fd[2];
	struct side	 c;
	struct side	 s;
	int		 refused;	/* client saw the server's alert */
};

static void
tcp_pair(int fd[2])
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	int l, i;

	assert_true((l = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	assert_true((fd[0] = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(connect(fd[0], (struct sockaddr *)&sin, sizeof sin),
	    0);
	assert_true((fd[1] = accept(l, NULL, NULL)) >= 0);
	close(l);
	for (i = 0; i < 2; i++)
		assert_int_equal(fcntl(fd[i], F_SETFL,
		    fcntl(fd[i], F_GETFL) | O_NONBLOCK), 0);
}

/* Wait until one of the sides still running has input (at most 50 ms). */
static void
wait_input(struct conn *k)
{
	struct pollfd pfd[2];
	int n = 0;

	if (k->c.state == 0)
		pfd[n++] = (struct pollfd){ .fd = k->fd[0], .events = POLLIN };
	if (k->s.state == 0)
		pfd[n++] = (struct pollfd){ .fd = k->fd[1], .events = POLLIN };
	if (n > 0)
		poll(pfd, n, 50);
}

/* SSL_read() that waits up to 5 s for data on a non-blocking socket. */
static int
read_wait(SSL *ssl, int fd, void *buf, int len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int i, r;

	for (i = 0; i < 100; i++) {
		if ((r = SSL_read(ssl, buf, len)) > 0 ||
		    SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ)
			return r;
		poll(&pfd, 1, 50);
	}
	return r;
}

/* Advance one side's handshake as far as it goes without blocking. */
static void
step(struct side *sd, const char *what)
{
	int r, e;

	if (sd->state != 0)
		return;
	ERR_clear_error();
	if ((r = SSL_do_handshake(sd->ssl)) == 1) {
		sd->state = 1;
		return;
	}
	e = SSL_get_error(sd->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return;
	sd->state = -1;
	td_tls_handshake_error(sd->ssl, sd->err, sizeof sd->err, what);
}

/*
 * Handshake a client of cctx that dials host (not prepared if NULL) with a
 * server of sctx.  With TLS 1.3 a client finishes before the server judged
 * its certificate: when the server refuses, the client's first read must
 * fail with the server's alert, which k->refused records.
 */
static void
conn_run(struct conn *k, SSL_CTX *cctx, SSL_CTX *sctx, const char *host)
{
	char err[256], byte;
	int i;

	memset(k, 0, sizeof *k);
	tcp_pair(k->fd);
	assert_non_null(k->c.ssl = SSL_new(cctx));
	assert_non_null(k->s.ssl = SSL_new(sctx));
	assert_int_equal(SSL_set_fd(k->c.ssl, k->fd[0]), 1);
	assert_int_equal(SSL_set_fd(k->s.ssl, k->fd[1]), 1);
	SSL_set_connect_state(k->c.ssl);
	SSL_set_accept_state(k->s.ssl);
	if (host != NULL) {
		err[0] = '\0';
		assert_int_equal(td_tls_client_prepare(k->c.ssl, host, err,
		    sizeof err), 0);
		assert_string_equal(err, "");
	}
	/* Loopback data may arrive a little later: wait, 10 s at most. */
	for (i = 0; i < 200 && (k->c.state == 0 || k->s.state == 0); i++) {
		step(&k->c, "client");
		step(&k->s, "server");
		wait_input(k);
	}
	if (k->c.state == 1 && k->s.state == -1) {
		ERR_clear_error();
		if (read_wait(k->c.ssl, k->fd[0], &byte, 1) <= 0) {
			k->refused = 1;
			td_tls_error(k->c.err, sizeof k->c.err, "client read");
		}
	}
}

static void
conn_free(struct conn *k)
{
	SSL_free(k->c.ssl);
	SSL_free(k->s.ssl);
	close(k->fd[0]);
	close(k->fd[1]);
}

/* A server that requires agents of pki's CA, with or without its CRL. */
static SSL_CTX *
server_ctx(const char *crl)
{
	char err[512] = "";
	SSL_CTX *ctx;

	ctx = td_tls_server_ctx(P("pki/listener.pem"), P("pki/listener.key"),
	    P("pki/ca.pem"), crl, err, sizeof err);
	if (ctx == NULL)
		fail_msg("server ctx: %s", err);
	return ctx;
}

/* A client with base.pem/base.key (relative to topdir) trusting ca. */
static SSL_CTX *
client_ctx(const char *base, const char *ca)
{
	char cert[PATH_MAX], key[PATH_MAX], err[512] = "";
	SSL_CTX *ctx;

	if (snprintf(cert, sizeof cert, "%s/%s.pem", topdir, base) >=
	    (int)sizeof cert ||
	    snprintf(key, sizeof key, "%s/%s.key", topdir, base) >=
	    (int)sizeof key)
		fail_msg("path too long");
	ctx = td_tls_client_ctx(cert, key, P(ca), err, sizeof err);
	if (ctx == NULL)
		fail_msg("client ctx: %s", err);
	return ctx;
}

/* Check that a server (with crl) refused client with verify result v. */
static void
assert_refused(const char *client, const char *crl, long v, const char *why)
{
	SSL_CTX *cctx, *sctx;
	char id[TD_MAX_IDENTITY_LEN + 1];
	struct conn k;

	sctx = server_ctx(crl);
	cctx = client_ctx(client, "pki/ca.pem");
	conn_run(&k, cctx, sctx, "localhost");
	assert_int_equal(k.s.state, -1);
	assert_int_equal(SSL_get_verify_result(k.s.ssl), v);
	if (strstr(k.s.err, why) == NULL)
		fail_msg("server said '%s', not '%s'", k.s.err, why);
	assert_int_equal(td_tls_peer_identity(k.s.ssl, id, sizeof id), -1);
	assert_string_equal(id, "");
	/* The client learns it on its first read, from the alert. */
	assert_int_equal(k.c.state, 1);
	assert_int_equal(k.refused, 1);
	assert_non_null(strstr(k.c.err, "alert"));
	conn_free(&k);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
}

/*
 * A verify result saying that the chain ends at a CA we do not trust: which
 * one depends on whether the peer sent its root along (OpenSSL completes a
 * chain from the sender's CA file).
 */
static void
assert_unknown_ca(long v)
{
	if (v != X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY &&
	    v != X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN)
		fail_msg("verify result %ld: %s", v,
		    X509_verify_cert_error_string(v));
}

/* Whether x's subjectAltName holds a name of type t spelled s. */
static int
has_san(X509 *x, int t, const char *s)
{
	GENERAL_NAMES *gens;
	GENERAL_NAME *g;
	ASN1_OCTET_STRING *ip;
	int i, found = 0;

	gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	for (i = 0; i < sk_GENERAL_NAME_num(gens) && !found; i++) {
		g = sk_GENERAL_NAME_value(gens, i);
		if (g->type != t)
			continue;
		if (t == GEN_DNS)
			found = strcmp((const char *)ASN1_STRING_get0_data(
			    g->d.dNSName), s) == 0;
		else {
			assert_non_null(ip = a2i_IPADDRESS(s));
			found = ASN1_OCTET_STRING_cmp(ip, g->d.iPAddress) == 0;
			ASN1_OCTET_STRING_free(ip);
		}
	}
	GENERAL_NAMES_free(gens);
	return found;
}

static void
assert_mode(const char *path, mode_t mode)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, mode);
}

static void
test_tdcert(void **state)
{
	X509 *x, *ca;
	char name[80];
	struct stat st, st2;

	/* What init and issue wrote. */
	assert_mode(P("pki/ca.key"), 0600);
	assert_mode(P("pki/listener.key"), 0600);
	assert_mode(P("pki/agent1.key"), 0600);
	ca = read_cert(P("pki/ca.pem"));
	assert_int_equal(X509_check_ca(ca), 1);
	assert_true(X509_get_key_usage(ca) & KU_KEY_CERT_SIGN);
	assert_true(X509_get_key_usage(ca) & KU_CRL_SIGN);

	x = read_cert(P("pki/listener.pem"));
	assert_int_equal(X509_check_issued(ca, x), X509_V_OK);
	assert_int_equal(X509_check_ca(x), 0);
	assert_true(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
	assert_false(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT);
	assert_true(has_san(x, GEN_DNS, "listener"));
	assert_true(has_san(x, GEN_DNS, "localhost"));
	assert_true(has_san(x, GEN_IPADD, "127.0.0.1"));
	assert_true(has_san(x, GEN_IPADD, "::1"));
	X509_free(x);

	x = read_cert(P("pki/agent1.pem"));
	assert_int_equal(X509_check_issued(ca, x), X509_V_OK);
	assert_true(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT);
	assert_false(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
	assert_true(has_san(x, GEN_DNS, "agent1"));
	assert_false(has_san(x, GEN_DNS, "localhost"));
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName,
	    name, sizeof name);
	assert_string_equal(name, "agent1");
	/* 825 days by default. */
	assert_int_equal(X509_cmp_time(X509_get0_notAfter(x),
	    &(time_t){ time(NULL) + 824 * DAY }), 1);
	assert_int_equal(X509_cmp_time(X509_get0_notAfter(x),
	    &(time_t){ time(NULL) + 826 * DAY }), -1);
	X509_free(x);

	/* --ip and --days. */
	assert_int_equal(tdcert("issue", P("pki"), "web-1.example",
	    "--server", "--ip", "192.0.2.7", "--ip", "2001:db8::7",
	    "--days", "30", NULL), 0);
	x = read_cert(P("pki/web-1.example.pem"));
	assert_true(has_san(x, GEN_DNS, "web-1.example"));
	assert_true(has_san(x, GEN_IPADD, "192.0.2.7"));
	assert_true(has_san(x, GEN_IPADD, "2001:db8::7"));
	assert_true(has_san(x, GEN_IPADD, "127.0.0.1"));
	assert_int_equal(X509_cmp_time(X509_get0_notAfter(x),
	    &(time_t){ time(NULL) + 31 * DAY }), -1);
	X509_free(x);
	X509_free(ca);

	/* No overwriting without --force, and the files stay as they were. */
	assert_int_equal(stat(P("pki/agent1.pem"), &st), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "agent1", NULL), 0);
	assert_int_equal(stat(P("pki/agent1.pem"), &st2), 0);
	assert_int_equal(st.st_ino, st2.st_ino);
	assert_int_equal(st.st_size, st2.st_size);
	assert_int_not_equal(tdcert("init", P("pki"), NULL), 0);
	assert_int_equal(tdcert("issue", P("pki"), "web-1.example",
	    "--force", NULL), 0);

	/* Bad names, bad options, no CA, revoking what does not exist. */
	assert_int_not_equal(tdcert("issue", P("pki"), "../x", NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "a/b", NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "a b", NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), ".hidden", NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "ca", NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "crl", NULL), 0);
	memset(name, 'a', 65);
	name[65] = '\0';
	assert_int_not_equal(tdcert("issue", P("pki"), name, NULL), 0);
	name[64] = '\0';
	assert_int_equal(tdcert("issue", P("pki"), name, NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "x", "--days", "0",
	    NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "x", "--ip", "a;b",
	    NULL), 0);
	assert_int_not_equal(tdcert("issue", P("pki"), "x", "--bogus", NULL),
	    0);
	assert_int_not_equal(tdcert("issue", P("nope"), "x", NULL), 0);
	assert_int_not_equal(tdcert("revoke", P("pki"), "nobody", NULL), 0);
	assert_int_not_equal(tdcert("revoke", P("pki"), "agent2", NULL), 0);
	tdcert_quiet = 1;
	assert_int_not_equal(tdcert("frobnicate", NULL), 0);
	assert_int_not_equal(tdcert(NULL), 0);
	assert_int_equal(tdcert("--help", NULL), 0);
	tdcert_quiet = 0;
	assert_int_not_equal(stat(P("pki/x.pem"), &st), 0);

	/* No openssl program. */
	tdcert_openssl = "/nonexistent/openssl";
	assert_int_not_equal(tdcert("init", P("noossl"), NULL), 0);
	tdcert_openssl = NULL;
	assert_int_not_equal(stat(P("noossl/ca.pem"), &st), 0);
}

static void
test_ctx_settings(void **state)
{
	SSL_CTX *s, *c;

	s = server_ctx(P("pki/crl.pem"));
	assert_int_equal(SSL_CTX_get_min_proto_version(s), TLS1_3_VERSION);
	assert_int_equal(SSL_CTX_get_verify_mode(s),
	    SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
	assert_true(X509_VERIFY_PARAM_get_flags(X509_STORE_get0_param(
	    SSL_CTX_get_cert_store(s))) & X509_V_FLAG_CRL_CHECK);
	assert_int_equal(SSL_CTX_get_session_cache_mode(s),
	    SSL_SESS_CACHE_OFF);
	assert_int_equal(SSL_CTX_get_num_tickets(s), 0);
	c = client_ctx("pki/agent1", "pki/ca.pem");
	assert_int_equal(SSL_CTX_get_min_proto_version(c), TLS1_3_VERSION);
	assert_int_equal(SSL_CTX_get_verify_mode(c), SSL_VERIFY_PEER);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
	assert_non_null(strstr(td_tls_version(), "OpenSSL 3."));
}

static void
test_good_client(void **state)
{
	SSL_CTX *cctx, *sctx;
	char id[TD_MAX_IDENTITY_LEN + 1], buf[8];
	struct conn k;
	int crl;

	/* Without and with a CRL (which does not list agent1). */
	for (crl = 0; crl < 2; crl++) {
		sctx = server_ctx(crl ? P("pki/crl.pem") : NULL);
		cctx = client_ctx("pki/agent1", "pki/ca.pem");
		conn_run(&k, cctx, sctx, "localhost");
		if (k.c.state != 1 || k.s.state != 1)
			fail_msg("client '%s', server '%s'", k.c.err, k.s.err);
		assert_int_equal(SSL_version(k.c.ssl), TLS1_3_VERSION);
		assert_int_equal(SSL_version(k.s.ssl), TLS1_3_VERSION);
		assert_int_equal(SSL_get_verify_result(k.s.ssl), X509_V_OK);
		assert_int_equal(SSL_get_verify_result(k.c.ssl), X509_V_OK);
		assert_int_equal(td_tls_peer_identity(k.s.ssl, id, sizeof id),
		    0);
		assert_string_equal(id, "agent1");
		assert_int_equal(td_tls_peer_identity(k.c.ssl, id, sizeof id),
		    0);
		assert_string_equal(id, "listener");
		assert_string_equal(SSL_get_servername(k.s.ssl,
		    TLSEXT_NAMETYPE_host_name), "localhost");
		assert_false(SSL_session_reused(k.s.ssl));
		/* The channel carries data both ways. */
		assert_int_equal(SSL_write(k.c.ssl, "hello", 5), 5);
		assert_int_equal(read_wait(k.s.ssl, k.fd[1], buf, sizeof buf),
		    5);
		assert_memory_equal(buf, "hello", 5);
		assert_int_equal(SSL_write(k.s.ssl, "ok", 2), 2);
		assert_int_equal(read_wait(k.c.ssl, k.fd[0], buf, sizeof buf),
		    2);
		assert_memory_equal(buf, "ok", 2);
		/* Too small a buffer for the identity. */
		assert_int_equal(td_tls_peer_identity(k.s.ssl, id, 6), -1);
		conn_free(&k);
		SSL_CTX_free(cctx);
		SSL_CTX_free(sctx);
	}
}

static void
test_client_checks_server(void **state)
{
	static const char *const good[] = {
		"localhost", "listener", "127.0.0.1", "::1", "[::1]",
	};
	static const struct {
		const char	*host;
		long		 verify;
	} bad[] = {
		{ "evil.example", X509_V_ERR_HOSTNAME_MISMATCH },
		{ "listener.example", X509_V_ERR_HOSTNAME_MISMATCH },
		{ "10.9.9.9", X509_V_ERR_IP_ADDRESS_MISMATCH },
		{ "::2", X509_V_ERR_IP_ADDRESS_MISMATCH },
	};
	SSL_CTX *cctx, *sctx, *octx;
	char err[256];
	struct conn k;
	size_t i;
	SSL *ssl;

	sctx = server_ctx(NULL);
	cctx = client_ctx("pki/agent1", "pki/ca.pem");
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		conn_run(&k, cctx, sctx, good[i]);
		if (k.c.state != 1 || k.s.state != 1)
			fail_msg("%s: client '%s', server '%s'", good[i],
			    k.c.err, k.s.err);
		/* SNI only for names, never for address literals. */
		if (i < 2)
			assert_string_equal(SSL_get_servername(k.s.ssl,
			    TLSEXT_NAMETYPE_host_name), good[i]);
		else
			assert_null(SSL_get_servername(k.s.ssl,
			    TLSEXT_NAMETYPE_host_name));
		conn_free(&k);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		conn_run(&k, cctx, sctx, bad[i].host);
		assert_int_equal(k.c.state, -1);
		assert_int_equal(SSL_get_verify_result(k.c.ssl), bad[i].verify);
		assert_non_null(strstr(k.c.err, "certificate verify failed"));
		assert_int_equal(k.s.state, -1);
		assert_int_equal(td_tls_peer_identity(k.c.ssl, err, sizeof err),
		    -1);
		conn_free(&k);
	}

	/* A client trusting another CA refuses our listener... */
	octx = client_ctx("other/agent1", "other/ca.pem");
	conn_run(&k, octx, sctx, "localhost");
	assert_int_equal(k.c.state, -1);
	assert_unknown_ca(SSL_get_verify_result(k.c.ssl));
	conn_free(&k);
	SSL_CTX_free(octx);
	SSL_CTX_free(sctx);
	/* ...and our client refuses a listener of another CA. */
	sctx = td_tls_server_ctx(P("other/listener.pem"),
	    P("other/listener.key"), P("other/ca.pem"), NULL, err, sizeof err);
	assert_non_null(sctx);
	conn_run(&k, cctx, sctx, "localhost");
	assert_int_equal(k.c.state, -1);
	assert_unknown_ca(SSL_get_verify_result(k.c.ssl));
	conn_free(&k);
	SSL_CTX_free(sctx);

	/* Nothing to check against. */
	assert_non_null(ssl = SSL_new(cctx));
	assert_int_equal(td_tls_client_prepare(ssl, "", err, sizeof err), -1);
	assert_string_equal(err, "no host name to verify the server against");
	assert_int_equal(td_tls_client_prepare(ssl, NULL, err, sizeof err),
	    -1);
	assert_int_equal(td_tls_client_prepare(ssl, "[nope]", err,
	    sizeof err), -1);
	assert_string_equal(err, "bad address '[nope]'");
	SSL_free(ssl);
	SSL_CTX_free(cctx);
}

static void
test_reject_other_ca(void **state)
{
	assert_refused("other/agent1", NULL,
	    X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
	    "server: certificate verify failed: unable to get local issuer "
	    "certificate");
}

static void
test_reject_expired(void **state)
{
	assert_refused("expired", NULL, X509_V_ERR_CERT_HAS_EXPIRED,
	    "certificate has expired");
	assert_refused("notyet", NULL, X509_V_ERR_CERT_NOT_YET_VALID,
	    "certificate is not yet valid");
}

static void
test_reject_revoked(void **state)
{
	assert_refused("pki/agent2", P("pki/crl.pem"),
	    X509_V_ERR_CERT_REVOKED,
	    "certificate revoked");
}

static void
test_reject_server_cert_as_client(void **state)
{
	/* A listener's certificate (serverAuth only) cannot be an agent's. */
	assert_refused("pki/listener", NULL,
	    X509_V_ERR_INVALID_PURPOSE,
	    "unsuitable certificate purpose");
}

static void
test_reject_no_cert(void **state)
{
	SSL_CTX *cctx, *sctx;
	struct conn k;

	sctx = server_ctx(NULL);
	assert_non_null(cctx = SSL_CTX_new(TLS_client_method()));
	assert_int_equal(SSL_CTX_load_verify_file(cctx, P("pki/ca.pem")), 1);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	conn_run(&k, cctx, sctx, "localhost");
	assert_int_equal(k.s.state, -1);
	assert_string_equal(k.s.err,
	    "server: peer did not return a certificate");
	assert_int_equal(k.refused, 1);
	conn_free(&k);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
}

static void
test_reject_tls12(void **state)
{
	SSL_CTX *cctx, *sctx;
	struct conn k;

	sctx = server_ctx(NULL);
	assert_non_null(cctx = SSL_CTX_new(TLS_client_method()));
	assert_int_equal(SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION),
	    1);
	assert_int_equal(SSL_CTX_use_certificate_chain_file(cctx,
	    P("pki/agent1.pem")), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey_file(cctx, P("pki/agent1.key"),
	    SSL_FILETYPE_PEM), 1);
	assert_int_equal(SSL_CTX_load_verify_file(cctx, P("pki/ca.pem")), 1);
	conn_run(&k, cctx, sctx, "localhost");
	assert_int_equal(k.s.state, -1);
	assert_int_equal(k.c.state, -1);
	assert_string_equal(k.s.err, "server: unsupported protocol");
	conn_free(&k);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
}

/* Verify callback that lets every certificate through. */
static int
accept_all_cb(int ok, X509_STORE_CTX *x)
{
	return 1;
}

/* The server-side identity of the client holding base.pem. */
static int
identity_of(const char *base, char *id, size_t idlen)
{
	SSL_CTX *cctx, *sctx;
	struct conn k;
	int rc;

	sctx = server_ctx(NULL);
	cctx = client_ctx(base, "pki/ca.pem");
	conn_run(&k, cctx, sctx, "localhost");
	if (k.c.state != 1 || k.s.state != 1)
		fail_msg("%s: client '%s', server '%s'", base, k.c.err,
		    k.s.err);
	rc = td_tls_peer_identity(k.s.ssl, id, idlen);
	conn_free(&k);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	return rc;
}

static int
escaped_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void
test_identity(void **state)
{
	static const struct {
		const char	*in;
		const char	*out;
	} cases[] = {
		{ "agent1", "agent1" },
		{ "web-1.example.com", "web-1.example.com" },
		{ "../etc/pass wd", "%2E.%2Fetc%2Fpass%20wd" },
		{ "..", "%2E." },
		{ ".", "%2E" },
		{ "-rf", "%2Drf" },
		{ "a/b\\c:d", "a%2Fb%5Cc%3Ad" },
		{ "*.example", "%2A.example" },
		{ "caf\xc3\xa9", "caf%C3%A9" },
		{ "x\ny", "x%0Ay" },
		/* the names issue 13 found sharing one identity */
		{ "web/1", "web%2F1" },
		{ "web_1", "web_1" },
		{ "w\xc3\xa9" "b", "w%C3%A9b" },
		{ "w__b", "w__b" },
		/* '%' itself, so that no escape can be forged */
		{ "web%2F1", "web%252F1" },
		{ "%", "%25" },
		{ "\xff", "%FF" },
	};
	char out[TD_MAX_IDENTITY_LEN + 1], big[TD_MAX_IDENTITY_LEN + 2];
	char (*esc)[8];
	unsigned char two[2];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(td_tls_escape(cases[i].in,
		    strlen(cases[i].in), out, sizeof out), 0);
		assert_string_equal(out, cases[i].out);
	}
	/* An embedded NUL cannot cut the name short. */
	assert_int_equal(td_tls_escape("a\0b", 3, out, sizeof out), 0);
	assert_string_equal(out, "a%00b");
	/* One-to-one: the 65536 two-byte names give 65536 names. */
	esc = calloc(65536, sizeof *esc);
	assert_non_null(esc);
	for (i = 0; i < 65536; i++) {
		two[0] = (unsigned char)(i >> 8);
		two[1] = (unsigned char)i;
		assert_int_equal(td_tls_escape(two, 2, esc[i],
		    sizeof esc[i]), 0);
	}
	qsort(esc, 65536, sizeof *esc, escaped_cmp);
	for (i = 1; i < 65536; i++)
		if (strcmp(esc[i - 1], esc[i]) == 0)
			fail_msg("'%s' twice", esc[i]);
	free(esc);
	/* Empty, too long, too long once escaped, too small a buffer. */
	assert_int_equal(td_tls_escape("", 0, out, sizeof out), -1);
	assert_string_equal(out, "");
	memset(big, 'a', sizeof big);
	assert_int_equal(td_tls_escape(big, TD_MAX_IDENTITY_LEN, out,
	    sizeof out), 0);
	assert_int_equal(strlen(out), TD_MAX_IDENTITY_LEN);
	assert_int_equal(td_tls_escape(big, TD_MAX_IDENTITY_LEN + 1, out,
	    sizeof out), -1);
	big[TD_MAX_IDENTITY_LEN - 3] = '/';
	assert_int_equal(td_tls_escape(big, TD_MAX_IDENTITY_LEN - 2, out,
	    sizeof out), 0);
	assert_int_equal(strlen(out), TD_MAX_IDENTITY_LEN);
	assert_int_equal(td_tls_escape(big, TD_MAX_IDENTITY_LEN - 1, out,
	    sizeof out), -1);
	assert_string_equal(out, "");
	assert_int_equal(td_tls_escape("abc", 3, out, 3), -1);
	assert_int_equal(td_tls_escape("abc", 3, out, 4), 0);
	assert_int_equal(td_tls_escape("a/c", 3, out, 5), -1);
	assert_int_equal(td_tls_escape("a/c", 3, out, 6), 0);

	/* Through real handshakes, from the certificates. */
	assert_int_equal(identity_of("evil", out, sizeof out), 0);
	assert_string_equal(out, "%2E.%2Fetc%2Fpass%20wd");
	assert_int_equal(identity_of("sanfirst", out, sizeof out), 0);
	assert_string_equal(out, "San.Example");
	assert_int_equal(identity_of("longname", out, sizeof out), -1);

	/*
	 * A certificate the verifier failed has no identity, even when a
	 * callback let the handshake go on.
	 */
	{
		SSL_CTX *cctx = client_ctx("other/agent1", "pki/ca.pem");
		SSL_CTX *sctx = server_ctx(NULL);
		struct conn k;

		SSL_CTX_set_verify(sctx, SSL_VERIFY_PEER |
		    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_all_cb);
		conn_run(&k, cctx, sctx, "localhost");
		assert_int_equal(k.s.state, 1);
		assert_non_null(SSL_get0_peer_certificate(k.s.ssl));
		assert_int_not_equal(SSL_get_verify_result(k.s.ssl),
		    X509_V_OK);
		assert_int_equal(td_tls_peer_identity(k.s.ssl, out,
		    sizeof out), -1);
		conn_free(&k);
		SSL_CTX_free(cctx);
		SSL_CTX_free(sctx);
	}

	/* No handshake, no identity. */
	{
		SSL_CTX *ctx = server_ctx(NULL);
		SSL *ssl = SSL_new(ctx);

		assert_int_equal(td_tls_peer_identity(ssl, out, sizeof out),
		    -1);
		SSL_free(ssl);
		SSL_CTX_free(ctx);
	}
}

/* td_tls_server_ctx() must fail with exactly the message want. */
static void
assert_server_error(const char *cert, const char *key, const char *ca,
    const char *crl, const char *want)
{
	char err[1024] = "";
	SSL_CTX *ctx;

	ctx = td_tls_server_ctx(cert, key, ca, crl, err, sizeof err);
	assert_null(ctx);
	assert_string_equal(err, want);
	assert_int_equal(ERR_peek_error(), 0);
}

static void
test_ctx_errors(void **state)
{
	char want[2048], err[1024];
	const char *cert = P("pki/listener.pem"), *key = P("pki/listener.key");
	const char *ca = P("pki/ca.pem");
	SSL_CTX *ctx;

	assert_server_error("/nonexistent/c.pem", key, ca, NULL,
	    "cannot read certificate '/nonexistent/c.pem': No such file or "
	    "directory");
	assert_server_error(cert, "/nonexistent/k.pem", ca, NULL,
	    "cannot read key '/nonexistent/k.pem': No such file or "
	    "directory");
	snprintf(want, sizeof want, "key '%s' does not match certificate "
	    "'%s'", P("pki/agent1.key"), cert);
	assert_server_error(cert, P("pki/agent1.key"), ca, NULL, want);
	snprintf(want, sizeof want, "cannot read key '%s': encrypted keys "
	    "are not supported", P("locked.key"));
	assert_server_error(P("locked.pem"), P("locked.key"), ca, NULL, want);
	assert_server_error(cert, key, "/nonexistent/ca.pem", NULL,
	    "cannot read CA certificates '/nonexistent/ca.pem': No such file "
	    "or directory");
	assert_server_error(cert, key, ca, "/nonexistent/crl.pem",
	    "cannot read CRL '/nonexistent/crl.pem': No such file or "
	    "directory");
	snprintf(want, sizeof want, "CRL '%s' is not signed by a CA in '%s'",
	    P("other/crl.pem"), ca);
	assert_server_error(cert, key, ca, P("other/crl.pem"), want);
	snprintf(want, sizeof want, "CRL '%s' has expired",
	    P("expired-crl.pem"));
	assert_server_error(cert, key, ca, P("expired-crl.pem"), want);
	snprintf(want, sizeof want, "cannot read CRL '%s': no CRL in file",
	    ca);
	assert_server_error(cert, key, ca, ca, want);
	assert_server_error(NULL, key, ca, NULL,
	    "a certificate, a key and a CA file are all needed");

	/* A key where the certificate should be. */
	ctx = td_tls_server_ctx(key, key, ca, NULL, err, sizeof err);
	assert_null(ctx);
	snprintf(want, sizeof want, "cannot read certificate '%s': ", key);
	assert_memory_equal(err, want, strlen(want));

	/* The client side says the same things. */
	ctx = td_tls_client_ctx(P("pki/agent1.pem"), P("pki/agent1.key"),
	    "/nonexistent/ca.pem", err, sizeof err);
	assert_null(ctx);
	assert_string_equal(err, "cannot read CA certificates "
	    "'/nonexistent/ca.pem': No such file or directory");
	ctx = td_tls_client_ctx(P("pki/agent1.pem"), key, ca, err,
	    sizeof err);
	assert_null(ctx);
	snprintf(want, sizeof want, "key '%s' does not match certificate "
	    "'%s'", key, P("pki/agent1.pem"));
	assert_string_equal(err, want);

	/* Short or absent message buffers are respected. */
	ctx = td_tls_server_ctx("/nonexistent/c.pem", key, ca, NULL, err, 8);
	assert_null(ctx);
	assert_string_equal(err, "cannot ");
	assert_null(td_tls_server_ctx("/nonexistent/c.pem", key, ca, NULL,
	    NULL, 0));
	assert_null(td_tls_client_ctx(cert, P("pki/agent1.key"), ca, NULL,
	    0));
	assert_int_equal(ERR_peek_error(), 0);

	/* td_tls_error() takes the first queued error and clears them. */
	assert_null(BIO_new_file("/nonexistent/x", "r"));
	td_tls_error(err, sizeof err, "open");
	assert_string_equal(err, "open: No such file or directory");
	assert_int_equal(ERR_peek_error(), 0);
	td_tls_error(err, sizeof err, "idle");
	assert_string_equal(err, "idle: no error reported by OpenSSL");
}

/*
 * A reload (SIGHUP) reads the CA and the CRL again; when the key cannot be
 * read (tdlisten after -u, the key root's and 0600) the certificate and
 * key of the old context serve on, and the new CRL takes effect.
 */
static void
test_server_reload(void **state)
{
	SSL_CTX *old, *sctx, *cctx;
	char err[512], want[PATH_MAX + 128];
	struct conn k;
	bool kept;

	old = server_ctx(NULL);
	/* the key is out of reach: kept, and the CRL refuses agent2 */
	sctx = td_tls_server_reload(old, P("pki/listener.pem"),
	    "/nonexistent/listener.key", P("pki/ca.pem"), P("pki/crl.pem"),
	    &kept, err, sizeof err);
	assert_non_null(sctx);
	assert_true(kept);
	assert_string_equal(err, "cannot read key '/nonexistent/listener.key'"
	    ": No such file or directory");
	assert_int_equal(X509_cmp(SSL_CTX_get0_certificate(sctx),
	    SSL_CTX_get0_certificate(old)), 0);
	assert_int_equal(ERR_peek_error(), 0);
	/* the old context may go: the new one holds its own references */
	SSL_CTX_free(old);
	cctx = client_ctx("pki/agent2", "pki/ca.pem");
	conn_run(&k, cctx, sctx, "localhost");
	assert_int_equal(k.s.state, -1);
	assert_int_equal(SSL_get_verify_result(k.s.ssl),
	    X509_V_ERR_CERT_REVOKED);
	assert_int_equal(k.refused, 1);
	conn_free(&k);
	SSL_CTX_free(cctx);
	/* agent1 gets in, and checks the kept certificate and key */
	cctx = client_ctx("pki/agent1", "pki/ca.pem");
	conn_run(&k, cctx, sctx, "localhost");
	if (k.c.state != 1 || k.s.state != 1)
		fail_msg("client '%s', server '%s'", k.c.err, k.s.err);
	assert_int_equal(SSL_get_verify_result(k.c.ssl), X509_V_OK);
	conn_free(&k);
	SSL_CTX_free(cctx);

	/* all readable: everything read again, nothing kept */
	old = sctx;
	sctx = td_tls_server_reload(old, P("pki/listener.pem"),
	    P("pki/listener.key"), P("pki/ca.pem"), P("pki/crl.pem"), &kept,
	    err, sizeof err);
	assert_non_null(sctx);
	assert_false(kept);
	assert_string_equal(err, "");
	SSL_CTX_free(sctx);
	/* a key that does not match the certificate: the old pair is kept */
	sctx = td_tls_server_reload(old, P("pki/listener.pem"),
	    P("pki/agent1.key"), P("pki/ca.pem"), NULL, &kept, err,
	    sizeof err);
	assert_non_null(sctx);
	assert_true(kept);
	snprintf(want, sizeof want, "key '%s' does not match certificate "
	    "'%s'", P("pki/agent1.key"), P("pki/listener.pem"));
	assert_string_equal(err, want);
	SSL_CTX_free(sctx);
	/* the CA or the CRL unusable: no new context, the old one stays */
	assert_null(td_tls_server_reload(old, P("pki/listener.pem"),
	    P("pki/listener.key"), "/nonexistent/ca.pem", NULL, &kept, err,
	    sizeof err));
	assert_string_equal(err, "cannot read CA certificates "
	    "'/nonexistent/ca.pem': No such file or directory");
	assert_null(td_tls_server_reload(old, P("pki/listener.pem"),
	    "/nonexistent/listener.key", P("pki/ca.pem"),
	    P("expired-crl.pem"), &kept, err, sizeof err));
	snprintf(want, sizeof want, "CRL '%s' has expired",
	    P("expired-crl.pem"));
	assert_string_equal(err, want);
	assert_null(td_tls_server_reload(old, P("pki/listener.pem"),
	    P("pki/listener.key"), P("pki/ca.pem"), P("other/crl.pem"),
	    &kept, err, sizeof err));
	assert_non_null(strstr(err, "is not signed by a CA in"));
	assert_int_equal(ERR_peek_error(), 0);
	SSL_CTX_free(old);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tdcert),
		cmocka_unit_test(test_ctx_settings),
		cmocka_unit_test(test_good_client),
		cmocka_unit_test(test_client_checks_server),
		cmocka_unit_test(test_reject_other_ca),
		cmocka_unit_test(test_reject_expired),
		cmocka_unit_test(test_reject_revoked),
		cmocka_unit_test(test_reject_server_cert_as_client),
		cmocka_unit_test(test_reject_no_cert),
		cmocka_unit_test(test_reject_tls12),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_ctx_errors),
		cmocka_unit_test(test_server_reload),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("tls", tests, group_setup,
	    group_teardown);
}
