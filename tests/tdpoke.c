/*
 * tdpoke.c: a test workload of rare, recognizable events: N getppid()
 * system calls, PAUSE microseconds apart.  Every agent that records
 * raw_syscalls with the filter "id == <getppid>" sees the same N events, so
 * their timestamps can be compared across files.  With BURST > 1 each of
 * the N occurrences is BURST calls in a row: the later ones find the
 * kernel's tracing code and data in the caches (see tests/tsync-err.awk).
 *
 *	tdpoke N PAUSE_US [BURST]
 */
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

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: tdpoke N PAUSE_US [BURST]\n");
		return 2;
	}
	n = atol(argv[1]);
	pause = atol(argv[2]);
	if (argc == 4)
		burst = atol(argv[3]);
	ts.tv_sec = pause / 1000000;
	ts.tv_nsec = (pause % 1000000) * 1000;
	for (i = 0; i < n; i++) {
		for (j = 0; j < burst; j++)
			syscall(SYS_getppid);
		nanosleep(&ts, NULL);
	}
	return 0;
}
