/*
 * concwatch.c: start the workloads of many agents at once and time how
 * long the listener takes to complete each agent's file.
 *
 * bench/concurrent.sh runs it once every agent records and every
 * workload (a shell blocked opening FIFO for reading) waits.  It
 *
 *	1. opens a pidfd for every workload PID and an inotify watch on DIR
 *	   (and on its subdirectories: tdlisten writes DIR/IDENTITY/...);
 *	2. opens FIFO for writing and closes it: every shell blocked in its
 *	   open returns, reads end-of-file and execs its dd, all at once.
 *	   Time 0 is just before this open;
 *	3. prints, in seconds after time 0,
 *		exit PID T	a workload process terminated (pidfd: exact)
 *		file T SIZE PATH  a file became complete
 *	   where complete means
 *		tdlisten   a "*.dat" in DIR or one level below (tdlisten
 *			   writes NAME.dat.part and renames it when done)
 *		trace-cmd  "trace.X.dat" in DIR while no "trace.X.cpuN" is
 *			   left, after one was seen (trace-cmd listen
 *			   deletes a client's temp files after it wrote and
 *			   closed its .dat)
 *	   DIR is scanned whenever inotify reports a change and every 100 ms;
 *	4. samples, every 200 ms, the memory of process LPID and all its
 *	   descendants (trace-cmd listen forks per client and per CPU): the
 *	   sum of their RSS and the sum of their PSS, printing the peaks as
 *		rss RSS_KB PSS_KB
 *	   (LPID 0: no sampling);
 *	   A PID already gone when concwatch starts (concurrent.sh
 *	   --stagger: workloads start with their agents) exits at time 0.
 *	5. stops when every PID has exited and NFILES files are complete
 *	   ("end T", status 0) or after TIMEOUT_S ("timeout T", status 1).
 *
 * usage: concwatch tdlisten|trace-cmd DIR NFILES FIFO TIMEOUT_S LPID PID...
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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
#define MAX_PIDS	1024
#define MAX_FILES	1024
#define MAX_PROCS	65536

static bool tracecmd_mode;
static double t0;

/* Files already reported complete, and trace-cmd bases with temp files. */
static char *done_files[MAX_FILES];
static int ndone;
static char *temp_bases[MAX_FILES];
static int ntemp;

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

static bool
in_list(char **list, int n, const char *s)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

static void
add_list(char **list, int *n, const char *s)
{
	char *p;

	if (*n >= MAX_FILES || in_list(list, *n, s))
		return;
	if ((p = strdup(s)) == NULL) {
		perror("concwatch: strdup");
		exit(2);
	}
	list[(*n)++] = p;
}

/* Report a file once, when first seen complete. */
static void
report(const char *path)
{
	struct stat st;

	if (in_list(done_files, ndone, path))
		return;
	if (stat(path, &st) == -1)
		return;
	add_list(done_files, &ndone, path);
	printf("file %.4f %lld %s\n", now() - t0, (long long)st.st_size, path);
	fflush(stdout);
}

/* tdlisten: every "*.dat" in dir (depth 0) or one level below. */
static void
scan_tdlisten(const char *dir, int depth, int ifd)
{
	char path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (stat(path, &st) == -1)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth == 0) {
				/* adding a watch twice is fine */
				inotify_add_watch(ifd, path, WATCH_MASK);
				scan_tdlisten(path, 1, ifd);
			}
			continue;
		}
		if (ends_with(e->d_name, ".dat"))
			report(path);
	}
	closedir(d);
}

/* trace-cmd listen: trace.X.dat whose trace.X.cpuN were seen and are gone. */
static void
scan_tracecmd(const char *dir)
{
	char path[PATH_MAX], base[NAME_MAX + 1], *cpu;
	char *dats[MAX_FILES], *temps[MAX_FILES];
	int ndats = 0, ntemps = 0, i;
	struct dirent *e;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "trace.", 6) != 0)
			continue;
		snprintf(base, sizeof base, "%s", e->d_name);
		if (ends_with(base, ".dat")) {
			base[strlen(base) - 4] = '\0';
			add_list(dats, &ndats, base);
		} else if ((cpu = strstr(base, ".cpu")) != NULL) {
			*cpu = '\0';
			add_list(temps, &ntemps, base);
			add_list(temp_bases, &ntemp, base);
		}
	}
	closedir(d);
	for (i = 0; i < ndats; i++) {
		if (in_list(temp_bases, ntemp, dats[i]) &&
		    !in_list(temps, ntemps, dats[i])) {
			snprintf(path, sizeof path, "%s/%s.dat", dir, dats[i]);
			report(path);
		}
	}
	for (i = 0; i < ndats; i++)
		free(dats[i]);
	for (i = 0; i < ntemps; i++)
		free(temps[i]);
}

static void
scan(const char *dir, int ifd)
{
	if (tracecmd_mode)
		scan_tracecmd(dir);
	else
		scan_tdlisten(dir, 0, ifd);
}

/* The "Pss:" line of /proc/PID/smaps_rollup, in kB (0 if unreadable). */
static long
pss_kb(int pid)
{
	char path[64], line[256];
	long kb = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "Pss: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* RSS in kB of one process, from /proc/PID/statm (0 if gone). */
static long
rss_kb(int pid)
{
	char path[64];
	long size, res;
	FILE *f;
	int ok;

	snprintf(path, sizeof path, "/proc/%d/statm", pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	ok = fscanf(f, "%ld %ld", &size, &res) == 2;
	fclose(f);
	return ok ? res * (sysconf(_SC_PAGESIZE) / 1024) : 0;
}

/* Sum the RSS and PSS of lpid and its descendants into *rss, *pss. */
static void
tree_memory(int lpid, long *rss, long *pss)
{
	static int pids[MAX_PROCS], ppids[MAX_PROCS];
	static bool in[MAX_PROCS];
	char path[64], buf[512], *p;
	struct dirent *e;
	int n = 0, i, changed;
	FILE *f;
	DIR *d;

	*rss = *pss = 0;
	if ((d = opendir("/proc")) == NULL)
		return;
	while ((e = readdir(d)) != NULL && n < MAX_PROCS) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pids[n] = atoi(e->d_name);
		snprintf(path, sizeof path, "/proc/%d/stat", pids[n]);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		p = fgets(buf, sizeof buf, f);
		fclose(f);
		if (p == NULL || (p = strrchr(buf, ')')) == NULL)
			continue;
		/* ") S PPID" */
		ppids[n] = atoi(p + 4);
		in[n] = pids[n] == lpid;
		n++;
	}
	closedir(d);
	do {
		changed = 0;
		for (i = 0; i < n; i++) {
			int j;

			if (in[i])
				continue;
			for (j = 0; j < n; j++)
				if (in[j] && pids[j] == ppids[i]) {
					in[i] = true;
					changed = 1;
					break;
				}
		}
	} while (changed);
	for (i = 0; i < n; i++)
		if (in[i]) {
			*rss += rss_kb(pids[i]);
			*pss += pss_kb(pids[i]);
		}
}

int
main(int argc, char **argv)
{
	static struct pollfd pfd[MAX_PIDS + 1];
	static int pids[MAX_PIDS];
	char buf[8192];
	const char *dir, *fifo;
	double timeout, last_scan = 0, last_sample = -1;
	long rss, pss, peak_rss = 0, peak_pss = 0;
	int nfiles, npids, left, lpid, ifd, fd, i, gone = 0;

	if (argc < 8 || (strcmp(argv[1], "tdlisten") != 0 &&
	    strcmp(argv[1], "trace-cmd") != 0)) {
		fprintf(stderr, "usage: concwatch tdlisten|trace-cmd DIR "
		    "NFILES FIFO TIMEOUT_S LPID PID...\n");
		return 2;
	}
	tracecmd_mode = strcmp(argv[1], "trace-cmd") == 0;
	dir = argv[2];
	nfiles = atoi(argv[3]);
	fifo = argv[4];
	timeout = atof(argv[5]);
	lpid = atoi(argv[6]);
	npids = argc - 7;
	if (npids > MAX_PIDS) {
		fprintf(stderr, "concwatch: at most %d PIDs\n", MAX_PIDS);
		return 2;
	}
	for (i = 0; i < npids; i++) {
		pids[i] = atoi(argv[7 + i]);
		pfd[i].fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
		if (pfd[i].fd == -1 && errno == ESRCH) {
			/* concurrent.sh --stagger: done before time 0 */
			gone++;
			continue;
		}
		if (pfd[i].fd == -1) {
			fprintf(stderr, "concwatch: pidfd_open %d: %s\n",
			    pids[i], strerror(errno));
			return 2;
		}
		pfd[i].events = POLLIN;
	}
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd == -1 || inotify_add_watch(ifd, dir, WATCH_MASK) == -1) {
		fprintf(stderr, "concwatch: inotify on '%s': %s\n", dir,
		    strerror(errno));
		return 2;
	}
	pfd[npids].fd = ifd;
	pfd[npids].events = POLLIN;
	/* watch the subdirectories, note trace-cmd's temp files (a file
	   complete already gets a time before the start) */
	t0 = now();
	scan(dir, ifd);
	if (ndone > 0)
		fprintf(stderr, "concwatch: warning: %d files complete before "
		    "the start\n", ndone);

	t0 = now();
	if ((fd = open(fifo, O_WRONLY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "concwatch: %s: %s\n", fifo, strerror(errno));
		return 2;
	}
	close(fd);
	printf("start %.4f\n", now() - t0);
	for (i = 0; i < npids; i++)
		if (pfd[i].fd == -1)
			printf("exit %d 0.0000\n", pids[i]);
	fflush(stdout);

	left = npids - gone;
	while (left > 0 || ndone < nfiles) {
		double t = now() - t0;

		if (t > timeout) {
			printf("rss %ld %ld\ntimeout %.4f\n", peak_rss,
			    peak_pss, t);
			return 1;
		}
		if (lpid > 0 && t - last_sample >= 0.2) {
			tree_memory(lpid, &rss, &pss);
			if (rss > peak_rss)
				peak_rss = rss;
			if (pss > peak_pss)
				peak_pss = pss;
			last_sample = t;
		}
		if (poll(pfd, (nfds_t)npids + 1, 100) == -1 && errno != EINTR)
			break;
		for (i = 0; i < npids; i++)
			if (pfd[i].fd >= 0 && (pfd[i].revents & POLLIN)) {
				printf("exit %d %.4f\n", pids[i], now() - t0);
				fflush(stdout);
				close(pfd[i].fd);
				pfd[i].fd = -1;		/* stays readable */
				left--;
			}
		if (pfd[npids].revents & POLLIN) {
			while (read(ifd, buf, sizeof buf) > 0)
				;
			scan(dir, ifd);
			last_scan = now() - t0;
		} else if (now() - t0 - last_scan >= 0.1) {
			scan(dir, ifd);
			last_scan = now() - t0;
		}
	}
	printf("rss %ld %ld\nend %.4f\n", peak_rss, peak_pss, now() - t0);
	return 0;
}
