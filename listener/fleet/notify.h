/*
 * notify.h: tdlisten's readiness for systemd (Type=notify), the
 * sd_notify(3) protocol written by hand (no libsystemd): one datagram per
 * state to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an
 * abstract name after '@').  Without $NOTIFY_SOCKET nothing is sent.
 * Never logs, never fails the caller: a lost notification is systemd's to
 * time out.  Loop thread (or start-up) only.
 */
#ifndef TD_NOTIFY_H
#define TD_NOTIFY_H

/* Send state ("READY=1", "STOPPING=1", ...): 0, -1 (errno), or 0 when
   there is no $NOTIFY_SOCKET. */
int	notify_send(const char *state);
/* RELOADING=1 with MONOTONIC_USEC (before a reload). */
int	notify_reloading(void);

#endif
