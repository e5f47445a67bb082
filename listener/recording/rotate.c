/*
 * rotate.c: a recording as a series of pieces (see rotate.h): the
 * policy (when a piece is due, the pieces' names, --keep, recovery of a
 * cut at start).  The mechanism (the seal, the cut, the copy of the
 * header sections a step a turn of the loop) is the recording's
 * (recording-piece.h); nothing here looks inside a recording.
 *
 * Why each piece carries every time-sync sample of the recording so far
 * (TIME_SHIFT through timeline_write()): trace-cmd interpolates between
 * the samples around an event and holds the first or last offset beyond
 * them, so samples outside a piece's span change nothing in it, and a
 * piece that began between two rounds still has the one before its first
 * event; the last piece gets the samples of the end as the unrotated file
 * would.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "checkpoint.h"
#include "guests.h"
#include "listener.h"
#include "log.h"
#include "output.h"
#include "recording.h"
#include "recording-piece.h"
#include "reclock.h"
#include "size.h"
#include "rotate.h"
#include "tally.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "tdread.h"
#include "timeline.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

/* A finished piece of a recording, for --keep. */
struct rotate_old {
	char		*path;
	uint32_t	 n;
	uint64_t	 size;
};

int
rotate_parse(const char *s, uint64_t *bytes, uint32_t *secs, char *err,
    size_t errlen)
{
	uint64_t v;

	*bytes = 0;
	*secs = 0;
	if (td_parse_duration(s, &v) == 0) {
		if (v < TD_ROTATE_MIN_SECS || v > TD_ROTATE_MAX_SECS) {
			snprintf(err, errlen, "--rotate '%s': a duration from "
			    "%u s to %u h", s, TD_ROTATE_MIN_SECS,
			    TD_ROTATE_MAX_SECS / 3600);
			return -1;
		}
		*secs = (uint32_t)v;
		return 0;
	}
	if (td_parse_size(s, bytes) == -1) {
		snprintf(err, errlen, "--rotate '%s': a size (64M, 1G) or a "
		    "duration (30s, 10m, 1h)", s != NULL ? s : "");
		return -1;
	}
	if (*bytes < TD_ROTATE_MIN_SIZE) {
		snprintf(err, errlen, "--rotate '%s': pieces of at least %u "
		    "MiB (each repeats the header sections)", s,
		    TD_ROTATE_MIN_SIZE >> 20);
		*bytes = 0;
		return -1;
	}
	return 0;
}

int
rotate_parse_keep(const char *s, uint32_t *n, uint64_t *bytes, char *err,
    size_t errlen)
{
	unsigned long long v;
	char *end;

	*n = 0;
	*bytes = 0;
	if (s != NULL && s[0] >= '0' && s[0] <= '9') {
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno == 0 && *end == '\0' && v >= 1 &&
		    v <= TD_ROTATE_MAX_PIECE) {
			*n = (uint32_t)v;
			return 0;
		}
		if (errno == 0 && *end != '\0' && td_parse_size(s,
		    bytes) == 0 && *bytes > 0)
			return 0;
	}
	*bytes = 0;
	snprintf(err, errlen, "--keep '%s': a number of pieces (1 to %u) or a "
	    "size (K, M, G)", s != NULL ? s : "", TD_ROTATE_MAX_PIECE);
	return -1;
}

uint32_t
rotate_piece(const char *path, size_t *baselen)
{
	size_t n = strlen(path), i, d = 0;
	unsigned long v = 0;

	if (n < 10 || strcmp(path + n - 4, ".dat") != 0)
		return 0;
	for (i = n - 4; i > 0 && path[i - 1] >= '0' && path[i - 1] <= '9';
	    i--)
		d++;
	if (d < 4 || d > 6 || i == 0 || path[i - 1] != '-')
		return 0;
	v = strtoul(path + i, NULL, 10);
	if (v == 0 || v > TD_ROTATE_MAX_PIECE)
		return 0;
	*baselen = i - 1;
	return (uint32_t)v;
}

/* "BASE-NNNN.dat" for piece n of the piece at path (base: baselen). */
static char *
rotate_name(const char *path, size_t baselen, uint32_t n)
{
	char *p;

	xasprintf(&p, "%.*s-%04u.dat", (int)baselen, path, n);
	return p;
}

/*
 * Whether the piece pi is due: --rotate's size or span reached, and pages
 * in it that hold at least as many bytes as the header sections copied
 * into it.  Every piece repeats the sections (kallsyms: megabytes; a peer
 * may send 256 MiB each, which compress to nothing, or are stored as they
 * are in version 6): without that minimum a piece was cut after one page
 * once they alone passed --rotate, and 20 pages cost 672 MiB of copies
 * (issue 31, row 3).  With it the copies are at most the data received;
 * the first piece, which copied nothing, has no minimum.
 */
static bool
rotate_due(const struct listener_config *c,
    const struct recording_piece *pi)
{
	if (!pi->whole || pi->page_bytes == 0 || pi->page_bytes < pi->headers)
		return false;
	if (c->rotate_bytes > 0 && pi->written >= c->rotate_bytes)
		return true;
	return c->rotate_secs > 0 && pi->secs >= c->rotate_secs;
}

/*
 * Claim the name of the next piece after n of path (a placeholder
 * NAME.part, as output_path() does): a name taken already is passed over.
 * NULL with errno.
 */
static char *
rotate_claim(const struct listener_config *c, const char *path,
    size_t baselen, uint32_t n)
{
	struct stat st;
	char *p, *part;
	int fd, i;

	for (i = 1; i <= 1000 && n + (uint32_t)i <= TD_ROTATE_MAX_PIECE; i++) {
		p = rotate_name(path, baselen, n + (uint32_t)i);
		xasprintf(&part, "%s.part", p);
		fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, c->file_mode);
		if (fd == -1 && errno != EEXIST) {
			free(part);
			free(p);
			return NULL;
		}
		if (fd != -1) {
			close(fd);
			if (lstat(p, &st) == -1 && errno == ENOENT) {
				free(part);
				return p;
			}
			unlink(part);
		}
		free(part);
		free(p);
	}
	errno = EEXIST;
	return NULL;
}

/* Remove the placeholder or the writer's files of path. */
static void
rotate_unclaim(const char *path)
{
	char *part;

	xasprintf(&part, "%s.part", path);
	unlink(part);
	free(part);
}

static int
rotate_old_cmp(const void *a, const void *b)
{
	const struct rotate_old *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;	/* newest first */
}

/*
 * --keep: remove the oldest finished pieces of r beyond the limit (path:
 * any piece of r, base: its name's length before "-NNNN").
 */
static void
rotate_keep(struct recording *r, const char *path, size_t baselen)
{
	const struct listener_config *c = recording_config(r);
	const char *label = recording_label(r);
	const char *slash = strrchr(path, '/');
	struct rotate_old *old = NULL;
	struct dirent *d;
	struct stat st;
	uint64_t total = 0;
	size_t dl, nold = 0, cap = 0, i, bl;
	char *dir, *p, *side;
	DIR *dp;

	if ((c->keep_n == 0 && c->keep_bytes == 0) || slash == NULL)
		return;
	dl = (size_t)(slash - path);
	xasprintf(&dir, "%.*s", (int)dl, path);
	if ((dp = opendir(dir)) == NULL) {
		free(dir);
		return;
	}
	while ((d = readdir(dp)) != NULL && nold < TD_ROTATE_SCAN) {
		xasprintf(&p, "%s/%s", dir, d->d_name);
		if (strncmp(p, path, baselen) != 0 ||
		    rotate_piece(p, &bl) == 0 || bl != baselen ||
		    lstat(p, &st) == -1 || !S_ISREG(st.st_mode)) {
			free(p);
			continue;
		}
		if (nold == cap) {
			cap = cap ? cap * 2 : 16;
			old = xreallocarray(old, cap, sizeof *old);
		}
		old[nold].path = p;
		old[nold].n = rotate_piece(p, &bl);
		old[nold++].size = (uint64_t)st.st_size;
	}
	closedir(dp);
	free(dir);
	if (nold > 0)
		qsort(old, nold, sizeof *old, rotate_old_cmp);
	for (i = 0; i < nold; i++) {
		total += old[i].size;
		if ((c->keep_n > 0 && i < c->keep_n) ||
		    (c->keep_bytes > 0 && total <= c->keep_bytes))
			continue;
		xasprintf(&side, "%s.onfinish", old[i].path);
		if (access(side, F_OK) == 0)
			log_info("%s: kept '%s' beyond --keep: its --on-finish "
			    "command has not succeeded yet", label,
			    old[i].path);
		else if (unlink(old[i].path) == -1)
			log_warn("%s: cannot remove '%s' (--keep)", label,
			    old[i].path);
		else {
			if (c->keep_n > 0)
				log_info("%s: removed '%s': --keep %u pieces",
				    label, old[i].path, c->keep_n);
			else
				log_info("%s: removed '%s': --keep %" PRIu64
				    " bytes of pieces", label, old[i].path,
				    c->keep_bytes);
			tally_piece_removed();
		}
		free(side);
	}
	for (i = 0; i < nold; i++)
		free(old[i].path);
	free(old);
}

/* Piece path of r is in place (size bytes): say so, count it, --keep. */
static void
rotate_done_cb(struct recording *r, const char *path, uint64_t size)
{
	size_t baselen;

	log_info("%s: wrote piece '%s' (%" PRIu64 " bytes)",
	    recording_label(r), path, size);
	tally_piece();
	recording_done(r, path, true);
	if (rotate_piece(path, &baselen) != 0)
		rotate_keep(r, path, baselen);
}

/* r's last piece is in place (recording_finish()): count it, --keep. */
static void
rotate_last(struct recording *r)
{
	const char *path = recording_path(r);
	size_t baselen;

	if (rotate_piece(path, &baselen) == 0)
		return;
	tally_piece();
	rotate_keep(r, path, baselen);
}

/*
 * At a checkpoint of r: when its piece is due (--rotate), cut it.  0 (cut
 * or not), -1 with errno and err when a cut failed; *sealed then says
 * whether the piece was already put in place (the recording cannot go
 * on: close it) or not (r is as it was: a pause on ENOSPC and the like).
 */
static int
rotate_check(struct recording *r, bool *sealed, char *err, size_t errlen)
{
	const struct listener_config *c = recording_config(r);
	const char *path = recording_path(r);
	struct recording_piece pi;
	char *next, why[160];
	size_t baselen;
	uint32_t n;
	int e;

	*sealed = false;
	if ((c->rotate_bytes == 0 && c->rotate_secs == 0) ||
	    (n = rotate_piece(path, &baselen)) == 0)
		return 0;
	recording_piece(r, &pi);
	if (!rotate_due(c, &pi))
		return 0;
	/* the copy's piece counts in the recording's budget: it waits */
	if (recording_account(r, TD_ROTATE_COPY_CHUNK, why, sizeof why) == -1) {
		log_debug("%s: the cut waits: %s", recording_label(r), why);
		return 0;
	}
	if ((next = rotate_claim(c, path, baselen, n)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot name the piece after '%s': %s",
		    path, strerror(e));
		errno = e;
		return -1;
	}
	if (recording_cut(r, next, rotate_done_cb, sealed, err,
	    errlen) == -1) {
		e = errno;
		if (!*sealed)
			rotate_unclaim(next);
		free(next);
		errno = e;
		return -1;
	}
	free(next);
	return 0;
}

/*
 * What a cut that stopped left of the next piece (n after path), which no
 * state describes: its placeholder or the writer's first files.
 */
static void
rotate_scrap(const char *path, size_t baselen, uint32_t n, uint32_t ncpus)
{
	char *p, *f;
	uint32_t i;

	p = rotate_name(path, baselen, n + 1);
	xasprintf(&f, "%s.state", p);
	if (access(f, F_OK) == 0) {
		free(f);
		free(p);
		return;
	}
	free(f);
	rotate_unclaim(p);
	xasprintf(&f, "%s.opts.part", p);
	unlink(f);
	free(f);
	for (i = 0; i < ncpus; i++) {
		xasprintf(&f, "%s.cpu%u.part", p, i);
		unlink(f);
		free(f);
	}
	free(p);
}

/* The state path rotate_recover() made last (output_states() may list it). */
static char *rotate_made;

/* Whether statepath is the one rotate_recover() made (recovered already). */
static bool
rotate_recovered(const char *statepath)
{
	return rotate_made != NULL && strcmp(statepath, rotate_made) == 0;
}

/*
 * At start, before the recording of statepath is recovered: when it is a
 * piece put in place whose next piece never began (tdlisten stopped in
 * the cut), begin that one (headers from the piece, the counters of the
 * state, which the cut wrote) and give its state path (caller frees), and
 * in *done the piece's path (caller frees; its --on-finish is due); NULL
 * when there is nothing to do or it failed (logged).
 */
static char *
rotate_recover(const struct listener_config *c, const char *identity,
    const char *statepath, char **done)
{
	struct checkpoint ck;
	struct td_file *f;
	struct td_read *rd;
	struct td_buf b;
	char *path, *next = NULL, *nstate = NULL, err[600];
	size_t baselen, len;
	uint64_t copied;
	uint32_t n, i;
	bool cmdlines;

	*done = NULL;
	xasprintf(&path, "%.*s", (int)strlen(statepath) - 6, statepath);
	xasprintf(&next, "%s.part", path);
	n = rotate_piece(path, &baselen);
	if (n == 0 || access(next, F_OK) == 0 || access(path, F_OK) == -1) {
		free(next);
		free(path);
		return NULL;
	}
	free(next);
	/* the piece is whole, the next one never began: begin it now */
	memset(&ck, 0, sizeof ck);
	ck.no_file = true;
	ck.ts = timesync_new();
	ck.guests = guests_new(identity, 0, "", "recovered");
	if (checkpoint_read(statepath, &ck, NULL, err, sizeof err) == -1)
		goto out;
	guests_describe(ck.guests, identity, ck.params.file_trace_id,
	    ck.params.clock);
	rotate_scrap(path, baselen, n, ck.params.ncpus);
	/*
	 * Whether the piece's CMDLINES is the producer's (the next piece
	 * takes it over) or the listener's latest set: the state says; one
	 * of before version 6 does not, and the listener wrote none then.
	 */
	cmdlines = ck.cmdlines == 1;
	if (ck.cmdlines == -1 && (rd = td_read_open(path)) != NULL) {
		td_buf_init(&b, TD_MAX_SECTION_SIZE);
		cmdlines = td_read_section(rd, TD_OPT_CMDLINES, &b) == 0 &&
		    (b.len != 8 || memcmp(b.data, "\0\0\0\0\0\0\0\0", 8) != 0);
		td_buf_free(&b);
		td_read_close(rd);
	}
	if ((next = rotate_claim(c, path, baselen, n)) == NULL) {
		snprintf(err, sizeof err, "cannot name the piece after '%s': "
		    "%s", path, strerror(errno));
		goto out;
	}
	/* the recovered recording's piece has no minimum (rotate_due()) */
	if ((f = recording_piece_copy_all(c, path, next, cmdlines, false,
	    ck.params.file_trace_id, &copied, err, sizeof err)) == NULL) {
		rotate_unclaim(next);
		goto out;
	}
	for (i = 0; i < ck.params.ncpus; i++)
		ck.cpu[i].piece_seq = ck.cpu[i].next_seq;
	ck.file = f;
	xasprintf(&nstate, "%s.state", next);
	if (checkpoint_write(nstate, &ck, &len) == -1) {
		snprintf(err, sizeof err, "cannot write '%s': %s", nstate,
		    strerror(errno));
		td_file_abort(f);
		td_file_free(f);
		free(nstate);
		nstate = NULL;
		goto out;
	}
	td_file_release(f);
	checkpoint_remove(statepath);
	log_info("'%s': the piece was in place, the next one begins as '%s'",
	    statepath, next);
	tally_piece();
	*done = path;
	path = NULL;
	free(rotate_made);
	rotate_made = xstrdup(nstate);
out:
	if (nstate == NULL)
		log_warnx("'%s': cannot begin the next piece: %s", statepath,
		    err);
	free(ck.cpu);
	timesync_free(ck.ts);
	guests_free(ck.guests);
	free(next);
	free(path);
	return nstate;
}

/* At exit: what rotate_recover() remembers. */
static void
rotate_cleanup(void)
{
	free(rotate_made);
	rotate_made = NULL;
}

/* recording.h: the recording asks, rotate.c decides */
const struct recording_policy rotate_policy = {
	.check = rotate_check,
	.last = rotate_last,
	.recovered = rotate_recovered,
	.recover = rotate_recover,
	.cleanup = rotate_cleanup,
};
