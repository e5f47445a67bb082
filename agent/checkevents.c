/*
 * checkevents.c: "tdagent check-events": parse every event format of the
 * system with libtraceevent, as trace-cmd check-events does, and name the
 * ones that fail.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <tracefs.h>

#include "agent.h"
#include "instance.h"
#include "banned.h"

static int
checkevents_one(struct tep_handle *tep, const char *dir, const char *sys,
    const char *ev, int *failed)
{
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
	ret = tep_parse_event(tep, fmt, len, sys);
	if (ret != 0) {
		tep_strerror(tep, ret, msg, sizeof msg);
		printf("%s:%s: %s\n", sys, ev, msg);
		(*failed)++;
	}
	free(fmt);
	return 1;
}

/* Entry point of the check-events subcommand. */
int
checkevents_main(int argc, char **argv)
{
	struct tep_plugin_list *plugins = NULL;
	struct tep_handle *tep;
	const char *dir = NULL;
	char **systems, **events, err[1024];
	int ch, noplugins = 0, i, j, n = 0, failed = 0, r;

	optind = 1;
	while ((ch = getopt(argc, argv, "Nt:h")) != -1) {
		switch (ch) {
		case 'N':
			noplugins = 1;
			break;
		case 't':
			dir = optarg;
			break;
		case 'h':
			printf("usage: tdagent check-events [-N] "
			    "[-t TRACING_DIR]\n");
			return 0;
		default:
			fprintf(stderr, "usage: tdagent check-events [-N] "
			    "[-t TRACING_DIR]\n");
			return 2;
		}
	}
	if (dir == NULL) {
		if (instance_check_tracefs(err, sizeof err) == -1) {
			fprintf(stderr, "tdagent: %s\n", err);
			return 1;
		}
		dir = tracefs_tracing_dir();
	}
	if ((tep = tep_alloc()) == NULL) {
		fprintf(stderr, "tdagent: out of memory\n");
		return 1;
	}
	if (!noplugins)
		plugins = tep_load_plugins(tep);
	systems = tracefs_event_systems(dir);
	if (systems == NULL) {
		fprintf(stderr, "tdagent: no event systems under '%s/events'\n",
		    dir);
		tep_free(tep);
		return 1;
	}
	for (i = 0; systems[i] != NULL; i++) {
		events = tracefs_system_events(dir, systems[i]);
		for (j = 0; events != NULL && events[j] != NULL; j++) {
			r = checkevents_one(tep, dir, systems[i], events[j],
			    &failed);
			if (r > 0)
				n++;
		}
		tracefs_list_free(events);
	}
	tracefs_list_free(systems);
	fprintf(stderr, "tdagent: %d event formats parsed, %d failed%s\n", n,
	    failed, noplugins ? " (plugins not loaded)" : "");
	if (plugins != NULL)
		tep_unload_plugins(plugins, tep);
	tep_free(tep);
	return failed ? 1 : 0;
}
