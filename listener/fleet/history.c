/*
 * history.c: the recordings that ended lately, across restarts (see
 * history.h).
 *
 * One line per recording, oldest first, its fields split by tabs (no
 * name, identity or path holds a control character: the protocol and
 * output.c refuse them):
 *
 *	v1 STATE IDENTITY NAME PATH TRACE_ID FILE_TRACE_ID NCPUS BYTES
 *	EVENTS LOST MISSED SYNC_BOUND SYNC_SAMPLES ELAPSED STARTED
 *
 * with STATE "done" or "early".  A line that does not parse is left out.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "history.h"
#include "log.h"
#include "tally.h"
#include "xmalloc.h"
#include "banned.h"

#define HISTORY_FILE	".tdlisten-history"

static char	*history_path;
static int	 history_warned;	/* a failure is logged once */

/* field i (from 0) of the tab-split line, or NULL. */
static char *
history_fields(char *line, char **f, int n)
{
	int i;

	line[strcspn(line, "\n")] = '\0';
	for (i = 0; i < n; i++) {
		f[i] = line;
		if ((line = strchr(line, '\t')) == NULL)
			break;
		*line++ = '\0';
	}
	return i == n - 1 ? f[0] : NULL;
}

/* One line into r: 0, or -1 when it does not parse. */
static int
history_parse(char *line, struct tally_rec *r)
{
	char *f[16];

	memset(r, 0, sizeof *r);
	if (history_fields(line, f, 16) == NULL || strcmp(f[0], "v1") != 0)
		return -1;
	if (strcmp(f[1], "done") == 0)
		r->state = "done";
	else if (strcmp(f[1], "early") == 0)
		r->state = "ended early";
	else
		return -1;
	if (strlen(f[2]) >= sizeof r->identity || strlen(f[3]) >=
	    sizeof r->name || strlen(f[4]) >= sizeof r->path)
		return -1;
	memcpy(r->identity, f[2], strlen(f[2]) + 1);
	memcpy(r->name, f[3], strlen(f[3]) + 1);
	memcpy(r->path, f[4], strlen(f[4]) + 1);
	r->trace_id = strtoull(f[5], NULL, 16);
	r->file_trace_id = strtoull(f[6], NULL, 16);
	r->ncpus = (uint32_t)strtoul(f[7], NULL, 10);
	r->bytes = strtoull(f[8], NULL, 10);
	r->events = strtoull(f[9], NULL, 10);
	r->lost = strtoull(f[10], NULL, 10);
	r->missed_pages = strtoull(f[11], NULL, 10);
	r->sync_bound_ns = strtoull(f[12], NULL, 10);
	r->sync_samples = (uint32_t)strtoul(f[13], NULL, 10);
	r->elapsed = strtod(f[14], NULL);
	r->started = strtod(f[15], NULL);
	return 0;
}

/* The ring, oldest first, into the file (write, rename). */
static void
history_save_cb(void *arg)
{
	const struct tally_rec *r;
	char *tmp;
	FILE *fp;
	int fd, i, ok = 1;

	xasprintf(&tmp, "%s.tmp", history_path);
	fd = td_fileio_open_new(tmp, 0600);
	if (fd == -1 || (fp = fdopen(fd, "w")) == NULL) {
		if (fd != -1)
			close(fd);
		goto out_warn;
	}
	for (i = TD_TALLY_ENDED - 1; i >= 0; i--) {
		if ((r = tally_ended_at(i)) == NULL)
			continue;
		if (fprintf(fp, "v1\t%s\t%s\t%s\t%s\t%016" PRIx64 "\t%016"
		    PRIx64 "\t%" PRIu32 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
		    "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu32 "\t%.3f\t%.0f\n",
		    strcmp(r->state, "done") == 0 ? "done" : "early",
		    r->identity, r->name, r->path, r->trace_id,
		    r->file_trace_id, r->ncpus, r->bytes, r->events, r->lost,
		    r->missed_pages, r->sync_bound_ns, r->sync_samples,
		    r->elapsed, r->started) < 0)
			ok = 0;
	}
	if (fclose(fp) != 0)
		ok = 0;
	if (ok && rename(tmp, history_path) == 0) {
		free(tmp);
		return;
	}
	unlink(tmp);
out_warn:
	if (!history_warned++)
		log_warn("cannot keep the status page's history in '%s'",
		    history_path);
	free(tmp);
}

void
history_start(const char *dir)
{
	struct tally_rec r;
	char line[4096];
	FILE *fp;
	int fd;

	free(history_path);
	xasprintf(&history_path, "%s/%s", dir, HISTORY_FILE);
	fd = open(history_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd != -1 && (fp = fdopen(fd, "r")) != NULL) {
		while (fgets(line, sizeof line, fp) != NULL)
			if (history_parse(line, &r) == 0)
				tally_restore(&r);
		fclose(fp);
	} else if (fd != -1)
		close(fd);
	tally_on_ended(history_save_cb, NULL);
}

void
history_free(void)
{
	tally_on_ended(NULL, NULL);
	free(history_path);
	history_path = NULL;
}
