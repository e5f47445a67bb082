/*
 * output.c: where tdlisten writes a recording:
 * DIR/<identity>/<host>-<UTC timestamp>[-<name>].dat, or with --rotate its
 * pieces [-<name>]-0001.dat, -0002.dat ... (rotate.c names the next ones).
 *
 * <host> is the identity again, sanitized like the name: trace-cmd report
 * -i a -i b prefixes each line with the file's base name only, so two
 * hosts recording in the same second must not get the same one.
 *
 * The identity comes from the verified client certificate, escaped one
 * to one (td_tls_escape(); or the peer address with --insecure), never from
 * the stream; the agent's --name may only add a suffix, sanitized to
 * [A-Za-z0-9._-] with no leading dot, so nothing a peer says can leave DIR.
 *
 * A trace holds the traced machine's kallsyms (its KASLR base) and process
 * names: directories are made 0700 and files 0600, or 0750/0640 for the
 * --group (the set-group-ID bit on the directories gives what is made in
 * them that group), and nothing is created through a symbolic link.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "listener.h"
#include "output.h"
#include "reclock.h"
#include "tdfile.h"
#include "xmalloc.h"
#include "banned.h"

/* Make s safe as one path component. */
void
output_sanitize(char *s)
{
	char *p;

	for (p = s; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' ||
		    ((*p == '.' || *p == '-') && p != s))
			continue;
		*p = '_';
	}
}

/* Whether an identity made by session.c can be one path component. */
static bool
output_identity_ok(const char *identity)
{
	return identity[0] != '\0' && identity[0] != '.' &&
	    strchr(identity, '/') == NULL;
}

/*
 * Make an identity's directory, or give one an older tdlisten made (0755)
 * the modes of now; one that is not ours, or a symbolic link, is left as
 * it is.
 */
int
output_hostdir(const struct listener_config *c, const char *hostdir)
{
	struct stat st;
	int fd;

	if (mkdir(hostdir, c->dir_mode) == -1 && errno != EEXIST)
		return -1;
	fd = open(hostdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return errno == ELOOP ? 0 : -1;
	if (fstat(fd, &st) == 0 && st.st_uid == geteuid()) {
		if (c->gid != (gid_t)-1 && st.st_gid != c->gid)
			(void)fchown(fd, (uid_t)-1, c->gid);
		if ((st.st_mode & 07777) != c->dir_mode)
			(void)fchmod(fd, c->dir_mode);
	}
	close(fd);
	return 0;
}

/* Choose a path no other recording uses and create its directory. */
int
output_path(const struct listener_config *c, const char *identity,
    const char *name, bool pieces, char **path, char **err)
{
	char *suffix = NULL, *host, *hostdir, *p;
	char stamp[32];
	struct stat st;
	struct timespec ts;
	struct tm tm;
	int i, e;

	if (!output_identity_ok(identity)) {
		xasprintf(err, "no usable identity '%s'", identity);
		errno = EINVAL;
		return -1;
	}
	if (name != NULL && name[0] != '\0') {
		suffix = xstrdup(name);
		output_sanitize(suffix);
	}
	host = xstrdup(identity);
	output_sanitize(host);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	xasprintf(&hostdir, "%s/%s", c->dir, identity);
	if (output_hostdir(c, hostdir) == -1) {
		e = errno;
		xasprintf(err, "cannot create '%s': %s", hostdir, strerror(e));
		free(hostdir);
		free(host);
		free(suffix);
		errno = e;
		return -1;
	}
	for (i = 0; i < 1000; i++) {
		char n[16] = "", *part;
		int fd;

		if (i > 0)
			snprintf(n, sizeof n, ".%d", i);
		/* --rotate: the first piece (rotate.h) */
		xasprintf(&p, "%s/%s-%s%s%s%s%s.dat", hostdir, host, stamp, n,
		    suffix ? "-" : "", suffix ? suffix : "",
		    pieces && (c->rotate_bytes > 0 || c->rotate_secs > 0) ?
		    "-0001" : "");
		/* claim the name: a placeholder no other recording takes */
		xasprintf(&part, "%s.part", p);
		fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, c->file_mode);
		if (fd == -1 && errno != EEXIST) {
			/* no room, no descriptor: no other name helps */
			e = errno;
			xasprintf(err, "cannot create '%s': %s", part,
			    strerror(e));
			free(part);
			free(p);
			free(hostdir);
			free(host);
			free(suffix);
			errno = e;
			return -1;
		}
		if (fd != -1 && lstat(p, &st) == -1 && errno == ENOENT) {
			close(fd);
			free(part);
			break;
		}
		if (fd != -1) {
			/* X.dat exists: give the placeholder back */
			close(fd);
			unlink(part);
		}
		free(part);
		free(p);
		p = NULL;
	}
	free(hostdir);
	free(host);
	free(suffix);
	if (p == NULL) {
		xasprintf(err, "no free file name in '%s/%s'", c->dir,
		    identity);
		errno = EEXIST;
		return -1;
	}
	*path = p;
	return 0;
}

/* What an identity's directory holds on disk, in bytes (blocks used). */
uint64_t
output_usage(const char *dir, const char *identity)
{
	struct dirent *d;
	struct stat st;
	uint64_t n = 0;
	char *hostdir, *p;
	DIR *dp;

	xasprintf(&hostdir, "%s/%s", dir, identity);
	if ((dp = opendir(hostdir)) != NULL) {
		while ((d = readdir(dp)) != NULL) {
			if (d->d_name[0] == '.')
				continue;
			xasprintf(&p, "%s/%s", hostdir, d->d_name);
			if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
				n += (uint64_t)st.st_blocks * 512;
			free(p);
		}
		closedir(dp);
	}
	free(hostdir);
	return n;
}

/*
 * Whether DIR has room for need more bytes of identity: free space on its
 * file system, and under its --quota.  false with errno ENOSPC or EDQUOT.
 */
bool
output_room(const struct listener_config *c, const char *identity,
    uint64_t need)
{
	struct statvfs sv;

	if (c->quota > 0 && output_usage(c->dir, identity) + need > c->quota) {
		errno = EDQUOT;
		return false;
	}
	if (statvfs(c->dir, &sv) == 0 &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < need) {
		errno = ENOSPC;
		return false;
	}
	return true;
}

/*
 * Finish what a broken recording's writer f (of path) holds as a readable
 * trace when every section up to PRINTK is there (with empty command lines
 * if they never came), as NAME.incomplete.dat; else drop it.  0 with
 * *final (caller frees), or -1 (dropped).
 */
int
output_keep_partial(struct td_file *f, const char *path, char **final)
{
	static const enum td_opt need[] = { TD_OPT_HEADER_INFO,
	    TD_OPT_FTRACE_EVENTS, TD_OPT_EVENT_FORMATS, TD_OPT_KALLSYMS,
	    TD_OPT_PRINTK };
	char *inc, *dot;
	uint64_t zero = 0;
	size_t i;

	td_file_section_cancel(f);	/* fails if none is open */
	for (i = 0; i < sizeof need / sizeof *need; i++)
		if (!td_file_has_section(f, need[i]))
			goto out_drop;
	if (!td_file_has_section(f, TD_OPT_CMDLINES) &&
	    td_file_section_add(f, TD_OPT_CMDLINES, &zero, sizeof zero) == -1)
		goto out_drop;
	if (td_file_finish(f) == -1)
		goto out_drop;
	inc = xstrdup(path);
	if ((dot = strrchr(inc, '.')) != NULL)
		*dot = '\0';
	/*
	 * Never over another file: two recordings of one identity that
	 * began in the same second, the first already kept, have one name.
	 */
	for (i = 0; i < 1000; i++) {
		if (i == 0)
			xasprintf(final, "%s.incomplete.dat", inc);
		else
			xasprintf(final, "%s.incomplete.%zu.dat", inc, i);
		if (renameat2(AT_FDCWD, path, AT_FDCWD, *final,
		    RENAME_NOREPLACE) == 0)
			break;
		/* a file system without RENAME_NOREPLACE: look first */
		if (errno == EINVAL && access(*final, F_OK) == -1 &&
		    rename(path, *final) == 0)
			break;
		if (errno == EINVAL && access(*final, F_OK) == 0)
			errno = EEXIST;
		free(*final);
		*final = NULL;
		if (errno != EEXIST)
			break;
	}
	free(inc);
	if (*final == NULL)
		*final = xstrdup(path);	/* finished, kept where it is */
	return 0;
out_drop:
	td_file_abort(f);
	return -1;
}

/*
 * Remove tmp, a NAME.dat.state.tmp (a checkpoint cut short, or the state
 * before the last), unless another listener sharing the directory holds
 * NAME.dat (reclock.h): it may be writing that checkpoint now.
 */
static void
output_drop_tmp(const char *tmp)
{
	char *part;

	xasprintf(&part, "%.*s.part", (int)strlen(tmp) - 10, tmp);
	if (!reclock_busy(part))
		unlink(tmp);
	free(part);
}

/*
 * The recordings an earlier tdlisten left: fn(c, identity, state path) for
 * every DIR/IDENTITY/NAME.dat.state; a NAME.dat.state.tmp (a checkpoint
 * cut short) is removed, unless another listener holds NAME.dat.
 */
void
output_states(const struct listener_config *c,
    void (*fn)(const struct listener_config *, const char *, const char *))
{
	DIR *top, *host;
	struct dirent *d, *e;
	char *hostdir, *path;
	size_t n;

	if ((top = opendir(c->dir)) == NULL)
		return;
	while ((d = readdir(top)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		xasprintf(&hostdir, "%s/%s", c->dir, d->d_name);
		if ((host = opendir(hostdir)) == NULL) {
			free(hostdir);
			continue;
		}
		while ((e = readdir(host)) != NULL) {
			n = strlen(e->d_name);
			xasprintf(&path, "%s/%s", hostdir, e->d_name);
			if (n > 14 && strcmp(e->d_name + n - 14,
			    ".dat.state.tmp") == 0)
				output_drop_tmp(path);
			else if (n > 10 && strcmp(e->d_name + n - 10,
			    ".dat.state") == 0)
				fn(c, d->d_name, path);
			free(path);
		}
		closedir(host);
		free(hostdir);
	}
	closedir(top);
}
