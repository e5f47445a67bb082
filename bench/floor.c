/*
 * bench/floor.c: what it costs to take pages out of the kernel's ring
 * buffer, with no network, no file and no encryption: the floor under any
 * recorder's CPU per MB.
 *
 * usage: floor MODE BLOCKS
 *   MODE read         read(2) one page at a time, stopping at the first
 *                     page that is not 3/4 full until the next wake-up
 *                     (what tdagent does)
 *        splice-read  splice(2) up to 16 full pages into a pipe, then one
 *                     read(2) of them (fewer system calls, one copy)
 *        splice-null  splice(2) into a pipe, then from the pipe to
 *                     /dev/null: no copy at all (trace-cmd's recorder,
 *                     without its socket)
 *   BLOCKS            dd if=/dev/zero of=/dev/null bs=1 count=BLOCKS is
 *                     the workload (4 raw_syscalls events per block)
 *
 * Makes the instance tracedock-floor-PID with raw_syscalls enabled for dd
 * only (common_pid filter: other processes stay out), the default buffer
 * size and
 * buffer_percent 10, waits on every CPU's trace_pipe_raw with epoll, and
 * prints one line: MODE, MB of pages, CPU seconds of this process (user +
 * system, from dd's start to the end of the drain), ms per MB, system
 * calls.  Run as root, from bench/floor.sh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACING		"/sys/kernel/tracing"
#define BATCH		16
#define MAX_CPUS	1024

enum mode { M_READ, M_SPLICE_READ, M_SPLICE_NULL };

static char inst[256];
static long page;
static long long bytes, calls;

static void
die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
put(const char *file, const char *value)
{
	char path[512];
	int fd;

	snprintf(path, sizeof path, "%s/%s", inst, file);
	if ((fd = open(path, O_WRONLY | O_TRUNC)) == -1 ||
	    write(fd, value, strlen(value)) != (ssize_t)strlen(value))
		die(path);
	close(fd);
}

/* The commit field of a page: how many bytes of events it holds. */
static long
page_len(const char *p)
{
	unsigned long long commit;

	memcpy(&commit, p + 8, sizeof commit);
	return (long)(commit & 0xfffff);
}

/* Read one CPU until it is empty, or (not final) its first page that is
   not nearly full. */
static void
drain(enum mode m, int fd, int pr, int pw, int null, char *buf, int final)
{
	ssize_t n, k;
	int i;

	for (i = 0; final || i < 256; i++) {
		if (m == M_READ || final) {
			n = read(fd, buf, page);
			calls++;
			if (n <= 0)
				return;
			bytes += n;
			if (!final && page_len(buf) < page * 3 / 4)
				return;
			continue;
		}
		n = splice(fd, NULL, pw, NULL, BATCH * page,
		    SPLICE_F_NONBLOCK);
		calls++;
		if (n <= 0)
			return;
		bytes += n;
		while (n > 0) {
			if (m == M_SPLICE_READ)
				k = read(pr, buf, n);
			else
				k = splice(pr, NULL, null, NULL, n, 0);
			calls++;
			if (k <= 0)
				die("pipe");
			n -= k;
		}
	}
}

int
main(int argc, char **argv)
{
	struct epoll_event ev, evs[64];
	struct rusage r0, r1;
	char path[512], filter[64], count[64], *buf, c;
	int fds[MAX_CPUS], pr[MAX_CPUS], pw[MAX_CPUS], p[2], go[2];
	int ncpus = 0, epfd, null, cpu, done = 0, status, i, n;
	enum mode m;
	double cpu_s;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: floor read|splice-read|splice-null "
		    "BLOCKS\n");
		return 2;
	}
	if (strcmp(argv[1], "read") == 0)
		m = M_READ;
	else if (strcmp(argv[1], "splice-read") == 0)
		m = M_SPLICE_READ;
	else if (strcmp(argv[1], "splice-null") == 0)
		m = M_SPLICE_NULL;
	else {
		fprintf(stderr, "floor: unknown mode '%s'\n", argv[1]);
		return 2;
	}
	page = sysconf(_SC_PAGESIZE);
	if ((buf = malloc(BATCH * page)) == NULL)
		die("malloc");
	snprintf(inst, sizeof inst, TRACING "/instances/tracedock-floor-%ld",
	    (long)getpid());
	if (mkdir(inst, 0755) == -1)
		die(inst);
	/* dd waits for one byte on the pipe, so its pid is known first */
	snprintf(count, sizeof count, "count=%s", argv[2]);
	if (pipe(go) == -1)
		die("pipe");
	if ((pid = fork()) == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execlp("dd", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", count,
		    "status=none", (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	snprintf(filter, sizeof filter, "common_pid == %ld", (long)pid);
	put("events/raw_syscalls/filter", filter);
	put("events/raw_syscalls/enable", "1");
	put("buffer_percent", "10");
	if ((epfd = epoll_create1(0)) == -1 ||
	    (null = open("/dev/null", O_WRONLY)) == -1)
		die("set-up");
	for (cpu = 0; cpu < MAX_CPUS; cpu++) {
		snprintf(path, sizeof path, "%s/per_cpu/cpu%d/trace_pipe_raw",
		    inst, cpu);
		if ((fds[cpu] = open(path, O_RDONLY | O_NONBLOCK)) == -1) {
			if (errno == ENOENT)
				break;
			die(path);
		}
		if (pipe2(p, O_NONBLOCK) == -1)
			die("pipe");
		fcntl(p[0], F_SETPIPE_SZ, BATCH * page);
		pr[cpu] = p[0];
		pw[cpu] = p[1];
		memset(&ev, 0, sizeof ev);
		ev.events = EPOLLIN;
		ev.data.u32 = cpu;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fds[cpu], &ev) == -1)
			die("epoll_ctl");
	}
	ncpus = cpu;
	put("tracing_on", "1");
	getrusage(RUSAGE_SELF, &r0);
	if (write(go[1], "g", 1) != 1)
		die("pipe");
	close(go[1]);
	while (!done) {
		n = epoll_wait(epfd, evs, 64, 100);
		for (i = 0; i < n; i++) {
			cpu = evs[i].data.u32;
			drain(m, fds[cpu], pr[cpu], pw[cpu], null, buf, 0);
		}
		if (waitpid(pid, &status, WNOHANG) == pid)
			done = 1;
	}
	put("tracing_on", "0");
	for (cpu = 0; cpu < ncpus; cpu++)
		drain(m, fds[cpu], pr[cpu], pw[cpu], null, buf, 1);
	getrusage(RUSAGE_SELF, &r1);
	cpu_s = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
	    (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
	    ((r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) +
	    (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec)) / 1e6;
	for (cpu = 0; cpu < ncpus; cpu++) {
		close(fds[cpu]);
		close(pr[cpu]);
		close(pw[cpu]);
	}
	if (rmdir(inst) == -1)
		fprintf(stderr, "floor: cannot remove %s: %s\n", inst,
		    strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "floor: dd failed\n");
		return 1;
	}
	printf("%s %.1f %.3f %.3f %lld\n", argv[1], bytes / 1e6, cpu_s,
	    bytes ? cpu_s * 1e3 / (bytes / 1e6) : 0.0, calls);
	return 0;
}
