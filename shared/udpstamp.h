/*
 * udpstamp.h: a datagram received with the kernel's receive stamp
 * (SO_TIMESTAMPNS, set on the socket by the caller): the time-sync probes
 * of both programs (agent/tsync/tsyncudp.c, listener/edge/probeport.c) and the
 * test tool that delays them (tests/tddelay.c).
 *
 * Never blocks (MSG_DONTWAIT); nothing here logs.  Any thread may call it
 * on its own socket.
 */
#ifndef TD_UDPSTAMP_H
#define TD_UDPSTAMP_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/*
 * One datagram of fd into buf (len bytes at most): its length, or -1 with
 * errno (EAGAIN: none waits; EMSGSIZE: it was longer than len, or its
 * stamp did not fit, and is dropped).  The sender goes into from (NULL:
 * not wanted) and *fromlen; the kernel's stamp, CLOCK_REALTIME, into
 * *kernel_ts, or { 0, 0 } when it gave none (SO_TIMESTAMPNS not set).
 */
ssize_t	td_udpstamp_recv(int fd, void *buf, size_t len,
	    struct sockaddr_storage *from, socklen_t *fromlen,
	    struct timespec *kernel_ts);

#endif
