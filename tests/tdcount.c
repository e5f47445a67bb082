/*
 * tdcount.c: the test oracle.  Reads a trace.dat file with libtracecmd
 * (trace-cmd 3.1.6's own reader, not tracedock code) and prints, one
 * "key value" a line:
 *
 *	events N		matching events
 *	cpus N			CPUs that hold matching events
 *	cpuK N			matching events on CPU K
 *	missed N		records flagged with missed events before them
 *	order ok|bad		timestamps never go back within a CPU
 *
 * With -l, each matching event first, one a line, in the order read:
 *
 *	ev TS CPU PID SYSTEM:NAME FIELD=0xVALUE...
 *
 * TS in ns as libtracecmd gives it (TSC2NSEC applied), PID the task's,
 * then every field of the event's own (not the common ones) as an
 * unsigned number.
 *
 * usage: tdcount FILE [-l] [-p PID] [-e SYSTEM:EVENT]...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <trace-cmd/trace-cmd.h>

#define MAXCPU 4096

struct count {
	int		 pid;
	char		*names[64];
	int		 nnames;
	unsigned long	 events;
	unsigned long	 cpu[MAXCPU];
	unsigned long long last[MAXCPU];
	unsigned long	 missed;
	int		 bad_order;
	int		 list;
};

/* One event as "ev TS CPU PID SYSTEM:NAME FIELD=0xVALUE...". */
static void
list_event(struct tep_handle *tep, struct tep_record *rec, int cpu)
{
	struct tep_event *ev = tep_find_event_by_record(tep, rec);
	struct tep_format_field **f;
	unsigned long long v;
	int i;

	printf("ev %llu %d %d %s:%s", rec->ts, cpu, tep_data_pid(tep, rec),
	    ev ? ev->system : "?", ev ? ev->name : "?");
	f = ev ? tep_event_fields(ev) : NULL;
	for (i = 0; f != NULL && f[i] != NULL; i++)
		if (tep_read_number_field(f[i], rec->data, &v) == 0)
			printf(" %s=0x%llx", f[i]->name, v);
	free(f);
	printf("\n");
}

static int
count_cb(struct tracecmd_input *h, struct tep_record *rec, int cpu, void *arg)
{
	struct count *c = arg;
	struct tep_handle *tep = tracecmd_get_tep(h);
	struct tep_event *ev;
	char name[256];
	int i, ok;

	if (cpu < 0 || cpu >= MAXCPU)
		return 0;
	if (rec->ts < c->last[cpu])
		c->bad_order = 1;
	c->last[cpu] = rec->ts;
	if (rec->missed_events != 0)
		c->missed++;
	if (c->pid >= 0 && tep_data_pid(tep, rec) != c->pid)
		return 0;
	if (c->nnames > 0) {
		ev = tep_find_event_by_record(tep, rec);
		if (ev == NULL)
			return 0;
		snprintf(name, sizeof name, "%s:%s", ev->system, ev->name);
		for (ok = 0, i = 0; i < c->nnames && !ok; i++)
			ok = strcmp(c->names[i], name) == 0 ||
			    strcmp(c->names[i], ev->system) == 0;
		if (!ok)
			return 0;
	}
	c->events++;
	c->cpu[cpu]++;
	if (c->list)
		list_event(tep, rec, cpu);
	return 0;
}

int
main(int argc, char **argv)
{
	static struct count c;
	struct tracecmd_input *h;
	int ch, i, cpus = 0;

	c.pid = -1;
	while ((ch = getopt(argc, argv, "lp:e:")) != -1) {
		switch (ch) {
		case 'p':
			c.pid = atoi(optarg);
			break;
		case 'l':
			c.list = 1;
			break;
		case 'e':
			if (c.nnames < 64)
				c.names[c.nnames++] = optarg;
			break;
		default:
			fprintf(stderr, "usage: tdcount FILE [-l] [-p PID] "
			    "[-e SYSTEM:EVENT]...\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: tdcount FILE [-l] [-p PID] "
		    "[-e SYSTEM:EVENT]...\n");
		return 2;
	}
	/*
	 * libtracecmd warns about options it does not know, such as
	 * tracedock's time-sync bounds; errors still show
	 */
	tracecmd_set_loglevel(TEP_LOG_ERROR);
	h = tracecmd_open(argv[optind], 0);
	if (h == NULL) {
		fprintf(stderr, "tdcount: libtracecmd cannot open '%s'\n",
		    argv[optind]);
		return 1;
	}
	if (tracecmd_iterate_events(h, NULL, 0, count_cb, &c) < 0) {
		fprintf(stderr, "tdcount: cannot iterate '%s'\n",
		    argv[optind]);
		tracecmd_close(h);
		return 1;
	}
	for (i = 0; i < MAXCPU; i++)
		if (c.cpu[i] != 0)
			cpus++;
	printf("events %lu\ncpus %d\n", c.events, cpus);
	for (i = 0; i < MAXCPU; i++)
		if (c.cpu[i] != 0)
			printf("cpu%d %lu\n", i, c.cpu[i]);
	printf("missed %lu\norder %s\n", c.missed, c.bad_order ? "bad" : "ok");
	tracecmd_close(h);
	return 0;
}
