/*
 * memtrim.h: give the memory of a burst back to the system.  A thousand
 * agents sending their metadata at once leave the heap megabytes of free
 * chunks between the small objects that stay (idle connections, their
 * recordings); glibc returns only the free top of the heap by itself, so
 * the process kept its peak for as long as those connections stayed.
 * Loop thread only; nothing here logs but at debug level.
 */
#ifndef TD_MEMTRIM_H
#define TD_MEMTRIM_H

/*
 * Called on every tick of the listener: at most every MEMTRIM_EVERY_S
 * seconds, when the heap holds more than MEMTRIM_FREE bytes free,
 * malloc_trim(0) hands their pages back (their addresses stay the heap's).
 */
void	memtrim_tick(void);

#endif
