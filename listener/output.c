/*
 * output.c: where tdlisten writes a recording:
 * DIR/<identity>/<UTC timestamp>[-<name>].dat.
 *
 * The identity comes from the verified client certificate (or the peer
 * address with --insecure), never from the stream; the agent's --name may
 * only add a suffix.  Both are sanitized to [A-Za-z0-9._-] with no leading
 * dot, so nothing a peer says can leave DIR.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "listener.h"
#include "xmalloc.h"
#include "banned.h"

/* Make s safe as one path component. */
void
output_sanitize(char *s)
{
	char *p;

	for (p = s; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' ||
		    ((*p == '.' || *p == '-') && p != s))
			continue;
		*p = '_';
	}
}

/* Choose a path no other recording uses and create its directory. */
int
output_path(const char *dir, const char *identity, const char *name,
    char **path, char **err)
{
	char *host, *suffix = NULL, *hostdir, *p;
	char stamp[32];
	struct timespec ts;
	struct tm tm;
	int i;

	host = xstrdup(identity[0] ? identity : "unknown");
	output_sanitize(host);
	if (name != NULL && name[0] != '\0') {
		suffix = xstrdup(name);
		output_sanitize(suffix);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	xasprintf(&hostdir, "%s/%s", dir, host);
	if (mkdir(hostdir, 0755) == -1 && errno != EEXIST) {
		xasprintf(err, "cannot create '%s': %s", hostdir,
		    strerror(errno));
		free(hostdir);
		free(host);
		free(suffix);
		return -1;
	}
	for (i = 0; i < 1000; i++) {
		char n[16] = "";

		if (i > 0)
			snprintf(n, sizeof n, ".%d", i);
		xasprintf(&p, "%s/%s%s%s%s.dat", hostdir, stamp, n,
		    suffix ? "-" : "", suffix ? suffix : "");
		/* claim the name: a placeholder no other session takes */
		{
			char *part;
			int fd;

			xasprintf(&part, "%s.part", p);
			fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			    0644);
			if (fd != -1 && access(p, F_OK) == -1) {
				close(fd);
				free(part);
				break;
			}
			if (fd != -1) {
				/* X.dat exists: give the placeholder back */
				close(fd);
				unlink(part);
			}
			free(part);
		}
		free(p);
		p = NULL;
	}
	free(hostdir);
	free(host);
	free(suffix);
	if (p == NULL) {
		xasprintf(err, "no free file name in '%s/%s'", dir, identity);
		return -1;
	}
	*path = p;
	return 0;
}

/* What an identity's directory holds on disk, in bytes (blocks used). */
uint64_t
output_usage(const char *dir, const char *identity)
{
	struct dirent *d;
	struct stat st;
	uint64_t n = 0;
	char *hostdir, *p;
	DIR *dp;

	xasprintf(&hostdir, "%s/%s", dir, identity);
	if ((dp = opendir(hostdir)) != NULL) {
		while ((d = readdir(dp)) != NULL) {
			if (d->d_name[0] == '.')
				continue;
			xasprintf(&p, "%s/%s", hostdir, d->d_name);
			if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
				n += (uint64_t)st.st_blocks * 512;
			free(p);
		}
		closedir(dp);
	}
	free(hostdir);
	return n;
}
