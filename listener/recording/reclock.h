/*
 * reclock.h: which listener owns a recording's files, when several share
 * one output directory (-d on a network filesystem, or two tdlisten on one
 * box).
 *
 * A listener that owns a recording (opened it, or recovered it from its
 * checkpoint) holds an exclusive open-file-description lock (fcntl
 * F_OFD_SETLK, F_WRLCK, the whole file) on its PATH.part, on a descriptor
 * of its own, from before the first checkpoint to the recording's end in
 * this process (finished, kept as incomplete, or left to be resumed at
 * exit).  Another listener recovers a PATH.state only if it gets that lock;
 * it never writes, cuts back, renames or removes files of a recording it
 * does not hold.  The kernel drops the lock when its holder dies (kill -9
 * too); over NFS the server does when the holder's lease ends (NFSv4) or
 * its lock manager says it rebooted (NFSv3 NLM).  fcntl locks, not
 * flock(2): Linux's NFS client sends fcntl locks to the server, and
 * emulates flock() with them (NFS has no flock of its own).  Nothing here
 * logs.
 */
#ifndef TD_RECLOCK_H
#define TD_RECLOCK_H

#include <stdbool.h>

/*
 * Lock part (a recording's PATH.part): its descriptor, or -1 with errno
 * (EAGAIN: another process holds it; ENOLCK or EOPNOTSUPP: this
 * filesystem has no locks; ESTALE: the name no longer leads to the file
 * that was locked, the recording ended in between).
 */
int		 reclock_take(const char *part);
/* Whether another process holds part's lock (false when none can tell). */
bool		 reclock_busy(const char *part);
/* Let go of a lock of reclock_take(); -1 is fine. */
void		 reclock_release(int fd);

#endif
