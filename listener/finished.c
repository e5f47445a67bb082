/*
 * finished.c: the recordings tdlisten finished lately, for an agent that
 * missed its DONE (the connection broke after END) and comes back to
 * resume: it is told DONE again instead of "no recording to resume".
 *
 * The table lives in memory and in DIR/.tdlisten-finished, one line per
 * recording appended as it finishes ("RECORDING_ID END_OFFSET SIZE
 * IDENTITY PATH", the id in hex), so a DONE lost to a tdlisten restart is
 * answered too.  At start the last FINISHED_MAX lines are taken in (lines
 * that do not parse are skipped); the file is rewritten with those alone
 * (write, rename) once it holds four times as many.  Like checkpoints, the
 * lines are written with write(2), not fsync(2): they survive a crash of
 * tdlisten, not of the machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "listener.h"
#include "xmalloc.h"
#include "banned.h"

#define FINISHED_MAX	256
#define FINISHED_FILE	".tdlisten-finished"

static struct finished	 finished[FINISHED_MAX];
static unsigned int	 finished_n;		/* ever added */
static unsigned int	 finished_lines;	/* in the file */
static char		*finished_path;

static void
finished_put(const struct finished *e)
{
	finished[finished_n++ % FINISHED_MAX] = *e;
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
	char line[1024], *tmp;
	unsigned int i, k;
	FILE *fp;
	int ok;

	xasprintf(&tmp, "%s.tmp", finished_path);
	if ((fp = fopen(tmp, "w")) == NULL) {
		free(tmp);
		return;
	}
	k = finished_n < FINISHED_MAX ? finished_n : FINISHED_MAX;
	ok = 1;
	for (i = finished_n - k; i < finished_n; i++)
		if (finished_line(&finished[i % FINISHED_MAX], line,
		    sizeof line) == -1 || fputs(line, fp) == EOF)
			ok = 0;
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

	free(finished_path);
	xasprintf(&finished_path, "%s/%s", dir, FINISHED_FILE);
	finished_n = finished_lines = 0;
	if ((fp = fopen(finished_path, "r")) == NULL)
		return;
	while (fgets(line, sizeof line, fp) != NULL) {
		finished_lines++;
		if (finished_parse(line, &e) == 0)
			finished_put(&e);
	}
	fclose(fp);
	if (finished_lines > FINISHED_MAX)
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
	if (finished_lines >= 4 * FINISHED_MAX) {
		finished_rewrite();
		return;
	}
	fd = open(finished_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0644);
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
	unsigned int i, k = finished_n < FINISHED_MAX ? finished_n :
	    FINISHED_MAX;

	for (i = 0; i < k; i++)
		if (finished[i].recording_id == recording_id &&
		    strcmp(finished[i].identity, identity) == 0)
			return &finished[i];
	return NULL;
}

void
finished_free(void)
{
	free(finished_path);
	finished_path = NULL;
}
