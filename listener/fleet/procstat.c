/*
 * procstat.c: the process metrics every Prometheus client library exports
 * (see procstat.h), read from /proc.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include <event2/buffer.h>

#include "procstat.h"
#include "banned.h"

/* Descriptors open in this process (one is the directory's, not counted). */
static int
procstat_open_fds(void)
{
	struct dirent *de;
	DIR *d;
	int n = 0;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

/*
 * The process metrics every Prometheus client library exports (no
 * prefix): CPU time, memory, descriptors, the start time, from /proc.
 */
void
procstat_prom(struct evbuffer *out)
{
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0, btime = 0;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	char buf[1024], *p;
	struct rlimit rl;
	FILE *fp;
	int fds;

	if ((fp = fopen("/proc/self/stat", "r")) != NULL) {
		/* fields 14, 15, 22, 23, 24, after the name in parentheses */
		if (fgets(buf, sizeof buf, fp) != NULL &&
		    (p = strrchr(buf, ')')) != NULL)
			sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
			    "%*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu "
			    "%lld", &utime, &stime, &start, &vsize, &rss);
		fclose(fp);
	}
	if ((fp = fopen("/proc/stat", "r")) != NULL) {
		while (fgets(buf, sizeof buf, fp) != NULL)
			if (sscanf(buf, "btime %lld", &btime) == 1)
				break;
		fclose(fp);
	}
	if (tck <= 0)
		tck = 100;
	evbuffer_add_printf(out, "# HELP process_cpu_seconds_total Total user "
	    "and system CPU time spent in seconds.\n# TYPE "
	    "process_cpu_seconds_total counter\nprocess_cpu_seconds_total "
	    "%.2f\n", (double)(utime + stime) / (double)tck);
	evbuffer_add_printf(out, "# HELP process_resident_memory_bytes "
	    "Resident memory size in bytes.\n# TYPE "
	    "process_resident_memory_bytes gauge\n"
	    "process_resident_memory_bytes %lld\n", rss * (long long)page);
	evbuffer_add_printf(out, "# HELP process_virtual_memory_bytes Virtual "
	    "memory size in bytes.\n# TYPE process_virtual_memory_bytes "
	    "gauge\nprocess_virtual_memory_bytes %llu\n", vsize);
	evbuffer_add_printf(out, "# HELP process_start_time_seconds Start "
	    "time of the process since unix epoch in seconds.\n# TYPE "
	    "process_start_time_seconds gauge\nprocess_start_time_seconds "
	    "%.2f\n", (double)btime + (double)start / (double)tck);
	if ((fds = procstat_open_fds()) >= 0)
		evbuffer_add_printf(out, "# HELP process_open_fds Number of "
		    "open file descriptors.\n# TYPE process_open_fds gauge\n"
		    "process_open_fds %d\n", fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		evbuffer_add_printf(out, "# HELP process_max_fds Maximum number "
		    "of open file descriptors.\n# TYPE process_max_fds gauge\n"
		    "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
}
