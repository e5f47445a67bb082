/*
 * selftime.c: /usr/bin/time that keeps a program's own CPU time apart from
 * its children's.
 *
 * bench/concurrent.sh runs every agent, recorder and listener under it.
 * tdagent -F runs the workload (sh, then dd) as its own child, so the
 * times /usr/bin/time reports (wait4: the process plus every child it
 * reaped) would count dd's CPU as the agent's.  selftime forks and execs
 * the command, waits for it to exit without reaping it
 * (waitid(WNOWAIT)), reads the zombie's /proc/PID/stat, where utime and
 * stime are the process's own (all its threads) and cutime and cstime
 * those of the children it reaped, then reaps it with wait4 for the peak
 * RSS (the largest of the process and its reaped children).
 *
 * It also reads the zombie's /proc/PID/schedstat (its main thread): the
 * time it spent runnable but waiting for a CPU, a measure of CPU
 * starvation, and /proc/PID/status for its context switches.
 *
 * usage: selftime OUTFILE [PIDFILE] -- COMMAND [ARG]...
 * OUTFILE gets one line:
 *	WALL_S SELF_USER_S SELF_SYS_S CHILD_USER_S CHILD_SYS_S MAXRSS_KB STATUS
 *	RUN_DELAY_S VOLUNTARY_SWITCHES INVOLUNTARY_SWITCHES
 * STATUS is the exit status, or 128 + the signal that killed it; the last
 * three are -1 where /proc did not tell.  PIDFILE,
 * when given, gets the command's process ID as soon as it runs.  Like
 * /usr/bin/time, selftime ignores SIGINT and SIGQUIT (signal the command
 * itself); its own exit status is the command's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Fields 14-17 of /proc/PID/stat (utime stime cutime cstime), in ticks. */
static int
proc_times(pid_t pid, unsigned long long t[4])
{
	char path[64], buf[4096], *p;
	size_t n;
	FILE *f;
	int i;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: skip past it */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	p++;
	/* field 3 (state) is next; utime is field 14 */
	for (i = 3; i < 14; i++) {
		while (*p == ' ')
			p++;
		while (*p != ' ' && *p != '\0')
			p++;
	}
	for (i = 0; i < 4; i++) {
		char *end;

		t[i] = strtoull(p, &end, 10);
		if (end == p)
			return -1;
		p = end;
	}
	return 0;
}

/* The second field of /proc/PID/schedstat (run delay, ns); -1 if unknown. */
static double
proc_run_delay(pid_t pid)
{
	unsigned long long exec_ns, delay_ns;
	char path[64];
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	ok = fscanf(f, "%llu %llu", &exec_ns, &delay_ns) == 2;
	fclose(f);
	return ok ? delay_ns / 1e9 : -1;
}

/* Context switches from /proc/PID/status; -1 if unknown. */
static void
proc_switches(pid_t pid, long *vol, long *invol)
{
	char path[64], line[256];
	FILE *f;

	*vol = *invol = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		sscanf(line, "voluntary_ctxt_switches: %ld", vol);
		sscanf(line, "nonvoluntary_ctxt_switches: %ld", invol);
	}
	fclose(f);
}

int
main(int argc, char **argv)
{
	unsigned long long t[4];
	struct rusage ru;
	siginfo_t si;
	const char *out, *pidfile = NULL;
	double t0, wall, delay, hz = (double)sysconf(_SC_CLK_TCK);
	long vol, invol;
	int status, code, first;
	pid_t pid;
	FILE *f;

	if (argc >= 4 && strcmp(argv[2], "--") == 0)
		first = 3;
	else if (argc >= 5 && strcmp(argv[3], "--") == 0) {
		pidfile = argv[2];
		first = 4;
	} else {
		fprintf(stderr, "usage: selftime OUTFILE [PIDFILE] -- COMMAND "
		    "[ARG]...\n");
		return 127;
	}
	out = argv[1];
	t0 = now();
	if ((pid = fork()) == -1) {
		fprintf(stderr, "selftime: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		execvp(argv[first], argv + first);
		fprintf(stderr, "selftime: cannot run '%s': %s\n", argv[first],
		    strerror(errno));
		_exit(127);
	}
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	if (pidfile != NULL && (f = fopen(pidfile, "w")) != NULL) {
		fprintf(f, "%d\n", (int)pid);
		fclose(f);
	}
	memset(&si, 0, sizeof si);
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) == -1) {
		if (errno != EINTR) {
			fprintf(stderr, "selftime: waitid: %s\n",
			    strerror(errno));
			return 127;
		}
	}
	wall = now() - t0;
	if (proc_times(pid, t) == -1)
		memset(t, 0, sizeof t);
	delay = proc_run_delay(pid);
	proc_switches(pid, &vol, &invol);
	while (wait4(pid, &status, 0, &ru) == -1) {
		if (errno != EINTR) {
			fprintf(stderr, "selftime: wait4: %s\n",
			    strerror(errno));
			return 127;
		}
	}
	code = WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status);
	if ((f = fopen(out, "w")) == NULL) {
		fprintf(stderr, "selftime: %s: %s\n", out, strerror(errno));
		return 127;
	}
	fprintf(f, "%.3f %.2f %.2f %.2f %.2f %ld %d %.3f %ld %ld\n", wall,
	    t[0] / hz, t[1] / hz, t[2] / hz, t[3] / hz, ru.ru_maxrss, code,
	    delay, vol, invol);
	fclose(f);
	return code;
}
