/*
 * memtrim.c: the heap's free pages back to the system after a burst (see
 * memtrim.h).  malloc_trim(0) walks the heap and madvise()s the pages of
 * its free chunks: a few milliseconds for a heap of hundreds of MB, so it
 * runs only when mallinfo2() says enough is free, and not more often than
 * every MEMTRIM_EVERY_S seconds (a page given back and used again costs a
 * page fault, which a listener under a steady load would pay at every
 * trim).
 */
#include <stddef.h>
#include <time.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "log.h"
#include "memtrim.h"

#include "banned.h"

#define MEMTRIM_EVERY_S	10
#define MEMTRIM_FREE	(8u * 1024 * 1024)

void
memtrim_tick(void)
{
#if defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	static time_t last;
	struct timespec now;
	struct mallinfo2 mi;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec - last < MEMTRIM_EVERY_S)
		return;
	last = now.tv_sec;
	mi = mallinfo2();
	/* free chunks inside the heap; its free top glibc trims itself */
	if (mi.fordblks < mi.keepcost || mi.fordblks - mi.keepcost <
	    MEMTRIM_FREE)
		return;
	log_debug("heap: %zu bytes free in %zu bytes: trimmed",
	    mi.fordblks, mi.arena);
	malloc_trim(0);
#endif
}
