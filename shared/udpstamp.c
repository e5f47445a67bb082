/*
 * udpstamp.c: recvmsg() with the kernel's receive stamp (see udpstamp.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "udpstamp.h"
#include "banned.h"

/* One datagram of fd and the kernel's stamp of it (udpstamp.h). */
ssize_t
td_udpstamp_recv(int fd, void *buf, size_t len,
    struct sockaddr_storage *from, socklen_t *fromlen,
    struct timespec *kernel_ts)
{
	union {
		char		buf[CMSG_SPACE(sizeof(struct timespec))];
		struct cmsghdr	align;
	} ctl;
	struct cmsghdr *cm;
	struct msghdr msg;
	struct iovec iov;
	ssize_t got;

	memset(&msg, 0, sizeof msg);
	memset(kernel_ts, 0, sizeof *kernel_ts);
	iov.iov_base = buf;
	iov.iov_len = len;
	if (from != NULL) {
		msg.msg_name = from;
		msg.msg_namelen = sizeof *from;
	}
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof ctl.buf;
	got = recvmsg(fd, &msg, MSG_DONTWAIT);
	if (got < 0)
		return -1;
	if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
		errno = EMSGSIZE;
		return -1;
	}
	for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm))
		if (cm->cmsg_level == SOL_SOCKET &&
		    cm->cmsg_type == SCM_TIMESTAMPNS)
			memcpy(kernel_ts, CMSG_DATA(cm), sizeof *kernel_ts);
	if (fromlen != NULL)
		*fromlen = from != NULL ? msg.msg_namelen : 0;
	return got;
}
