/*
 * tdctl.c: start and stop recordings of standby agents (tdagent
 * --standby) from the collection box, through tdlisten's control socket
 * (tdlisten --control PATH; docs/tdctl.8 says the protocol).  A request
 * is one line of tab-separated fields; the answer is lines until "."
 * alone, printed as they come.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tdlimits.h"
#include "banned.h"

#define TDCTL_SOCKET	"/run/tdlisten/control"
#define TDCTL_EVENTS	1024	/* TD_STANDBY_EVENTS */

static void
usage(FILE *fp)
{
	fprintf(fp,
"usage: tdctl [-S PATH] list [--json]\n"
"       tdctl [-S PATH] start [--hosts PATTERN] -e EVENT... [-f FILTER] [-b KB]\n"
"             [-C CLOCK] [-s SECONDS] [--name NAME]\n"
"       tdctl [-S PATH] stop [--hosts PATTERN] [RECORDING]\n"
"       tdctl [-S PATH] arm [--hosts PATTERN] -e EVENT... [-f FILTER] [-b KB]\n"
"             [--name NAME] [--trigger 'SYSTEM:EVENT if FILTER']\n"
"             [--fanout group|self] [--trigger-holdoff SECONDS]\n"
"       tdctl [-S PATH] disarm [--hosts PATTERN]\n"
"       tdctl [-S PATH] snapshot [--hosts PATTERN] [--name NAME]\n"
"       tdctl [-S PATH] reload\n"
"       tdctl --help | --version\n"
"\n"
"Talk to tdlisten's control socket: list the standby agents (tdagent\n"
"--standby), start one recording on every one whose identity or host name\n"
"matches PATTERN (a shell glob, default *), stop their recordings; arm\n"
"their flight recorders (tdagent --standby --allow-arm), snapshot what\n"
"those rings hold (files printed as start's are), disarm them; reload\n"
"tdlisten's CA, CRL and certificates (as SIGHUP, but told the outcome).\n"
"\n"
"  -S PATH          the control socket (default " TDCTL_SOCKET ")\n"
"  --json           list: JSON, not a table\n"
"  --hosts PATTERN  the agents to ask (identity or host name)\n"
"  -e EVENT         SYSTEM or SYSTEM:EVENT to record (repeat it)\n"
"  -f FILTER        an ftrace filter, for every event\n"
"  -b KB            ring buffer per CPU (the agent's --max-buffer caps it)\n"
"  -C CLOCK         trace clock\n"
"  -s SECONDS       duration (default: the agent's --max-duration)\n"
"  --name NAME      the recording's name, its files' suffix (default\n"
"                   ctlN, tdlisten's request number); arm: the group's\n"
"                   name (default flight); snapshot: the recordings' name\n"
"                   (default GROUP.snapN)\n"
"  --trigger SPEC   arm: freeze the ring when an event matches, and snapshot\n"
"                   (kernel syntax: 'SYSTEM:EVENT if FILTER')\n"
"  --fanout HOW     arm: a trigger snapshots the whole group (group, the\n"
"                   default) or the agent it fired on (self)\n"
"  --trigger-holdoff S  arm: a trigger within S seconds of the group's last\n"
"                   acted-on one is counted, not acted on (default 30)\n"
"\n"
"Exit status: 0 when every agent asked did it, 1 when one refused, was\n"
"busy, went away, did not answer in time or its recording failed (the\n"
"line says why), 2 on a usage or socket error.\n");
}

static void die_usage(const char *, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* A usage error: say it and exit 2. */
static void
die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tdctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'tdctl --help'.\n");
	exit(2);
}

/* A field: no tab, no newline, not too long. */
static const char *
field(const char *what, const char *s, size_t max)
{
	if (strpbrk(s, "\t\n\r") != NULL)
		die_usage("%s: no tabs or newlines", what);
	if (strlen(s) > max)
		die_usage("%s: too long", what);
	return s;
}

/*
 * Whether an answer line says an agent did not do what it was asked:
 * refused, busy, gone, not answering, or a recording that ended in
 * failure ("finished ID NAME exit N" with N not 0, or "signal N").
 */
static int
tdctl_failed(const char *line)
{
	static const char *const bad[] = { "refused ", "error", "busy ",
	    "lost ", "timeout ", "none", "incomplete " };
	const char *p;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (strncmp(line, bad[i], strlen(bad[i])) == 0)
			return 1;
	if (strncmp(line, "finished ", 9) != 0)
		return 0;
	if (strstr(line, " signal ") != NULL)
		return 1;
	if ((p = strstr(line, " exit ")) != NULL &&
	    (p[6] != '0' || (p[7] != '\0' && p[7] != ' ' && p[7] != ':')))
		return 1;
	return 0;
}

/*
 * Whether ev can be an event: SYSTEM or SYSTEM:EVENT (or a bare EVENT),
 * each part letters, digits, '_', '-', '.' and glob characters.  What
 * the agents' kernels have is for them to say.
 */
static int
tdctl_event_ok(const char *ev)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.*?[]";
	const char *colon = strchr(ev, ':');
	size_t n = strspn(ev, ok);

	if (n == 0)
		return 0;
	if (colon == NULL)
		return ev[n] == '\0';
	return ev + n == colon && colon[1] != '\0' &&
	    colon[1 + strspn(colon + 1, ok)] == '\0';
}

/* The columns of tdctl list: the protocol's key, the table's header. */
static const struct {
	const char	*key;		/* "": the identity */
	const char	*head;
	const char	*json;
	int		 kind;		/* 0 string, 1 number, 2 list */
} tdctl_cols[] = {
	{ "", "AGENT", "identity", 0 },
	{ "host", "HOST", "host", 0 },
	{ "state", "STATE", "state", 0 },
	{ "recording", "RECORDING", "recording", 0 },
	{ "allow", "ALLOWED EVENTS", "allow_events", 2 },
	{ "max-buffer", "MAX KB", "max_buffer_kb", 1 },
	{ "max-duration", "MAX S", "max_duration_s", 1 },
	{ "cpus", "CPUS", "cpus", 1 },
	{ "kernel", "KERNEL", "kernel", 0 },
	{ "clocks", "CLOCKS", "clocks", 2 },
	{ "peer", "PEER", "peer", 0 },
	{ "armed", "ARMED", "armed", 0 },
	{ "armed-since", "SINCE", "armed_since", 1 },
	{ "ring", "RING", "armed_ring_kb", 1 },
	{ "window", "WINDOW", "armed_window_s", 1 },
	{ "refused", "LAST REFUSAL", "refused", 0 },
};
#define TDCTL_NCOLS	(sizeof tdctl_cols / sizeof tdctl_cols[0])

/* One agent of tdctl list: its fields, "-" when unknown. */
struct tdctl_row {
	char	*line;			/* owns the strings */
	char	*v[TDCTL_NCOLS];
};

/* The agents listed so far. */
static struct tdctl_row	*tdctl_rows;
static size_t		 tdctl_nrows;

/* An "agent ID key=value ... [refused=WHY]" line into a row. */
static void
tdctl_row_add(const char *line)
{
	struct tdctl_row *r;
	char *p, *w, *eq;
	size_t i;

	r = realloc(tdctl_rows, (tdctl_nrows + 1) * sizeof *r);
	if (r == NULL || (p = strdup(line + 6)) == NULL) {
		fprintf(stderr, "tdctl: out of memory\n");
		exit(2);
	}
	tdctl_rows = r;
	r = &tdctl_rows[tdctl_nrows++];
	r->line = p;
	for (i = 0; i < TDCTL_NCOLS; i++)
		r->v[i] = "-";
	r->v[0] = strsep(&p, " ");
	while (p != NULL && *p != '\0') {
		/* refused= is last: its value has spaces */
		if (strncmp(p, "refused=", 8) == 0) {
			w = p;
			p = NULL;
		} else
			w = strsep(&p, " ");
		if ((eq = strchr(w, '=')) == NULL)
			continue;
		*eq = '\0';
		for (i = 1; i < TDCTL_NCOLS; i++)
			if (strcmp(w, tdctl_cols[i].key) == 0)
				r->v[i] = eq + 1;
	}
	/* 0: an agent older than the allowance in STANDBY */
	for (i = 5; i <= 6; i++)
		if (strcmp(r->v[i], "0") == 0)
			r->v[i] = "-";
}

static int
tdctl_row_cmp(const void *a, const void *b)
{
	const struct tdctl_row *x = a, *y = b;
	int c = strcmp(x->v[0], y->v[0]);

	return c != 0 ? c : strcmp(x->v[1], y->v[1]);
}

/* A JSON string (the listener's fields are printable already). */
static void
tdctl_json_str(const char *s, size_t n)
{
	size_t i;

	putchar('"');
	for (i = 0; i < n && s[i] != '\0'; i++) {
		if (s[i] == '"' || s[i] == '\\')
			putchar('\\');
		if ((unsigned char)s[i] < 0x20)
			printf("\\u%04x", (unsigned char)s[i]);
		else
			putchar(s[i]);
	}
	putchar('"');
}

/* The rows, sorted by identity: a table with a header, or JSON. */
static void
tdctl_rows_print(int json)
{
	size_t w[TDCTL_NCOLS], i, k, n;
	const char *v, *comma;

	if (tdctl_nrows > 0)
		qsort(tdctl_rows, tdctl_nrows, sizeof *tdctl_rows,
		    tdctl_row_cmp);
	if (json) {
		printf("[");
		for (k = 0; k < tdctl_nrows; k++) {
			printf("%s\n  {", k > 0 ? "," : "");
			for (i = 0; i < TDCTL_NCOLS; i++) {
				v = tdctl_rows[k].v[i];
				printf("%s\"%s\": ", i > 0 ? ", " : "",
				    tdctl_cols[i].json);
				if (strcmp(v, "-") == 0 && i > 0)
					printf(tdctl_cols[i].kind == 2 ? "[]" :
					    "null");
				else if (tdctl_cols[i].kind == 1)
					printf("%s", v);
				else if (tdctl_cols[i].kind == 0)
					tdctl_json_str(v, strlen(v));
				else {
					printf("[");
					for (n = 0; *v != '\0'; n++) {
						comma = v + strcspn(v, ",");
						printf("%s", n > 0 ? ", " : "");
						tdctl_json_str(v, (size_t)(comma - v));
						v = *comma != '\0' ? comma + 1 :
						    comma;
					}
					printf("]");
				}
			}
			printf("}");
		}
		printf("%s]\n", tdctl_nrows > 0 ? "\n" : "");
		return;
	}
	if (tdctl_nrows == 0)
		return;
	for (i = 0; i < TDCTL_NCOLS; i++) {
		w[i] = strlen(tdctl_cols[i].head);
		for (k = 0; k < tdctl_nrows; k++)
			if (strlen(tdctl_rows[k].v[i]) > w[i])
				w[i] = strlen(tdctl_rows[k].v[i]);
	}
	for (i = 0; i + 1 < TDCTL_NCOLS; i++)
		printf("%-*s  ", (int)w[i], tdctl_cols[i].head);
	printf("%s\n", tdctl_cols[i].head);
	for (k = 0; k < tdctl_nrows; k++) {
		for (i = 0; i + 1 < TDCTL_NCOLS; i++)
			printf("%-*s  ", (int)w[i], tdctl_rows[k].v[i]);
		printf("%s\n", tdctl_rows[k].v[i]);
	}
}

/*
 * Send req, print the answer (list: into a table, or JSON); the exit
 * status.
 */
static int
tdctl_ask(const char *path, const char *req, int list, int json)
{
	struct sockaddr_un sun;
	char buf[8192];
	size_t have = 0, i, start;
	ssize_t n;
	int fd, ret = 0;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path)
		die_usage("-S %s: path too long", path);
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		fprintf(stderr, "tdctl: %s: %s%s\n", path, strerror(errno),
		    errno == ENOENT || errno == ECONNREFUSED ? ": is "
		    "tdlisten running with --control?" : "");
		return 2;
	}
	for (i = 0; i < strlen(req); i += (size_t)n)
		if ((n = write(fd, req + i, strlen(req) - i)) <= 0) {
			fprintf(stderr, "tdctl: %s: %s\n", path,
			    strerror(errno));
			close(fd);
			return 2;
		}
	for (;;) {
		if (have == sizeof buf) {
			fprintf(stderr, "tdctl: a line too long from %s\n",
			    path);
			close(fd);
			return 2;
		}
		n = read(fd, buf + have, sizeof buf - have);
		if (n <= 0) {
			fprintf(stderr, "tdctl: %s closed before the end of "
			    "the answer\n", path);
			close(fd);
			return 2;
		}
		have += (size_t)n;
		for (start = 0, i = 0; i < have; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = '\0';
			if (strcmp(buf + start, ".") == 0) {
				close(fd);
				if (list)
					tdctl_rows_print(json);
				return ret;
			}
			if (list && strncmp(buf + start, "agent ", 6) == 0)
				tdctl_row_add(buf + start);
			else {
				printf("%s\n", buf + start);
				fflush(stdout);
			}
			if (tdctl_failed(buf + start))
				ret = 1;
			start = i + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
	}
}

enum { O_HOSTS = 1000, O_NAME, O_JSON, O_HELP, O_VERSION, O_TRIGGER,
    O_FANOUT, O_HOLDOFF };

static const struct option longopts[] = {
	{ "hosts", required_argument, NULL, O_HOSTS },
	{ "name", required_argument, NULL, O_NAME },
	{ "json", no_argument, NULL, O_JSON },
	{ "trigger", required_argument, NULL, O_TRIGGER },
	{ "fanout", required_argument, NULL, O_FANOUT },
	{ "trigger-holdoff", required_argument, NULL, O_HOLDOFF },
	{ "help", no_argument, NULL, O_HELP },
	{ "version", no_argument, NULL, O_VERSION },
	{ NULL, 0, NULL, 0 },
};

int
main(int argc, char **argv)
{
	const char *path = TDCTL_SOCKET, *cmd, *hosts = "", *filter = "";
	const char *kb = "", *clock = "", *secs = "", *name = "";
	const char *trigger = "", *fanout = "", *holdoff = "";
	char events[TDCTL_EVENTS + 1] = "", *req, *end;
	size_t reqlen, nev, k;
	int ch, json = 0;

	/* the global options, then the command's */
	while ((ch = getopt_long(argc, argv, "+S:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S':
			path = optarg;
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		case O_VERSION:
			printf("tdctl (tracedock) %s\n", PACKAGE_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try 'tdctl --help'.\n");
			return 2;
		}
	}
	if (optind >= argc)
		die_usage("%s", "no command: list, start, stop, arm, disarm, "
		    "snapshot or reload");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "e:f:b:C:s:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case O_HOSTS:
			hosts = field("--hosts", optarg, 256);
			break;
		case O_NAME:
			name = field("--name", optarg, TD_MAX_NAME_LEN);
			break;
		case O_JSON:
			json = 1;
			break;
		case O_TRIGGER:
			trigger = field("--trigger", optarg, TD_MAX_FILTER_LEN);
			if (strstr(trigger, " if ") == NULL ||
			    strchr(trigger, ':') == NULL ||
			    strchr(trigger, ':') > strstr(trigger, " if "))
				die_usage("--trigger '%s': not 'SYSTEM:EVENT "
				    "if FILTER'", trigger);
			break;
		case O_FANOUT:
			fanout = optarg;
			if (strcmp(fanout, "group") != 0 &&
			    strcmp(fanout, "self") != 0)
				die_usage("--fanout %s: group or self", fanout);
			break;
		case O_HOLDOFF:
			holdoff = optarg;
			if (holdoff[0] == '\0' || (strtoul(holdoff, &end,
			    10), *end != '\0') || holdoff[0] == '-')
				die_usage("--trigger-holdoff %s: a number of "
				    "seconds", holdoff);
			break;
		case 'e':
			field("-e", optarg, TD_MAX_NAME_LEN * 2);
			if (strchr(optarg, ',') != NULL)
				die_usage("-e %s: one event per -e", optarg);
			if (!tdctl_event_ok(optarg))
				die_usage("-e '%s': not an event name (SYSTEM "
				    "or SYSTEM:EVENT, globs allowed)", optarg);
			nev = strlen(events);
			if (nev + strlen(optarg) + 2 > sizeof events)
				die_usage("%s", "too many events");
			snprintf(events + nev, sizeof events - nev, "%s%s",
			    nev > 0 ? "," : "", optarg);
			break;
		case 'f':
			filter = field("-f", optarg, TD_MAX_FILTER_LEN);
			break;
		case 'b':
			kb = optarg;
			if (strtoul(kb, &end, 10) == 0 || *end != '\0')
				die_usage("-b %s: a number of KB", kb);
			break;
		case 'C':
			clock = field("-C", optarg, TD_MAX_NAME_LEN);
			break;
		case 's':
			secs = optarg;
			if (strtoul(secs, &end, 10) == 0 || *end != '\0')
				die_usage("-s %s: a number of seconds", secs);
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'tdctl --help'.\n");
			return 2;
		}
	}
	reqlen = strlen(events) + strlen(filter) + strlen(trigger) + 1024;
	req = malloc(reqlen);
	if (req == NULL)
		return 2;
	if (strcmp(cmd, "list") == 0) {
		if (optind < argc || argc - json > 1)
			die_usage("%s", "list takes --json only");
		snprintf(req, reqlen, "list\n");
	} else if (strcmp(cmd, "start") == 0) {
		if (optind < argc)
			die_usage("start: unexpected '%s'", argv[optind]);
		if (events[0] == '\0')
			die_usage("%s", "start needs at least one -e EVENT");
		snprintf(req, reqlen, "start\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		    hosts, events, filter, kb, clock, secs, name);
	} else if (strcmp(cmd, "stop") == 0) {
		if (events[0] || filter[0] || kb[0] || clock[0] || secs[0] ||
		    name[0])
			die_usage("%s", "stop takes --hosts and a RECORDING "
			    "only");
		if (argc - optind > 1)
			die_usage("stop: unexpected '%s'", argv[optind + 1]);
		snprintf(req, reqlen, "stop\t%s\t%s\n", hosts,
		    optind < argc ? field("RECORDING", argv[optind],
		    TD_MAX_NAME_LEN) : "");
	} else if (strcmp(cmd, "arm") == 0) {
		if (optind < argc)
			die_usage("arm: unexpected '%s'", argv[optind]);
		if (events[0] == '\0')
			die_usage("%s", "arm needs at least one -e EVENT");
		if (clock[0] || secs[0])
			die_usage("%s", "arm takes no -C or -s");
		snprintf(req, reqlen, "arm\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		    hosts, events, filter, kb, name, trigger, fanout, holdoff);
	} else if (strcmp(cmd, "disarm") == 0 ||
	    strcmp(cmd, "snapshot") == 0) {
		if (optind < argc)
			die_usage("%s: unexpected '%s'", cmd, argv[optind]);
		if (events[0] || filter[0] || kb[0] || clock[0] || secs[0] ||
		    (name[0] && strcmp(cmd, "disarm") == 0))
			die_usage("%s takes --hosts%s only", cmd,
			    strcmp(cmd, "snapshot") == 0 ? " and --name" : "");
		if (strcmp(cmd, "disarm") == 0)
			snprintf(req, reqlen, "disarm\t%s\n", hosts);
		else
			snprintf(req, reqlen, "snapshot\t%s\t%s\n", hosts, name);
	} else if (strcmp(cmd, "reload") == 0) {
		if (argc > 1)
			die_usage("%s", "reload takes no arguments");
		snprintf(req, reqlen, "reload\n");
	} else
		die_usage("unknown command '%s'", cmd);
	if ((trigger[0] || fanout[0] || holdoff[0]) && strcmp(cmd, "arm") != 0)
		die_usage("%s", "--trigger, --fanout and --trigger-holdoff go "
		    "with arm only");
	if (json && strcmp(cmd, "list") != 0)
		die_usage("%s", "--json goes with list only");
	ch = tdctl_ask(path, req, strcmp(cmd, "list") == 0, json);
	for (k = 0; k < tdctl_nrows; k++)
		free(tdctl_rows[k].line);
	free(tdctl_rows);
	free(req);
	return ch;
}
