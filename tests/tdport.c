/*
 * tdport.c: free ports for the end-to-end tests, as the kernel says.
 *
 *	tdport [N]
 *
 * prints P such that the TCP and the UDP ports P to P + N - 1 (default
 * N = 1) are free on every address: tdport binds each of them (the
 * wildcard address, IPv6 and IPv4) without SO_REUSEADDR, so a port that
 * anything holds, a listener, a connection or its TIME_WAIT, is not free,
 * and closes them again.  P is drawn at random below the kernel's
 * ephemeral range (/proc/sys/net/ipv4/ip_local_port_range) and from 10000
 * up: no outgoing connection takes a port there between this check and
 * the test's bind, as it could in the ephemeral range.  Exit 1 when no
 * free run was found in 200 draws.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TDPORT_LOW	10000
#define TDPORT_MAX_N	1000
#define TDPORT_DRAWS	200

/* The kernel's ephemeral range; the default 32768-60999 when unreadable. */
static void
tdport_ephemeral(long *lo, long *hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	*lo = 32768;
	*hi = 60999;
	if (f == NULL)
		return;
	if (fscanf(f, "%ld %ld", lo, hi) != 2) {
		*lo = 32768;
		*hi = 60999;
	}
	fclose(f);
}

/* Bind port of type on the wildcard address (IPv6 and IPv4): the fd, or -1. */
static int
tdport_bind(int type, long port)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	int fd, off = 0;

	fd = socket(AF_INET6, type | SOCK_CLOEXEC, 0);
	if (fd != -1) {
		memset(&s6, 0, sizeof s6);
		s6.sin6_family = AF_INET6;
		s6.sin6_addr = in6addr_any;
		s6.sin6_port = htons((unsigned short)port);
		/* dual stack: the IPv4 port is taken with it */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
		if (bind(fd, (struct sockaddr *)&s6, sizeof s6) == 0)
			return fd;
		close(fd);
		if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL)
			return -1;
	}
	fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	memset(&s4, 0, sizeof s4);
	s4.sin_family = AF_INET;
	s4.sin_addr.s_addr = htonl(INADDR_ANY);
	s4.sin_port = htons((unsigned short)port);
	if (bind(fd, (struct sockaddr *)&s4, sizeof s4) == 0)
		return fd;
	close(fd);
	return -1;
}

/* Whether TCP and UDP ports base to base + n - 1 are all free. */
static int
tdport_free(long base, long n)
{
	static int fds[2 * TDPORT_MAX_N];
	int nfd = 0, ok = 1;
	long p;

	for (p = base; p < base + n && ok; p++) {
		if ((fds[nfd] = tdport_bind(SOCK_STREAM, p)) == -1)
			ok = 0;
		else if ((fds[++nfd] = tdport_bind(SOCK_DGRAM, p)) == -1)
			ok = 0;
		else
			nfd++;
	}
	while (nfd > 0)
		close(fds[--nfd]);
	return ok;
}

int
main(int argc, char **argv)
{
	long n = 1, lo, hi, top, base;
	int i;

	if (argc > 2 || (argc == 2 && ((n = atol(argv[1])) < 1 ||
	    n > TDPORT_MAX_N))) {
		fprintf(stderr, "usage: tdport [N] (N from 1 to %d)\n",
		    TDPORT_MAX_N);
		return 2;
	}
	tdport_ephemeral(&lo, &hi);
	/* below the ephemeral range; above it when that leaves no room */
	top = lo - n;
	if (top < TDPORT_LOW) {
		lo = hi + 1 > TDPORT_LOW ? hi + 1 : TDPORT_LOW;
		top = 65536 - n;
	} else
		lo = TDPORT_LOW;
	if (top < lo) {
		fprintf(stderr, "tdport: no room for %ld ports\n", n);
		return 1;
	}
	srand((unsigned)time(NULL) ^ (unsigned)getpid() << 8);
	for (i = 0; i < TDPORT_DRAWS; i++) {
		base = lo + rand() % (top - lo + 1);
		if (tdport_free(base, n)) {
			printf("%ld\n", base);
			return 0;
		}
	}
	fprintf(stderr, "tdport: no %ld free ports in %ld-%ld\n", n, lo,
	    top + n - 1);
	return 1;
}
