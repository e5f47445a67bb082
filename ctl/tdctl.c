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
"usage: tdctl [-S PATH] list\n"
"       tdctl [-S PATH] start [--hosts PATTERN] -e EVENT... [-f FILTER] [-b KB]\n"
"             [-C CLOCK] [-s SECONDS] [--name NAME]\n"
"       tdctl [-S PATH] stop [--hosts PATTERN] [RECORDING]\n"
"       tdctl --help | --version\n"
"\n"
"Talk to tdlisten's control socket: list the standby agents (tdagent\n"
"--standby), start one recording on every one whose identity or host name\n"
"matches PATTERN (a shell glob, default *), stop their recordings.\n"
"\n"
"  -S PATH          the control socket (default " TDCTL_SOCKET ")\n"
"  --hosts PATTERN  the agents to ask (identity or host name)\n"
"  -e EVENT         SYSTEM or SYSTEM:EVENT to record (repeat it)\n"
"  -f FILTER        an ftrace filter, for every event\n"
"  -b KB            ring buffer per CPU (the agent's --max-buffer caps it)\n"
"  -C CLOCK         trace clock\n"
"  -s SECONDS       duration (default: the agent's --max-duration)\n"
"  --name NAME      the recording's name, its files' suffix (default\n"
"                   ctlN, tdlisten's request number)\n"
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

/* Send req, print the answer; the exit status. */
static int
tdctl_ask(const char *path, const char *req)
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
		fprintf(stderr, "tdctl: %s: %s\n", path, strerror(errno));
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
				return ret;
			}
			printf("%s\n", buf + start);
			fflush(stdout);
			if (tdctl_failed(buf + start))
				ret = 1;
			start = i + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
	}
}

enum { O_HOSTS = 1000, O_NAME, O_HELP, O_VERSION };

static const struct option longopts[] = {
	{ "hosts", required_argument, NULL, O_HOSTS },
	{ "name", required_argument, NULL, O_NAME },
	{ "help", no_argument, NULL, O_HELP },
	{ "version", no_argument, NULL, O_VERSION },
	{ NULL, 0, NULL, 0 },
};

int
main(int argc, char **argv)
{
	const char *path = TDCTL_SOCKET, *cmd, *hosts = "", *filter = "";
	const char *kb = "", *clock = "", *secs = "", *name = "";
	char events[TDCTL_EVENTS + 1] = "", *req, *end;
	size_t reqlen, nev;
	int ch;

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
		die_usage("%s", "no command: list, start or stop");
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
	reqlen = strlen(events) + strlen(filter) + 1024;
	req = malloc(reqlen);
	if (req == NULL)
		return 2;
	if (strcmp(cmd, "list") == 0) {
		if (optind < argc || argc > 1)
			die_usage("%s", "list takes no arguments");
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
	} else
		die_usage("unknown command '%s'", cmd);
	ch = tdctl_ask(path, req);
	free(req);
	return ch;
}
