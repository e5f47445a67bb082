/*
 * notify.c: the sd_notify protocol by hand (see notify.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>
#include <unistd.h>
#include <time.h>

#include "notify.h"
#include "banned.h"

int
notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	socklen_t len;
	size_t n;
	int fd, r;

	if (path == NULL || path[0] == '\0')
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof sun.sun_path) {
		errno = EINVAL;
		return -1;
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, n);
	if (path[0] == '@')
		sun.sun_path[0] = '\0';		/* abstract */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (path[0] == '/'));
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	r = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
	    (struct sockaddr *)&sun, len) == (ssize_t)strlen(state) ? 0 : -1;
	close(fd);
	return r;
}

int
notify_reloading(void)
{
	struct timespec ts;
	char msg[64];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
	    (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
	return notify_send(msg);
}
