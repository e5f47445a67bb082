/*
 * tdslow.c: a slowloris crowd for tdlisten's admission tests.  It opens
 * TCP connections from given local addresses (any 127.x.y.z is a distinct
 * source on loopback) and holds them without ever finishing a TLS
 * handshake, then waits: each connection the listener closes is counted,
 * never reopened.
 *
 *	tdslow [--cert F --key F --ca F] HOST PORT STATUSFILE MODE:ADDR:N...
 *
 * MODE is idle (send nothing), hello (send the first 9 bytes of a TLS
 * ClientHello that announces 512, then stall), tls (finish the TLS
 * handshake with the certificate given, then send no HELLO: an
 * authenticated agent that makes up its mind slowly; the listener's
 * certificate must match HOST) or trickle (an HTTP request line and a
 * header begun, then one byte more of it every second: a request that is
 * never finished, each byte well within any per-read timeout).  A
 * connection the listener closes is seen when a byte cannot be sent or
 * its end is read.  The groups are opened in
 * the order given, one connection after the other.  STATUSFILE is
 * rewritten (atomically) after every change: "opened N closed M", M the
 * connections the listener closed.  On SIGTERM or SIGINT the rest are
 * closed by tdslow and the last line says "done"; exit 0, or 2 for a usage
 * or set-up error (a connection that cannot be opened is one).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "tls.h"

#define SLOW_MAX	4096

static volatile sig_atomic_t slow_stop;
static struct pollfd slow_fds[SLOW_MAX];
static SSL *slow_ssl[SLOW_MAX];
static char slow_trickle[SLOW_MAX];	/* 1: trickle mode */
static SSL_CTX *slow_ctx;
static int slow_n;
static int slow_opened;
static int slow_closed;
static const char *slow_status;

static void
slow_signal(int sig)
{
	slow_stop = 1;
}

/* Rewrite the status file: "opened N closed M[ done]". */
static void
slow_write_status(int done)
{
	char tmp[4096];
	FILE *fp;

	snprintf(tmp, sizeof tmp, "%s.tmp", slow_status);
	if ((fp = fopen(tmp, "w")) == NULL)
		return;
	fprintf(fp, "opened %d closed %d%s\n", slow_opened, slow_closed,
	    done ? " done" : "");
	fclose(fp);
	rename(tmp, slow_status);
}

/* Finish a TLS handshake on fd as a client of slow_ctx; NULL on failure. */
static SSL *
slow_tls(int fd, const char *host)
{
	char err[512];
	SSL *ssl;

	if ((ssl = SSL_new(slow_ctx)) == NULL ||
	    td_tls_client_prepare(ssl, host, err, sizeof err) == -1 ||
	    SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) {
		td_tls_error(err, sizeof err, "TLS handshake");
		fprintf(stderr, "tdslow: %s\n", err);
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

/* One connection from addr to host:port; -1 on failure. */
static int
slow_dial(const char *addr, const char *host, int port, int hello,
    int trickle)
{
	char req[256];
	int len;
	static const unsigned char ch[9] = {
		0x16, 0x03, 0x01, 0x02, 0x00,	/* handshake record, 512 */
		0x01, 0x00, 0x01, 0xfc,		/* ClientHello, 508 */
	};
	struct sockaddr_in src, dst;
	int fd;

	memset(&src, 0, sizeof src);
	memset(&dst, 0, sizeof dst);
	src.sin_family = dst.sin_family = AF_INET;
	dst.sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, host, &dst.sin_addr) != 1) {
		fprintf(stderr, "tdslow: bad address '%s' or '%s'\n", addr,
		    host);
		return -1;
	}
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&src, sizeof src) == -1 ||
	    connect(fd, (struct sockaddr *)&dst, sizeof dst) == -1) {
		fprintf(stderr, "tdslow: cannot connect from %s: %s\n", addr,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (hello && send(fd, ch, sizeof ch, MSG_NOSIGNAL) != sizeof ch) {
		fprintf(stderr, "tdslow: cannot send: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	len = snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\nHost: "
	    "%s\r\nX-Slow: ", host);
	/* refused at once: the send may fail, the next poll counts it */
	if (trickle)
		send(fd, req, (size_t)len, MSG_NOSIGNAL);
	return fd;
}

/* One byte more on every trickling connection (a failure: it is closed). */
static void
slow_trickle_all(void)
{
	int i, changed = 0;

	for (i = 0; i < slow_n; i++) {
		if (!slow_trickle[i] || slow_fds[i].fd < 0 ||
		    send(slow_fds[i].fd, "a", 1, MSG_NOSIGNAL) == 1)
			continue;
		close(slow_fds[i].fd);
		slow_fds[i].fd = -1;
		slow_closed++;
		changed = 1;
	}
	if (changed)
		slow_write_status(0);
}

/* Count and close the connections the listener closed. */
static void
slow_reap(void)
{
	char buf[256];
	ssize_t r;
	int i, changed = 0;

	for (i = 0; i < slow_n; i++) {
		if (slow_fds[i].fd < 0 || slow_fds[i].revents == 0)
			continue;
		r = recv(slow_fds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
		if (r > 0 || (r == -1 && errno == EAGAIN))
			continue;	/* an alert before the close */
		close(slow_fds[i].fd);
		slow_fds[i].fd = -1;
		slow_closed++;
		changed = 1;
	}
	if (changed)
		slow_write_status(0);
}

int
main(int argc, char **argv)
{
	char mode[16], addr[64];
	static const struct option longopts[] = {
		{ "cert", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "ca", required_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cert = NULL, *key = NULL, *ca = NULL;
	char err[512];
	int i, k, n, fd, port, ch;
	time_t last;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch == 'c')
			cert = optarg;
		else if (ch == 'k')
			key = optarg;
		else if (ch == 'a')
			ca = optarg;
		else
			return 2;
	}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 5) {
		fprintf(stderr, "usage: tdslow [--cert F --key F --ca F] HOST "
		    "PORT STATUSFILE MODE:ADDR:N...\n");
		return 2;
	}
	if (cert != NULL && (slow_ctx = td_tls_client_ctx(cert, key, ca, err,
	    sizeof err)) == NULL) {
		fprintf(stderr, "tdslow: %s\n", err);
		return 2;
	}
	port = atoi(argv[2]);
	slow_status = argv[3];
	signal(SIGTERM, slow_signal);
	signal(SIGINT, slow_signal);
	signal(SIGPIPE, SIG_IGN);
	for (i = 4; i < argc; i++) {
		if (sscanf(argv[i], "%15[^:]:%63[^:]:%d", mode, addr, &n) != 3 ||
		    (strcmp(mode, "idle") != 0 && strcmp(mode, "hello") != 0 &&
		    strcmp(mode, "tls") != 0 && strcmp(mode, "trickle") != 0) ||
		    (strcmp(mode, "tls") == 0 && slow_ctx == NULL) ||
		    n < 1 || slow_n + n > SLOW_MAX) {
			fprintf(stderr, "tdslow: bad group '%s'\n", argv[i]);
			return 2;
		}
		for (k = 0; k < n; k++) {
			fd = slow_dial(addr, argv[1], port,
			    strcmp(mode, "hello") == 0,
			    strcmp(mode, "trickle") == 0);
			if (fd == -1)
				return 2;
			if (strcmp(mode, "tls") == 0 &&
			    (slow_ssl[slow_n] = slow_tls(fd, argv[1])) == NULL)
				return 2;
			slow_fds[slow_n].fd = fd;
			slow_fds[slow_n].events = POLLIN | POLLRDHUP;
			slow_trickle[slow_n] = strcmp(mode, "trickle") == 0;
			slow_n++;
			slow_opened++;
			/* take in the refusals as they come */
			if (poll(slow_fds, slow_n, 0) > 0)
				slow_reap();
		}
	}
	slow_write_status(0);
	last = time(NULL);
	while (!slow_stop) {
		if (poll(slow_fds, slow_n, 200) > 0)
			slow_reap();
		if (time(NULL) != last) {
			last = time(NULL);
			slow_trickle_all();
		}
	}
	for (i = 0; i < slow_n; i++) {
		SSL_free(slow_ssl[i]);
		if (slow_fds[i].fd >= 0)
			close(slow_fds[i].fd);
	}
	SSL_CTX_free(slow_ctx);
	slow_write_status(1);
	return 0;
}
