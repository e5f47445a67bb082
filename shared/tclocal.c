/*
 * tclocal.c: ask the local trace-cmd which codecs it reads (tclocal.h).
 *
 * trace-cmd 3.1.6 answers "trace-cmd list -c" with
 *	Supported compression algorithms:
 *		zstd, 1.5.4
 * one codec a line, its library's version after the comma.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tclocal.h"
#include "tdlimits.h"
#include "banned.h"

/* trace-cmd list -c's output into out (NUL-terminated): 0, or -1. */
static int
td_tclocal_run(char *out, size_t outlen)
{
	struct pollfd pfd;
	sigset_t none;
	size_t n = 0;
	ssize_t r;
	pid_t pid;
	int p[2], dn, status, left = TD_TCLOCAL_MS;
	struct timespec t0, t1;

	if (pipe2(p, O_CLOEXEC) == -1)
		return -1;
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dn = open("/dev/null", O_RDWR);
		if (dn == -1 || dup2(dn, 0) == -1 || dup2(p[1], 1) == -1 ||
		    dup2(dn, 2) == -1)
			_exit(127);
		execlp("trace-cmd", "trace-cmd", "list", "-c", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (n + 1 < outlen && left > 0) {
		pfd.fd = p[0];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, left) <= 0)
			break;
		r = read(p[0], out + n, outlen - 1 - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = TD_TCLOCAL_MS - (int)((t1.tv_sec - t0.tv_sec) * 1000 +
		    (t1.tv_nsec - t0.tv_nsec) / 1000000);
	}
	out[n] = '\0';
	close(p[0]);
	kill(pid, SIGKILL);	/* done or too slow: it has said its say */
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	/* killed after it exited: its own status stands */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -1;
	return strstr(out, "compression") != NULL ? 0 : -1;
}

int
td_tclocal_codec(const char *name, char *have, size_t havelen)
{
	char out[TD_TCLOCAL_OUT], *line, *save = NULL, *c;
	size_t hl = 0, nl = strlen(name);
	bool found = false, list = false;

	if (havelen > 0)
		have[0] = '\0';
	if (td_tclocal_run(out, sizeof out) == -1)
		return -1;
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, "compression algorithms") != NULL) {
			list = true;
			continue;
		}
		if (!list)
			continue;
		line += strspn(line, " \t");
		if ((c = strchr(line, ',')) != NULL)
			*c = '\0';
		if (*line == '\0')
			continue;
		if (strlen(line) == nl && strcmp(line, name) == 0)
			found = true;
		if (hl < havelen)
			hl += (size_t)snprintf(have + hl, havelen - hl, "%s%s",
			    hl > 0 ? ", " : "", line);
	}
	if (!list)
		return -1;
	return found ? 1 : 0;
}

int
td_tclocal_zlib_warning(char *msg, size_t msglen)
{
	char have[128];

	if (td_tclocal_codec("zlib", have, sizeof have) != 0)
		return 0;
	snprintf(msg, msglen, "--compression zlib: the trace-cmd here cannot "
	    "read zlib files (it reads %s), nor can Debian 12's trace-cmd, "
	    "libtracecmd and KernelShark (built without zlib); zstd, the "
	    "default, is read by all of them", have);
	return 1;
}
