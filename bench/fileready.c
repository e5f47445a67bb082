/*
 * fileready.c: stop a streaming recorder and time how long its listener
 * takes to complete the output file.
 *
 * bench/stream.sh runs it when the workload is over.  It sends SIGINT to
 * the recorder (PID), then waits for two things and prints when each
 * happened, in seconds after the signal:
 *
 *	exit	the recorder process terminated (a pidfd becomes readable at
 *		once: exact)
 *	file	the listener's output file is complete:
 *		tdlisten   a "*.dat" file in DIR or a directory below it
 *			   (tdlisten writes NAME.dat.part and renames it
 *			   when the file is finished)
 *		trace-cmd  a "trace.*.dat" file in DIR while no per-CPU temp
 *			   file "trace.*.cpuN" is left, after one was seen
 *			   (trace-cmd listen deletes its temp files after it
 *			   wrote and closed the .dat)
 *
 * The directory is checked whenever inotify reports a change in it and
 * otherwise every POLL_MS milliseconds (default 10), so a completion is
 * seen within a few microseconds of the rename or unlink that makes it.
 * "file" can come before "exit": tdlisten finishes the file before it
 * tells the agent, which exits after.
 *
 * usage: fileready tdlisten|trace-cmd DIR PID [POLL_MS [TIMEOUT_S]]
 * output: "exit SECONDS file SECONDS size BYTES path PATH" on one line;
 * exit status 0, or 1 with "-" for what did not happen in TIMEOUT_S
 * (default 120).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WATCH_MASK	(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_CLOSE_WRITE)

static bool tracecmd_mode;
static bool seen_temp;
static char found[PATH_MAX];
static long long found_size;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Set found to the complete file in dir (or one level below); true if any. */
static bool
complete_in(const char *dir, int depth, int ifd)
{
	char path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	bool temp = false, done = false;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return false;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (stat(path, &st) == -1)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth == 0 && !tracecmd_mode) {
				/* DIR/IDENTITY/ (adding a watch twice is fine) */
				inotify_add_watch(ifd, path, WATCH_MASK);
				if (complete_in(path, 1, ifd))
					done = true;
			}
			continue;
		}
		if (tracecmd_mode) {
			if (strncmp(e->d_name, "trace.", 6) != 0)
				continue;
			if (ends_with(e->d_name, ".dat") && !done) {
				snprintf(found, sizeof found, "%s", path);
				found_size = (long long)st.st_size;
				done = true;
			} else if (strstr(e->d_name, ".cpu") != NULL)
				temp = true;
		} else if (ends_with(e->d_name, ".dat") && !done) {
			snprintf(found, sizeof found, "%s", path);
			found_size = (long long)st.st_size;
			done = true;
		}
	}
	closedir(d);
	if (tracecmd_mode) {
		if (temp)
			seen_temp = true;
		return done && seen_temp && !temp;
	}
	return done;
}

int
main(int argc, char **argv)
{
	struct pollfd pfd[2];
	char buf[8192];
	double t0, texit = -1, tfile = -1, poll_ms = 10, timeout = 120;
	pid_t pid;
	int pidfd, ifd;

	if (argc < 4 || argc > 6 || (strcmp(argv[1], "tdlisten") != 0 &&
	    strcmp(argv[1], "trace-cmd") != 0)) {
		fprintf(stderr, "usage: fileready tdlisten|trace-cmd DIR PID "
		    "[POLL_MS [TIMEOUT_S]]\n");
		return 2;
	}
	tracecmd_mode = strcmp(argv[1], "trace-cmd") == 0;
	pid = (pid_t)atoi(argv[3]);
	if (argc > 4)
		poll_ms = atof(argv[4]);
	if (argc > 5)
		timeout = atof(argv[5]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd == -1) {
		fprintf(stderr, "fileready: pidfd_open %d: %s\n", (int)pid,
		    strerror(errno));
		return 2;
	}
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd == -1 || inotify_add_watch(ifd, argv[2], WATCH_MASK) == -1) {
		fprintf(stderr, "fileready: inotify on '%s': %s\n", argv[2],
		    strerror(errno));
		return 2;
	}
	/* note the temp files (trace-cmd) and watch the subdirectories */
	if (complete_in(argv[2], 0, ifd))
		fprintf(stderr, "fileready: warning: '%s' is complete before "
		    "the recorder was stopped\n", found);
	t0 = now();
	if (kill(pid, SIGINT) == -1) {
		fprintf(stderr, "fileready: kill %d: %s\n", (int)pid,
		    strerror(errno));
		return 2;
	}
	pfd[0].fd = pidfd;
	pfd[0].events = POLLIN;
	pfd[1].fd = ifd;
	pfd[1].events = POLLIN;
	while (texit < 0 || tfile < 0) {
		if (now() - t0 > timeout)
			break;
		if (poll(pfd, 2, (int)poll_ms) == -1 &&
		    errno != EINTR)
			break;
		if (texit < 0 && (pfd[0].revents & POLLIN)) {
			texit = now() - t0;
			pfd[0].fd = -1;		/* stays readable */
		}
		if (pfd[1].revents & POLLIN)
			while (read(ifd, buf, sizeof buf) > 0)
				;
		if (tfile < 0 && complete_in(argv[2], 0, ifd))
			tfile = now() - t0;
	}
	if (texit < 0)
		printf("exit -");
	else
		printf("exit %.4f", texit);
	if (tfile < 0)
		printf(" file - size - path -\n");
	else
		printf(" file %.4f size %lld path %s\n", tfile, found_size,
		    found);
	return texit < 0 || tfile < 0;
}
