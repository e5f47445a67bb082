/*
 * checkevents.c: "tdagent check-events": parse every event format of the
 * system with libtraceevent, as trace-cmd check-events does, and name the
 * ones that fail.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <tracefs.h>

#include "agent.h"
#include "instance.h"
#include "xmalloc.h"
#include "banned.h"

static int
checkevents_one(struct tep_handle *tep, const char *dir, const char *sys,
    const char *ev, int verbose, int *failed, int *rawonly)
{
	struct tep_event *event = NULL;
	char path[4096], *fmt = NULL, msg[256];
	size_t len = 0;
	FILE *fp;
	int ret;

	snprintf(path, sizeof path, "%s/events/%s/%s/format", dir, sys, ev);
	if ((fp = fopen(path, "r")) == NULL)
		return 0;	/* not an event directory */
	{
		char buf[8192];
		size_t n;

		while ((n = fread(buf, 1, sizeof buf, fp)) > 0) {
			fmt = realloc(fmt, len + n + 1);
			if (fmt == NULL) {
				fclose(fp);
				return -1;
			}
			memcpy(fmt + len, buf, n);
			len += n;
		}
	}
	fclose(fp);
	if (fmt == NULL)
		return 0;
	fmt[len] = '\0';
	/*
	 * A format libtraceevent rejects is a failure, as for trace-cmd
	 * check-events.  A format it accepts but whose print fmt it cannot
	 * follow is only flagged; such events print as raw fields, so they
	 * are counted apart and listed with -v.
	 */
	ret = tep_parse_event(tep, fmt, len, sys);
	if (ret != 0) {
		tep_strerror(tep, ret, msg, sizeof msg);
		printf("%s:%s: %s\n", sys, ev, msg);
		(*failed)++;
	} else {
		const char *id = strstr(fmt, "\nID:");

		event = id ? tep_find_event(tep, atoi(id + 4)) : NULL;
		if (event != NULL &&
		    (event->flags & TEP_EVENT_FL_FAILED) != 0) {
			if (verbose)
				printf("%s:%s: warning: print format not "
				    "understood (shown as raw fields)\n",
				    sys, ev);
			(*rawonly)++;
		}
	}
	free(fmt);
	return 1;
}

static int
checkevents_names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the subdirectories of path; NULL if it cannot be read. */
static char **
checkevents_subdirs(const char *path, int *count)
{
	struct dirent *de;
	char **names = NULL;
	DIR *d;
	int n = 0;

	if ((d = opendir(path)) == NULL)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || (de->d_type != DT_DIR &&
		    de->d_type != DT_UNKNOWN))
			continue;
		names = xreallocarray(names, n + 1, sizeof *names);
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof *names, checkevents_names_cmp);
	*count = n;
	return names == NULL ? xcalloc(1, sizeof *names) : names;
}

static void
checkevents_free_names(char **names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Entry point of the check-events subcommand. */
int
checkevents_main(int argc, char **argv)
{
	struct tep_plugin_list *plugins = NULL;
	struct tep_handle *tep;
	const char *dir = NULL;
	char **systems, **events, err[1024], path[4096];
	int ch, noplugins = 0, verbose = 0, i, j, n = 0, failed = 0;
	int rawonly = 0, nsys, nev;

	optind = 1;
	while ((ch = getopt(argc, argv, "Nt:hv")) != -1) {
		switch (ch) {
		case 'N':
			noplugins = 1;
			break;
		case 't':
			dir = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			printf("usage: tdagent check-events [-N] [-v] "
			    "[-t TRACING_DIR]\n");
			return 0;
		default:
			fprintf(stderr, "usage: tdagent check-events [-N] [-v] "
			    "[-t TRACING_DIR]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "tdagent: check-events takes no operand "
		    "('%s')\n", argv[optind]);
		return 2;
	}
	if (dir == NULL) {
		if (instance_check_tracefs(err, sizeof err) == -1) {
			fprintf(stderr, "tdagent: %s\n", err);
			return 1;
		}
		dir = tracefs_tracing_dir();
	}
	snprintf(path, sizeof path, "%s/events", dir);
	if ((systems = checkevents_subdirs(path, &nsys)) == NULL) {
		fprintf(stderr, "tdagent: cannot read '%s': %s\n", path,
		    strerror(errno));
		return 1;
	}
	if ((tep = tep_alloc()) == NULL) {
		fprintf(stderr, "tdagent: out of memory\n");
		checkevents_free_names(systems, nsys);
		return 1;
	}
	if (!noplugins)
		plugins = tep_load_plugins(tep);
	for (i = 0; i < nsys; i++) {
		snprintf(path, sizeof path, "%s/events/%s", dir, systems[i]);
		events = checkevents_subdirs(path, &nev);
		for (j = 0; events != NULL && j < nev; j++)
			if (checkevents_one(tep, dir, systems[i], events[j],
			    verbose, &failed, &rawonly) > 0)
				n++;
		if (events != NULL)
			checkevents_free_names(events, nev);
	}
	checkevents_free_names(systems, nsys);
	fprintf(stderr, "tdagent: %d event formats parsed, %d failed, %d print "
	    "formats not understood%s%s\n", n, failed, rawonly,
	    rawonly && !verbose ? " (-v lists them)" : "",
	    noplugins ? " (plugins not loaded)" : "");
	if (plugins != NULL)
		tep_unload_plugins(plugins, tep);
	tep_free(tep);
	return failed ? 1 : 0;
}
