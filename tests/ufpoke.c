/*
 * ufpoke: a hostile `uftrace record --host` client for tests/e2e-uftrace.sh.
 *
 *   ufpoke PORT SCENARIO
 *
 * connects to 127.0.0.1:PORT, sends SEND_DIR_NAME "../../ufpoke-evil" and
 * one buffer of thread 1, then what SCENARIO says:
 *   dotdot   SEND_META_DATA "../ufpoke-evil.sym"
 *   slash    SEND_META_DATA "/tmp/ufpoke-evil.sym"
 *   garbage  64 bytes that are no message
 *   huge     a SEND_DATA header of 4 GiB - 1
 *   twice    task.txt twice
 *   hold     waits for a line on stdin, then does dotdot
 *   vanish   closes the connection (no SEND_END)
 *   noinfo   SEND_END without the info file
 *   flood    16 such runs at once, then a 17th connection: closed, and
 *            the 16 are not (tdlisten takes 16 per address); then 200
 *            more, each closed
 * and, but for vanish, waits (30 s at most) for the listener to close the
 * connection.  Exit 0 when it did (or for vanish), 1 when it did not, 2 on
 * a local error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int ufpoke_fd;
static int ufpoke_gone;	/* the listener closed while we wrote */

static void
ufpoke_send(const void *p, size_t n)
{
	const char *c = p;
	ssize_t w;

	while (n > 0 && !ufpoke_gone) {
		w = write(ufpoke_fd, c, n);
		if (w == -1 && (errno == EPIPE || errno == ECONNRESET)) {
			ufpoke_gone = 1;
			return;
		}
		if (w <= 0) {
			perror("ufpoke: write");
			exit(2);
		}
		c += w;
		n -= (size_t)w;
	}
}

/* A message header {be16 0xface, be16 type, be32 len}. */
static void
ufpoke_hdr(uint16_t type, uint32_t len)
{
	uint8_t h[8];
	uint16_t m = htons(0xface), t = htons(type);
	uint32_t l = htonl(len);

	memcpy(h, &m, 2);
	memcpy(h + 2, &t, 2);
	memcpy(h + 4, &l, 4);
	ufpoke_send(h, sizeof h);
}

static void
ufpoke_meta(const char *name, const char *data)
{
	uint32_t nl = htonl((uint32_t)strlen(name));

	ufpoke_hdr(106, 4 + (uint32_t)strlen(name) + (uint32_t)strlen(data));
	ufpoke_send(&nl, 4);
	ufpoke_send(name, strlen(name));
	ufpoke_send(data, strlen(data));
}

/* Whether the listener closes the connection within 30 s. */
static int
ufpoke_closed(void)
{
	struct pollfd pfd = { ufpoke_fd, POLLIN, 0 };
	char buf[256];
	ssize_t n;

	for (;;) {
		if (ufpoke_gone)
			return 1;
		if (poll(&pfd, 1, 30000) <= 0)
			return 0;
		n = read(ufpoke_fd, buf, sizeof buf);
		if (n == 0 || (n == -1 && errno == ECONNRESET))
			return 1;
		if (n == -1)
			return 0;
	}
}

static int
ufpoke_connect(const struct sockaddr_in *sin)
{
	ufpoke_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (ufpoke_fd == -1 || connect(ufpoke_fd, (const struct sockaddr *)sin,
	    sizeof *sin) == -1) {
		perror("ufpoke: connect");
		return -1;
	}
	return 0;
}

/* SEND_DIR_NAME "../../ufpoke-evil" and 32 bytes of thread 1. */
static void
ufpoke_begin(void)
{
	static const char dir[] = "../../ufpoke-evil";
	uint8_t data[4 + 32];
	uint32_t tid = htonl(1);

	ufpoke_hdr(101, sizeof dir - 1);
	ufpoke_send(dir, sizeof dir - 1);
	memcpy(data, &tid, 4);
	memset(data + 4, 0x5a, sizeof data - 4);
	ufpoke_hdr(102, sizeof data);
	ufpoke_send(data, sizeof data);
}

/*
 * FLOOD_N runs from this address at once, then one more connection: that
 * one is closed (the listener's cap per address), the others are not.
 */
#define FLOOD_N	16
#define FLOOD_MORE	200
static int
ufpoke_flood(const struct sockaddr_in *sin)
{
	struct pollfd pfd;
	int fds[FLOOD_N], i;

	for (i = 0; i < FLOOD_N; i++) {
		if (ufpoke_connect(sin) == -1)
			return 2;
		ufpoke_begin();
		fds[i] = ufpoke_fd;
	}
	if (ufpoke_connect(sin) == -1)
		return 2;
	if (!ufpoke_closed()) {
		fprintf(stderr, "ufpoke: flood: connection %d not closed\n",
		    FLOOD_N + 1);
		return 1;
	}
	close(ufpoke_fd);
	/* and FLOOD_MORE more, each refused: the log stays bounded */
	for (i = 0; i < FLOOD_MORE; i++) {
		if (ufpoke_connect(sin) == -1)
			return 2;
		if (!ufpoke_closed()) {
			fprintf(stderr, "ufpoke: flood: connection %d not "
			    "closed\n", FLOOD_N + 2 + i);
			return 1;
		}
		close(ufpoke_fd);
	}
	for (i = 0; i < FLOOD_N; i++) {
		pfd.fd = fds[i];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) != 0) {
			fprintf(stderr, "ufpoke: flood: connection %d closed\n",
			    i + 1);
			return 1;
		}
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin;
	const char *s;
	uint8_t data[4 + 32];
	char line[64];

	if (argc != 3) {
		fprintf(stderr, "usage: ufpoke PORT SCENARIO\n");
		return 2;
	}
	s = argv[2];
	signal(SIGPIPE, SIG_IGN);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(argv[1]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (strcmp(s, "flood") == 0)
		return ufpoke_flood(&sin);
	if (ufpoke_connect(&sin) == -1)
		return 2;
	ufpoke_begin();
	if (strcmp(s, "hold") == 0) {
		if (fgets(line, sizeof line, stdin) == NULL)
			return 2;
		s = "dotdot";
	}
	if (strcmp(s, "dotdot") == 0)
		ufpoke_meta("../ufpoke-evil.sym", "# symbols: 0\n");
	else if (strcmp(s, "slash") == 0)
		ufpoke_meta("/tmp/ufpoke-evil.sym", "# symbols: 0\n");
	else if (strcmp(s, "garbage") == 0) {
		memset(data, 0xa5, sizeof data);
		ufpoke_send(data, sizeof data);
		ufpoke_send(data, sizeof data);
	} else if (strcmp(s, "huge") == 0)
		ufpoke_hdr(102, 0xffffffffu);
	else if (strcmp(s, "twice") == 0) {
		ufpoke_meta("task.txt", "SESS timestamp=0.0 pid=1\n");
		ufpoke_meta("task.txt", "SESS timestamp=0.0 pid=1\n");
	} else if (strcmp(s, "vanish") == 0) {
		close(ufpoke_fd);
		return 0;
	} else if (strcmp(s, "noinfo") == 0)
		ufpoke_hdr(107, 0);
	else {
		fprintf(stderr, "ufpoke: unknown scenario '%s'\n", s);
		return 2;
	}
	if (!ufpoke_closed()) {
		fprintf(stderr, "ufpoke: %s: the listener did not close\n", s);
		return 1;
	}
	return 0;
}
