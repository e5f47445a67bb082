/*
 * tdpoke.c: a test workload of rare, recognizable events: N getppid()
 * system calls, PAUSE microseconds apart.  Every agent that records
 * raw_syscalls with the filter "id == <getppid>" sees the same N events, so
 * their timestamps can be compared across files.  With BURST > 1 each of
 * the N occurrences is BURST calls in a row: the later ones find the
 * kernel's tracing code and data in the caches (see tests/tsync-err.awk).
 * With FILE, each occurrence then writes one byte to FILE (a guest's
 * virtio-serial port, whose bytes make work on the host: see
 * tests/e2e-guest-host.sh).
 *
 *	tdpoke N PAUSE_US [BURST [FILE]]
 *
 * With TDPOKE_WAIT=PATH in the environment it first waits for PATH to
 * exist (polling with access(), no getppid), so that a test can start a
 * recorder with it and say when the events begin.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct timespec ts;
	long i, j, n, pause, burst = 1;
	int fd = -1;

	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: tdpoke N PAUSE_US [BURST [FILE]]\n");
		return 2;
	}
	n = atol(argv[1]);
	pause = atol(argv[2]);
	if (argc >= 4)
		burst = atol(argv[3]);
	if (argc == 5 && (fd = open(argv[4], O_WRONLY | O_CLOEXEC)) == -1) {
		perror(argv[4]);
		return 1;
	}
	if (getenv("TDPOKE_WAIT") != NULL) {
		struct timespec w = { 0, 20 * 1000 * 1000 };

		while (access(getenv("TDPOKE_WAIT"), F_OK) == -1)
			nanosleep(&w, NULL);
	}
	ts.tv_sec = pause / 1000000;
	ts.tv_nsec = (pause % 1000000) * 1000;
	for (i = 0; i < n; i++) {
		for (j = 0; j < burst; j++)
			syscall(SYS_getppid);
		if (fd != -1 && write(fd, "p", 1) != 1) {
			perror(argv[4]);
			return 1;
		}
		nanosleep(&ts, NULL);
	}
	return 0;
}
