/*
 * priv.h: tdagent's privilege separation, and the command it runs.
 *
 * tdagent starts as root (process P) and sets everything up that needs
 * root: the instances, every tracefs descriptor the recording will use,
 * the TLS context, the spool file and the -o file (see record.c).  Then
 * it forks the recorder R, which drops to an unprivileged user
 * (priv_drop()) and does the rest: the rings, the network, time sync,
 * writing.  P stays small: it runs the command (-- CMD), forwards
 * SIGINT, SIGTERM and SIGHUP to R, and when R is gone, however it ended,
 * stops the command, puts the -o file in place (or removes it) and
 * returns (the caller then removes the instances).
 *
 * P and R talk over a SOCK_SEQPACKET socketpair in fixed messages
 * (struct priv_msg): P says READY (the pids are excluded from the trace
 * and the command waits; value: its pid, 0 for none, -1 if set-up
 * failed) and EXIT (the command exited; value: its wait status); R says
 * GO (tracing is on: let the command exec) and FILE (the -o file is
 * complete in PATH.part; value 1: what was recorded before the disk
 * filled up, to go to priv_incomplete_path()).
 *
 * With -u root there is no R: one process does everything as before, and
 * uses priv_spawn(), priv_go() and priv_reap() for the command itself.
 * Functions return 0 or -1 with errno (or a message in err); priv_fork()
 * logs in P, as P decides for itself.
 */
#ifndef TD_PRIV_H
#define TD_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct instance;

enum priv_type {
	PRIV_READY = 'r',
	PRIV_EXIT = 'x',
	PRIV_GO = 'g',
	PRIV_FILE = 'f',
};

/* One message between the privileged parent and the recorder. */
struct priv_msg {
	int32_t		type;		/* enum priv_type */
	int32_t		value;
};

/* What P needs to know about the recording. */
struct priv_params {
	struct instance	*in;
	char		**argv;		/* the command, or NULL */
	bool		 follow;	/* -F */
	const char	*output;	/* -o PATH, or NULL */
	uid_t		 uid;		/* R's */
	gid_t		 gid;
	/* called in P right after the fork: drop what only R uses */
	void		(*release)(void *);
	void		*arg;
};

/* The uid and gid of user (65534 for "nobody" when there is none). */
int	priv_user(const char *user, uid_t *uid, gid_t *gid, char *err,
	    size_t errlen);
/* In R: become uid/gid for good, no way back (checked). */
int	priv_drop(uid_t uid, gid_t gid, char *err, size_t errlen);
/*
 * Fork R.  In P, returns 1 once R is gone, *status tdagent's exit status
 * (P has served R, see above; the caller removes the instances).  In R,
 * returns 0 with root dropped and P's READY taken: *fd the channel, *cmd
 * the command's pid (0: none).  -1 with err in either, before or after
 * the fork.
 */
int	priv_fork(const struct priv_params *pp, int *fd, pid_t *cmd,
	    int *status, char *err, size_t errlen);

int	priv_send(int fd, enum priv_type type, int32_t value);
/* 1 with a message, 0 at end of file, -1 on error (EAGAIN: none now). */
int	priv_recv(int fd, struct priv_msg *m, bool block);

/* Where -o PATH goes when kept incomplete: NAME.incomplete.dat. */
char	*priv_incomplete_path(const char *output);
/* Fork the command; it execs when priv_go() writes to *go_fd. */
pid_t	priv_spawn(char **argv, int *go_fd);
int	priv_go(int go_fd);
/* Stop the command: SIGTERM, SIGKILL after 5 s; its wait status. */
void	priv_reap(pid_t pid, int *status);

#endif
