/*
 * conn-target.c: where the agent's connections go (see conn.h): -h, -p and
 * --server-name parsed into a target, and a target dialed over TCP, vsock
 * or its serial device, before conn.c's preamble and TLS.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "conn.h"
#include "banned.h"

/* The transport's name, for messages. */
const char *
conn_kind_name(enum conn_kind kind)
{
	switch (kind) {
	case CONN_VSOCK:
		return "vsock";
	case CONN_SERIAL:
		return "serial";
	default:
		return "TCP";
	}
}

/* Where t leads, for messages (conn.h). */
void
conn_target_describe(const struct conn_target *t, char *buf, size_t len)
{
	switch (t->kind) {
	case CONN_VSOCK:
		snprintf(buf, len, "vsock CID %u port %s", t->cid, t->port);
		break;
	case CONN_SERIAL:
		snprintf(buf, len, "serial device '%s'", t->addr);
		break;
	default:
		snprintf(buf, len, "'%s' port %s", t->addr, t->port);
		break;
	}
}

/* Parse -h, -p and --server-name into a target (conn.h). */
int
conn_target_parse(const char *spec, const char *port,
    const char *server_name, bool tls, struct conn_target *t, char *err,
    size_t errlen)
{
	unsigned long long cid;
	char *end;

	memset(t, 0, sizeof *t);
	t->devfd = -1;
	snprintf(t->port, sizeof t->port, "%s", port != NULL ? port : "");
	if (strncmp(spec, "serial:", 7) == 0) {
		t->kind = CONN_SERIAL;
		spec += 7;
	} else if (strncmp(spec, "vsock:", 6) == 0) {
		t->kind = CONN_VSOCK;
		spec += 6;
	} else
		t->kind = CONN_TCP;
	if (*spec == '\0' || strlen(spec) >= sizeof t->addr) {
		snprintf(err, errlen, "no %s address in '%s'",
		    conn_kind_name(t->kind), spec);
		return -1;
	}
	memcpy(t->addr, spec, strlen(spec) + 1);
	if (t->kind == CONN_VSOCK) {
		errno = 0;
		cid = strtoull(spec, &end, 10);
		if (errno != 0 || *end != '\0' || cid > UINT32_MAX) {
			snprintf(err, errlen, "bad vsock context id '%s'",
			    spec);
			return -1;
		}
		t->cid = (uint32_t)cid;
	}
	if (t->kind != CONN_SERIAL) {
		errno = 0;
		if (t->port[0] == '\0' || (t->kind == CONN_VSOCK &&
		    (strtoul(t->port, &end, 10) > UINT32_MAX || *end != '\0'))) {
			snprintf(err, errlen, "bad port '%s'", t->port);
			return -1;
		}
	}
	if (server_name != NULL && *server_name != '\0') {
		if (strlen(server_name) >= sizeof t->server_name) {
			snprintf(err, errlen, "server name too long");
			return -1;
		}
		memcpy(t->server_name, server_name, strlen(server_name) + 1);
	} else if (t->kind == CONN_TCP) {
		snprintf(t->server_name, sizeof t->server_name, "%.*s",
		    (int)sizeof t->server_name - 1, t->addr);
	} else if (tls) {
		snprintf(err, errlen, "over %s there is no host name to check "
		    "the listener's certificate against: give --server-name",
		    conn_kind_name(t->kind));
		return -1;
	}
	return 0;
}

/*
 * Wait up to ms for a socket connect() under way to end; 0 connected, -1
 * with errno.
 */
static int
conn_connect_wait(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLOUT, 0 };
	socklen_t sl;
	int soerr;

	if (poll(&pfd, 1, ms) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	sl = sizeof soerr;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == -1)
		return -1;
	errno = soerr;
	return soerr == 0 ? 0 : -1;
}

/* A TCP connection to t's host (a name, an address, "[v6]") and port. */
static int
conn_dial_tcp(const struct conn_target *t, int timeout, char *err,
    size_t errlen)
{
	struct addrinfo hints, *res, *ai;
	char host[sizeof t->addr];
	size_t hl = strlen(t->addr);
	int fd = -1, e, one = 1;

	/* "[::1]" is how an IPv6 literal is written next to a port */
	if (hl > 2 && t->addr[0] == '[' && t->addr[hl - 1] == ']')
		snprintf(host, sizeof host, "%.*s", (int)(hl - 2), t->addr + 1);
	else
		snprintf(host, sizeof host, "%s", t->addr);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((e = getaddrinfo(host, t->port, &hints, &res)) != 0) {
		snprintf(err, errlen, "cannot resolve '%s': %s", t->addr,
		    gai_strerror(e));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
		    (errno == EINPROGRESS &&
		    conn_connect_wait(fd, timeout * 1000) == 0))
			break;
		e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	freeaddrinfo(res);
	if (fd == -1) {
		snprintf(err, errlen, "cannot connect to '%s' port %s: %s",
		    t->addr, t->port, strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* An AF_VSOCK stream to t's context id and port. */
static int
conn_dial_vsock(const struct conn_target *t, int timeout, char *err,
    size_t errlen)
{
	struct sockaddr_vm sa;
	int fd;

	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1) {
		snprintf(err, errlen, "cannot make a vsock socket: %s",
		    errno == EAFNOSUPPORT ? "this kernel has no vsock" :
		    strerror(errno));
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.svm_family = AF_VSOCK;
	sa.svm_cid = t->cid;
	sa.svm_port = (unsigned int)strtoul(t->port, NULL, 10);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ||
	    (errno == EINPROGRESS && conn_connect_wait(fd, timeout * 1000) ==
	    0))
		return fd;
	snprintf(err, errlen, "cannot connect to vsock %" PRIu32 " port %s: %s",
	    t->cid, t->port, strerror(errno));
	close(fd);
	return -1;
}

/* Open a serial target's device while still root (conn.h). */
int
conn_target_open(struct conn_target *t, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (t->kind != CONN_SERIAL || t->devfd != -1)
		return 0;
	fd = open(t->addr, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1) {
		snprintf(err, errlen, "cannot open '%s': %s", t->addr,
		    strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISCHR(st.st_mode)) {
		snprintf(err, errlen, "'%s' is not a character device",
		    t->addr);
		close(fd);
		return -1;
	}
	t->devfd = fd;
	return 0;
}

/* Close what conn_target_open() opened. */
void
conn_target_close(struct conn_target *t)
{
	if (t->devfd != -1)
		close(t->devfd);
	t->devfd = -1;
}

/* The serial device of t, for one connection (its own descriptor). */
static int
conn_dial_serial(const struct conn_target *t, char *err, size_t errlen)
{
	int fd;

	if (t->devfd == -1) {
		snprintf(err, errlen, "'%s' is not open", t->addr);
		return -1;
	}
	if ((fd = fcntl(t->devfd, F_DUPFD_CLOEXEC, 3)) == -1) {
		snprintf(err, errlen, "dup: %s", strerror(errno));
		return -1;
	}
	return fd;
}

/* Dial t's transport: a descriptor, or -1 with err (conn.h). */
int
conn_target_dial(const struct conn_target *t, int timeout,
    int user_timeout_ms, char *err, size_t errlen)
{
	int fd;

	switch (t->kind) {
	case CONN_TCP:
		fd = conn_dial_tcp(t, timeout, err, errlen);
		/* a link that stops acknowledging is given up on */
		if (fd != -1)
			setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
			    &user_timeout_ms, sizeof user_timeout_ms);
		return fd;
	case CONN_VSOCK:
		return conn_dial_vsock(t, timeout, err, errlen);
	default:
		return conn_dial_serial(t, err, errlen);
	}
}
