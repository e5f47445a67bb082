/*
 * fileio.c: whole writes and safe creation of the writer's files (see
 * fileio.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "banned.h"

/*
 * Create path as a new file, never through a link planted there: a name
 * left over (a .part of an earlier run, a symbolic link, a hard link to
 * another file) is removed, which never touches what it points to, and
 * O_EXCL makes the file; a name planted again in between fails (EEXIST).
 */
int
td_fileio_open_new(const char *path, mode_t mode)
{
	int fd, tries;

	for (tries = 0; tries < 3; tries++) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, mode);
		if (fd != -1 || errno != EEXIST)
			return fd;
		if (unlink(path) == -1 && errno != ENOENT)
			return -1;
	}
	errno = EEXIST;
	return -1;
}

/* Write n bytes at the file position, counting them in *off. */
int
td_fileio_write(int fd, const void *p, size_t n, uint64_t *off)
{
	const uint8_t *c = p;
	ssize_t w;

	while (n != 0) {
		w = write(fd, c, n);
		if (w == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= w;
		*off += w;
	}
	return 0;
}

/* Write n bytes at off. */
int
td_fileio_pwrite(int fd, const void *p, size_t n, uint64_t off)
{
	ssize_t w;

	while (n != 0) {
		w = pwrite(fd, p, n, off);
		if (w == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p = (const uint8_t *)p + w;
		n -= w;
		off += w;
	}
	return 0;
}

/* Cut fd's file to size, which it must reach, and seek there. */
int
td_fileio_cut(int fd, uint64_t size)
{
	struct stat st;

	if (fstat(fd, &st) == -1)
		return -1;
	if ((uint64_t)st.st_size < size) {
		errno = EIO;	/* the checkpoint promised more */
		return -1;
	}
	if (ftruncate(fd, (off_t)size) == -1 ||
	    lseek(fd, (off_t)size, SEEK_SET) == -1)
		return -1;
	return 0;
}
