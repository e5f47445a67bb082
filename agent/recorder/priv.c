/*
 * priv.c: the privileged parent of tdagent, and the command (see priv.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "instance.h"
#include "log.h"
#include "priv.h"
#include "xmalloc.h"
#include "banned.h"

/* How long priv_spawn() waits for the command to wait. */
#define PRIV_SPAWN_WAIT_MS	2000
/* The uid of "nobody" on most systems, for one without that user. */
#define PRIV_NOBODY	65534

/* P's view of the recording. */
struct priv_state {
	const struct priv_params *pp;
	pid_t		 rec;		/* R */
	int		 fd;		/* P's end of the channel */
	pid_t		 cmd;		/* 0: none or gone */
	int		 go_fd;
	bool		 rec_done;
	int		 rec_status;
	bool		 chan_open;
	bool		 file_done;
	bool		 failed;	/* P's own part went wrong */
};

/*
 * A numeric "UID" or "UID:GID" (a guest's initramfs has no passwd): true
 * with *uid and *gid (the uid's number when none is given).
 */
static bool
priv_numeric(const char *user, uid_t *uid, gid_t *gid)
{
	unsigned long u, g;
	char *end;

	if (*user < '0' || *user > '9')
		return false;
	errno = 0;
	u = strtoul(user, &end, 10);
	if (errno != 0 || u >= UINT32_MAX)
		return false;
	g = u;
	if (*end == ':') {
		if (end[1] < '0' || end[1] > '9')
			return false;
		g = strtoul(end + 1, &end, 10);
		if (errno != 0 || g >= UINT32_MAX)
			return false;
	}
	if (*end != '\0')
		return false;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return true;
}

/* Look the user up: a name, or a numeric UID[:GID]. */
int
priv_user(const char *user, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
	struct passwd *pw;

	if (priv_numeric(user, uid, gid))
		return 0;
	errno = 0;
	if ((pw = getpwnam(user)) != NULL) {
		*uid = pw->pw_uid;
		*gid = pw->pw_gid;
		return 0;
	}
	if (strcmp(user, "nobody") == 0) {
		*uid = PRIV_NOBODY;
		*gid = PRIV_NOBODY;
		return 0;
	}
	snprintf(err, errlen, "unknown user '%s'", user);
	return -1;
}

/*
 * Become uid/gid: no groups, all three ids of each, no new privileges
 * through exec, and check that root cannot come back.  The change of uid
 * leaves the process undumpable, and so it stays: it holds the agent's
 * private key (loaded by root before the fork), which other processes of
 * the same user (nobody is shared) could otherwise read with ptrace.  A
 * crash still prints its backtrace (crash.c).
 */
int
priv_drop(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	if (setgroups(0, NULL) == -1 ||
	    setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1) {
		snprintf(err, errlen, "cannot become uid %ld gid %ld: %s",
		    (long)uid, (long)gid, strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s",
		    strerror(errno));
		return -1;
	}
	if (setuid(0) != -1 || geteuid() == 0 || getegid() == 0) {
		snprintf(err, errlen, "dropping root did not take");
		return -1;
	}
	return 0;
}

/* Send one message. */
int
priv_send(int fd, enum priv_type type, int32_t value)
{
	struct priv_msg m;
	ssize_t n;

	memset(&m, 0, sizeof m);
	m.type = type;
	m.value = value;
	do
		n = send(fd, &m, sizeof m, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	if (n == (ssize_t)sizeof m)
		return 0;
	if (n >= 0)
		errno = EMSGSIZE;
	return -1;
}

/* Take one message. */
int
priv_recv(int fd, struct priv_msg *m, bool block)
{
	ssize_t n;

	do
		n = recv(fd, m, sizeof *m, block ? 0 : MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n == (ssize_t)sizeof *m)
		return 1;
	if (n > 0)
		errno = EPROTO;
	return -1;
}

/*
 * Until the command waits in read(2) on its pipe (/proc/PID/syscall), for
 * at most PRIV_SPAWN_WAIT_MS: if tracing started before it got there, the
 * system calls of its set-up would be recorded, a varying number of them.
 */
static void
priv_spawn_wait(pid_t pid, int rfd)
{
	char path[64], want[64], got[64];
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof path, "/proc/%ld/syscall", (long)pid);
	n = snprintf(want, sizeof want, "%d 0x%x ", SYS_read, rfd);
	for (i = 0; i < PRIV_SPAWN_WAIT_MS * 10; i++) {
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			return;
		got[0] = '\0';
		if (read(fd, got, sizeof got - 1) < n)
			got[0] = '\0';
		close(fd);
		if (strncmp(got, want, n) == 0)
			return;
		usleep(100);
	}
}

/*
 * Fork the command now, but let it exec only once tracing is on (one byte
 * on its pipe), so its first system call is recorded; return once it
 * waits for that byte.
 */
pid_t
priv_spawn(char **argv, int *go_fd)
{
	sigset_t none;
	pid_t pid;
	int p[2];
	char go;

	if (pipe2(p, O_CLOEXEC) == -1)
		return -1;
	pid = fork();
	if (pid == -1) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[1]);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);	/* ignored in tdagent only */
		if (read(p[0], &go, 1) != 1)
			_exit(127);
		close(p[0]);
		execvp(argv[0], argv);
		fprintf(stderr, "tdagent: cannot run '%s': %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	*go_fd = p[1];
	priv_spawn_wait(pid, p[0]);
	close(p[0]);
	return pid;
}

/* Let the command exec. */
int
priv_go(int go_fd)
{
	return write(go_fd, "g", 1) == 1 ? 0 : -1;
}

/*
 * Stop the command: SIGTERM, then SIGKILL if it is still there after five
 * seconds, so a command that ignores SIGTERM cannot hang tdagent.
 */
void
priv_reap(pid_t pid, int *status)
{
	int i;

	kill(pid, SIGTERM);
	for (i = 0; i < 500; i++) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, status, 0);
}

/* Exclude both processes, start the command, tell R. */
static void
priv_ready(struct priv_state *s)
{
	const struct priv_params *pp = s->pp;
	pid_t pids[2] = { getpid(), s->rec };
	int32_t ready = 0;

	/* tdagent's own reads would feed the trace they read */
	if (instance_exclude_pids(pp->in, pids, 2) == -1)
		log_debug("cannot exclude tdagent's own events: %s",
		    strerror(errno));
	if (pp->argv != NULL) {
		s->cmd = priv_spawn(pp->argv, &s->go_fd);
		if (s->cmd == -1) {
			log_warn("cannot start '%s'", pp->argv[0]);
			s->cmd = 0;
			ready = -1;
		} else if (pp->follow &&
		    instance_follow_pid(pp->in, s->cmd) == -1) {
			log_warn("cannot follow the command (set_event_pid)");
			ready = -1;
		} else
			ready = s->cmd;
	}
	if (priv_send(s->fd, PRIV_READY, ready) == -1)
		log_debug("cannot talk to the recorder: %s", strerror(errno));
}

/* Where -o PATH goes when kept incomplete: NAME.incomplete.dat. */
char *
priv_incomplete_path(const char *output)
{
	size_t n = strlen(output);
	char *p;

	if (n > 4 && strcmp(output + n - 4, ".dat") == 0)
		n -= 4;
	xasprintf(&p, "%.*s.incomplete.dat", (int)n, output);
	return p;
}

/* One message from R. */
static void
priv_message(struct priv_state *s, const struct priv_msg *m)
{
	const struct priv_params *pp = s->pp;
	char *part, *final;

	switch (m->type) {
	case PRIV_GO:
		if (s->go_fd != -1) {
			if (priv_go(s->go_fd) == -1)
				log_warn("cannot start '%s'", pp->argv[0]);
			close(s->go_fd);
			s->go_fd = -1;
		}
		break;
	case PRIV_FILE:
		if (pp->output == NULL || s->file_done)
			break;
		xasprintf(&part, "%s.part", pp->output);
		final = m->value == 1 ? priv_incomplete_path(pp->output) :
		    xstrdup(pp->output);
		if (rename(part, final) == -1) {
			log_warn("cannot rename '%s' to '%s'", part, final);
			s->failed = true;
		} else
			s->file_done = true;
		free(final);
		free(part);
		break;
	default:
		log_debug("unknown message %d from the recorder", m->type);
		break;
	}
}

/* Take R's messages; block: wait for one. */
static void
priv_channel(struct priv_state *s, bool block)
{
	struct priv_msg m;
	int ret;

	while (s->chan_open) {
		ret = priv_recv(s->fd, &m, block);
		if (ret == 1) {
			priv_message(s, &m);
			block = false;
			continue;
		}
		if (ret == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			s->chan_open = false;
		break;
	}
}

/* Children that ended: the command (R hears of it) or R. */
static void
priv_children(struct priv_state *s)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == s->cmd) {
			s->cmd = 0;
			if (s->chan_open)
				priv_send(s->fd, PRIV_EXIT, status);
		} else if (pid == s->rec) {
			s->rec_done = true;
			s->rec_status = status;
		}
	}
}

/* Wait for R, serving it and forwarding signals. */
static void
priv_loop(struct priv_state *s, int sfd)
{
	struct signalfd_siginfo si;
	struct pollfd pfd[2];

	while (!s->rec_done) {
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = s->chan_open ? s->fd : -1;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			log_warn("poll");
			kill(s->rec, SIGTERM);
			waitpid(s->rec, &s->rec_status, 0);
			s->rec_done = true;
			break;
		}
		if (pfd[1].revents != 0)
			priv_channel(s, false);
		while (read(sfd, &si, sizeof si) == sizeof si) {
			if (si.ssi_signo == SIGCHLD)
				priv_children(s);
			else
				kill(s->rec, (int)si.ssi_signo);
		}
	}
}

/* P, from the fork to the end. */
static int
priv_parent(const struct priv_params *pp, pid_t rec, int fd)
{
	struct priv_state s;
	sigset_t set;
	char *part;
	int sfd, status, sig;

	memset(&s, 0, sizeof s);
	s.pp = pp;
	s.rec = rec;
	s.fd = fd;
	s.go_fd = -1;
	s.chan_open = true;
	/* main() blocked these: they arrive here */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd == -1) {
		log_warn("signalfd");
		kill(rec, SIGKILL);
		waitpid(rec, &s.rec_status, 0);
		return 1;
	}
	priv_ready(&s);
	priv_loop(&s, sfd);
	close(sfd);
	/* what R said last, e.g. FILE just before it exited */
	priv_channel(&s, false);
	if (s.cmd > 0)
		priv_reap(s.cmd, &status);
	if (s.go_fd != -1)
		close(s.go_fd);
	if (pp->output != NULL && !s.file_done) {
		xasprintf(&part, "%s.part", pp->output);
		unlink(part);
		free(part);
	}
	if (WIFSIGNALED(s.rec_status)) {
		sig = WTERMSIG(s.rec_status);
		log_warnx("the recorder (pid %ld) was killed by signal %d "
		    "(%s)%s", (long)rec, sig, strsignal(sig),
		    WCOREDUMP(s.rec_status) ? ", core dumped" : "");
		return 128 + sig;
	}
	if (s.failed)
		return 1;
	return WIFEXITED(s.rec_status) ? WEXITSTATUS(s.rec_status) : 1;
}

/* Fork R; see priv.h. */
int
priv_fork(const struct priv_params *pp, int *fd, pid_t *cmd, int *status,
    char *err, size_t errlen)
{
	struct priv_msg m;
	pid_t parent = getpid(), pid;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid > 0) {
		close(sv[1]);
		log_debug("recording in process %ld as uid %ld gid %ld",
		    (long)pid, (long)pp->uid, (long)pp->gid);
		if (pp->release != NULL)
			pp->release(pp->arg);
		*status = priv_parent(pp, pid, sv[0]);
		close(sv[0]);
		return 1;
	}
	close(sv[0]);
	*fd = sv[1];
	instance_disown();
	/* signals from a terminal go to P, which forwards them */
	setpgid(0, 0);
	if (priv_drop(pp->uid, pp->gid, err, errlen) == -1)
		return -1;
	/* an orphaned recorder stops (after the drop, which resets this) */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (getppid() != parent || priv_recv(*fd, &m, true) != 1 ||
	    m.type != PRIV_READY || m.value < 0) {
		snprintf(err, errlen, "the privileged parent could not "
		    "prepare the recording");
		return -1;
	}
	*cmd = m.value;
	return 0;
}
