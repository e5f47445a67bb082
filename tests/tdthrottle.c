/*
 * tdthrottle.c: makes a process slow, as valgrind or a loaded box would,
 * without changing what it runs: it lets PID run RUN_US microseconds of
 * every PERIOD_US and stops it (SIGSTOP) for the rest, until PID is gone or
 * tdthrottle gets SIGTERM or SIGINT (then PID is let run again: SIGCONT).
 *
 *	tdthrottle PID RUN_US PERIOD_US
 *
 * Exit 0, or 2 on a usage error or a PID it cannot signal.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t tdthrottle_stop;

static void
tdthrottle_sig(int sig)
{
	(void)sig;
	tdthrottle_stop = 1;
}

/* Sleep us microseconds (a signal cuts it short). */
static void
tdthrottle_sleep(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

int
main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = tdthrottle_sig };
	long pid, run, period;

	if (argc != 4 || (pid = strtol(argv[1], NULL, 10)) <= 0 ||
	    (run = strtol(argv[2], NULL, 10)) <= 0 ||
	    (period = strtol(argv[3], NULL, 10)) <= run) {
		fprintf(stderr, "usage: tdthrottle PID RUN_US PERIOD_US\n");
		return 2;
	}
	if (kill((pid_t)pid, 0) == -1) {
		perror("tdthrottle: kill");
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	while (!tdthrottle_stop) {
		if (kill((pid_t)pid, SIGSTOP) == -1)
			break;		/* gone */
		tdthrottle_sleep(period - run);
		if (kill((pid_t)pid, SIGCONT) == -1)
			break;
		tdthrottle_sleep(run);
	}
	kill((pid_t)pid, SIGCONT);
	return 0;
}
