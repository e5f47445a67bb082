/*
 * tcshim.c: an LD_PRELOAD library for the interoperability tests, so that
 * Debian's trace-cmd 3.1.6 can record on a machine that refuses what
 * tracedock never needs: trace-cmd writes /proc/sys/kernel/ftrace_enabled
 * (read-only in a sandbox) and opens the function tracer's files
 * (set_ftrace_*, refused with EPERM).  Those opens get /dev/null instead;
 * every other open is left alone, so on an ordinary machine the library
 * changes nothing.  Built by the tests that run trace-cmd record:
 *
 *	cc -shared -fPIC -o tcshim.so tests/tcshim.c -ldl
 *	LD_PRELOAD=./tcshim.so trace-cmd record -N HOST:PORT ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

typedef int (*openat_fn)(int, const char *, int, ...);

static bool
starts(const char *p, const char *prefix)
{
	return p != NULL && strncmp(p, prefix, strlen(prefix)) == 0;
}

/* The open, with /dev/null where the sandbox is in the way. */
static int
shim_open(openat_fn real, int dir, const char *path, int flags, mode_t mode)
{
	int wr = flags & (O_WRONLY | O_RDWR), fd;

	if (wr && starts(path, "/proc/sys/kernel/ftrace"))
		return real(AT_FDCWD, "/dev/null", O_WRONLY);
	fd = real(dir, path, flags, mode);
	if (fd == -1 && errno == EPERM && (starts(path, "/proc/sys/") ||
	    starts(path, "/sys/kernel/") || (path != NULL && path[0] != '/')))
		fd = real(AT_FDCWD, "/dev/null", wr ? O_WRONLY : O_RDONLY);
	return fd;
}

static openat_fn
real_openat(void)
{
	static openat_fn fn;

	if (fn == NULL)
		fn = (openat_fn)dlsym(RTLD_NEXT, "openat");
	return fn;
}

static mode_t
mode_of(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int
open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_of(flags, ap);
	va_end(ap);
	return shim_open(real_openat(), AT_FDCWD, path, flags, mode);
}

int
openat(int dir, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_of(flags, ap);
	va_end(ap);
	return shim_open(real_openat(), dir, path, flags, mode);
}

/* The 64-bit names are the same calls on a 64-bit C library. */
int	open64(const char *, int, ...) __attribute__((alias("open")));
int	openat64(int, const char *, int, ...) __attribute__((alias("openat")));
