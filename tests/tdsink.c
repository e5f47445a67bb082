/*
 * tdsink.c: the host's side of tests/e2e-guest-host.sh's causality check.
 * It connects to the Unix socket QEMU serves a guest's second
 * virtio-serial port on and makes one getppid() system call for every
 * byte the guest writes there, so that each guest write has a host event
 * it causes.  It stops after N bytes (or at the end of the stream) and
 * prints how many it took.
 *
 *	tdsink SOCKET N
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct sockaddr_un sun;
	char buf[256];
	long n, got = 0;
	ssize_t r, i;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: tdsink SOCKET N\n");
		return 2;
	}
	n = atol(argv[2]);
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(argv[1]) >= sizeof sun.sun_path) {
		fprintf(stderr, "tdsink: path too long\n");
		return 2;
	}
	memcpy(sun.sun_path, argv[1], strlen(argv[1]));
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		fprintf(stderr, "tdsink: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while (got < n) {
		r = read(fd, buf, (size_t)(n - got) < sizeof buf ?
		    (size_t)(n - got) : sizeof buf);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (i = 0; i < r; i++)
			syscall(SYS_getppid);
		got += r;
	}
	printf("tdsink: %ld bytes\n", got);
	return got == n ? 0 : 1;
}
