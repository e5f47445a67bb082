/*
 * finished.c: the recordings tdlisten finished lately, for an agent that
 * missed its DONE (the connection broke after END) and comes back to
 * resume: it is told DONE again instead of "no recording to resume".
 *
 * The table lives in memory and in DIR/.tdlisten-finished, one line per
 * recording appended as it finishes ("RECORDING_ID END_OFFSET SIZE
 * IDENTITY PATH", the id in hex), so a DONE lost to a tdlisten restart is
 * answered too.  At start the file is taken in line by line as if the
 * recordings finished again (lines that do not parse are skipped); it is
 * rewritten with the table alone (write, rename) once it holds four times
 * TD_MAX_FINISHED lines.  Like checkpoints, the lines are written with
 * write(2), not fsync(2): they survive a crash of tdlisten, not of the
 * machine.
 *
 * Each identity keeps its last TD_MAX_FINISHED_PER_IDENTITY recordings,
 * and the table at most TD_MAX_FINISHED in all: an agent that finishes
 * many short recordings pushes out its own, never another identity's
 * (unless TD_MAX_FINISHED / TD_MAX_FINISHED_PER_IDENTITY identities fill
 * the table together: then the oldest of all goes).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "finished.h"
#include "listener.h"
#include "xmalloc.h"
#include "banned.h"

#define FINISHED_FILE	".tdlisten-finished"

/* A slot of the table; seq 0: free. */
struct finished_slot {
	struct finished	 e;
	uint64_t	 seq;		/* order of finishing, from 1 */
};

static struct finished_slot	*finished;	/* TD_MAX_FINISHED slots */
static uint64_t		 finished_seq;
static unsigned int	 finished_lines;	/* in the file */
static char		*finished_path;

/*
 * Take e in: in place of the oldest of its identity when that has its
 * share, else in a free slot, else in place of the oldest of all.
 */
static void
finished_put(const struct finished *e)
{
	struct finished_slot *own = NULL, *any = NULL, *free_slot = NULL, *t;
	unsigned int i, mine = 0;

	if (finished == NULL)
		finished = xcalloc(TD_MAX_FINISHED, sizeof *finished);
	for (i = 0; i < TD_MAX_FINISHED; i++) {
		t = &finished[i];
		if (t->seq == 0) {
			if (free_slot == NULL)
				free_slot = t;
			continue;
		}
		if (any == NULL || t->seq < any->seq)
			any = t;
		if (strcmp(t->e.identity, e->identity) != 0)
			continue;
		mine++;
		if (own == NULL || t->seq < own->seq)
			own = t;
	}
	if (mine >= TD_MAX_FINISHED_PER_IDENTITY)
		t = own;
	else if (free_slot != NULL)
		t = free_slot;
	else
		t = any;
	t->e = *e;
	t->seq = ++finished_seq;
}

static int
finished_line(const struct finished *e, char *line, size_t len)
{
	int n = snprintf(line, len, "%016" PRIx64 " %" PRIu64 " %" PRIu64
	    " %s %s\n", e->recording_id, e->end_off, e->size, e->identity,
	    e->path);

	return n > 0 && (size_t)n < len ? n : -1;
}

/* A line of the file, or -1. */
static int
finished_parse(const char *line, struct finished *e)
{
	char id[TD_MAX_NAME_LEN + 1], path[sizeof e->path], end;
	uint64_t rid, off, size;

	/* widths: TD_MAX_NAME_LEN and sizeof e->path - 1 */
	if (sscanf(line, "%16" SCNx64 " %" SCNu64 " %" SCNu64 " %64s %256s%c",
	    &rid, &off, &size, id, path, &end) != 6 || end != '\n')
		return -1;
	memset(e, 0, sizeof *e);
	e->recording_id = rid;
	e->end_off = off;
	e->size = size;
	snprintf(e->identity, sizeof e->identity, "%s", id);
	snprintf(e->path, sizeof e->path, "%s", path);
	return 0;
}

/* Write the table alone to the file (the lines beyond it go). */
static void
finished_rewrite(void)
{
	struct finished_slot *t;
	char line[1024], *tmp;
	unsigned int i, k = 0;
	uint64_t seq, next;
	FILE *fp;
	int fd, ok;

	xasprintf(&tmp, "%s.tmp", finished_path);
	fd = td_fileio_open_new(tmp, 0600);
	if (fd == -1 || (fp = fdopen(fd, "w")) == NULL) {
		if (fd != -1)
			close(fd);
		free(tmp);
		return;
	}
	ok = 1;
	/* in the order they finished, as the lines were */
	for (seq = 0;; seq = next) {
		t = NULL;
		next = UINT64_MAX;
		for (i = 0; finished != NULL && i < TD_MAX_FINISHED; i++)
			if (finished[i].seq > seq && finished[i].seq < next) {
				next = finished[i].seq;
				t = &finished[i];
			}
		if (t == NULL)
			break;
		if (finished_line(&t->e, line, sizeof line) == -1 ||
		    fputs(line, fp) == EOF)
			ok = 0;
		k++;
	}
	if (fclose(fp) != 0)
		ok = 0;
	if (ok && rename(tmp, finished_path) == 0)
		finished_lines = k;
	else
		unlink(tmp);
	free(tmp);
}

/* Take in what an earlier tdlisten left in dir. */
void
finished_load(const char *dir)
{
	struct finished e;
	char line[1024];
	FILE *fp;
	int fd;

	free(finished_path);
	xasprintf(&finished_path, "%s/%s", dir, FINISHED_FILE);
	finished_lines = 0;
	fd = open(finished_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || (fp = fdopen(fd, "r")) == NULL) {
		if (fd != -1)
			close(fd);
		return;
	}
	while (fgets(line, sizeof line, fp) != NULL) {
		finished_lines++;
		if (finished_parse(line, &e) == 0)
			finished_put(&e);
	}
	fclose(fp);
	if (finished_lines > TD_MAX_FINISHED)
		finished_rewrite();
}

/* A recording finished: remember it here and in the file. */
void
finished_add(const struct finished *e)
{
	char line[1024];
	int fd, n;

	finished_put(e);
	if (finished_path == NULL || (n = finished_line(e, line,
	    sizeof line)) == -1)
		return;
	if (finished_lines >= 4 * TD_MAX_FINISHED) {
		finished_rewrite();
		return;
	}
	fd = open(finished_path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd == -1)
		return;
	if (write(fd, line, (size_t)n) == n)
		finished_lines++;
	close(fd);
}

/* The recording of identity with recording_id, if it finished lately. */
const struct finished *
finished_find(const char *identity, uint64_t recording_id)
{
	const struct finished_slot *t, *best = NULL;
	unsigned int i;

	/* the first that finished, should an agent have reused an id */
	for (i = 0; finished != NULL && i < TD_MAX_FINISHED; i++) {
		t = &finished[i];
		if (t->seq != 0 && t->e.recording_id == recording_id &&
		    strcmp(t->e.identity, identity) == 0 &&
		    (best == NULL || t->seq < best->seq))
			best = t;
	}
	return best != NULL ? &best->e : NULL;
}

void
finished_free(void)
{
	free(finished_path);
	finished_path = NULL;
	free(finished);
	finished = NULL;
	finished_seq = 0;
}
