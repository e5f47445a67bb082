/*
 * tdpoke.c: a test workload of rare, recognizable events: N getppid()
 * system calls, PAUSE microseconds apart.  Every agent that records
 * raw_syscalls with the filter "id == <getppid>" sees the same N events, so
 * their timestamps can be compared across files.
 *
 *	tdpoke N PAUSE_US
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
	long i, n, pause;

	if (argc != 3) {
		fprintf(stderr, "usage: tdpoke N PAUSE_US\n");
		return 2;
	}
	n = atol(argv[1]);
	pause = atol(argv[2]);
	ts.tv_sec = pause / 1000000;
	ts.tv_nsec = (pause % 1000000) * 1000;
	for (i = 0; i < n; i++) {
		syscall(SYS_getppid);
		nanosleep(&ts, NULL);
	}
	return 0;
}
