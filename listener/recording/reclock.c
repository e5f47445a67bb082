/*
 * reclock.c: a recording's lock, so that listeners sharing an output
 * directory never write one recording at once (see reclock.h).
 *
 * Open file description locks, not classic POSIX ones: a classic lock
 * belongs to the process and goes when any of its descriptors of the file
 * closes, and the writer opens and closes its own descriptor of the .part
 * (a rewind drops it, a restore opens it again).  An OFD lock belongs to
 * the one descriptor reclock_take() opened, and the writer's come and go.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reclock.h"
#include "banned.h"

/* The whole file, exclusively, for fcntl(). */
static void
reclock_whole(struct flock *fl)
{
	memset(fl, 0, sizeof *fl);
	fl->l_type = F_WRLCK;
	fl->l_whence = SEEK_SET;
	fl->l_start = 0;
	fl->l_len = 0;
}

/* Lock a recording's .part (reclock.h). */
int
reclock_take(const char *part)
{
	struct stat locked, named;
	struct flock fl;
	int fd, e;

	if ((fd = open(part, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	reclock_whole(&fl);
	if (fcntl(fd, F_OFD_SETLK, &fl) == -1) {
		e = errno;
		close(fd);
		errno = e == EACCES ? EAGAIN : e;
		return -1;
	}
	/* its owner may have finished it (renamed) before we locked it */
	if (fstat(fd, &locked) == -1 || stat(part, &named) == -1 ||
	    locked.st_dev != named.st_dev || locked.st_ino != named.st_ino) {
		close(fd);
		errno = ESTALE;
		return -1;
	}
	return fd;
}

/* Whether another process holds part's lock (reclock.h). */
bool
reclock_busy(const char *part)
{
	struct flock fl;
	bool busy;
	int fd;

	if ((fd = open(part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return false;
	reclock_whole(&fl);
	busy = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	close(fd);
	return busy;
}

/* Let go of a lock (closing its descriptor does). */
void
reclock_release(int fd)
{
	if (fd != -1)
		close(fd);
}
