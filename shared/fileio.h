/*
 * fileio.h: whole writes and safe creation of the files the trace.dat
 * writer makes (the .part file, the spools, the options side file).
 *
 * Each call is one system-call loop on a descriptor the caller owns: it
 * retries EINTR and short writes, and a file it creates is made new, never
 * through a name planted in the directory.  Nothing here allocates, logs or
 * keeps state; any thread.  Functions return 0 (a descriptor for
 * td_fileio_open_new()) or -1 with errno set.
 */
#ifndef TD_FILEIO_H
#define TD_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Create path as a new file (O_EXCL, O_NOFOLLOW, read-write, close on
 * exec) and return its descriptor: a name already there (an earlier run's
 * file, a symbolic or hard link) is removed first, which never touches what
 * it points to; EEXIST if a name keeps coming back.
 */
int	td_fileio_open_new(const char *path, mode_t mode);
/* Write all n bytes at fd's file position; *off grows by what was written. */
int	td_fileio_write(int fd, const void *p, size_t n, uint64_t *off);
/* Write all n bytes at off (the file position does not move). */
int	td_fileio_pwrite(int fd, const void *p, size_t n, uint64_t off);
/*
 * Cut fd's file to size, which it must reach (EIO: a checkpoint promised
 * more than is there), and move the file position to size.
 */
int	td_fileio_cut(int fd, uint64_t size);

#endif
