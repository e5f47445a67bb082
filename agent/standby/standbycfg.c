/*
 * standbycfg.c: the options of tdagent --standby, its configuration file
 * (/etc/tracedock/agent.conf: "key value" lines, the keys the long
 * options' names; the flags win) and the check of a collector's request
 * against them (see standby.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standbycfg.h"
#include "xmalloc.h"
#include "banned.h"

enum {
	SO_CERT = 1000,
	SO_KEY,
	SO_CA,
	SO_SERVER_NAME,
	SO_INSECURE,
	SO_ALLOW,
	SO_MAX_BUFFER,
	SO_MAX_DURATION,
	SO_STANDBY,
	SO_ALLOW_ARM,
	SO_HELP,
};

static const struct option standby_longopts[] = {
	{ "standby", no_argument, NULL, SO_STANDBY },
	{ "cert", required_argument, NULL, SO_CERT },
	{ "key", required_argument, NULL, SO_KEY },
	{ "ca", required_argument, NULL, SO_CA },
	{ "server-name", required_argument, NULL, SO_SERVER_NAME },
	{ "insecure", no_argument, NULL, SO_INSECURE },
	{ "allow-events", required_argument, NULL, SO_ALLOW },
	{ "max-buffer", required_argument, NULL, SO_MAX_BUFFER },
	{ "max-duration", required_argument, NULL, SO_MAX_DURATION },
	{ "allow-arm", no_argument, NULL, SO_ALLOW_ARM },
	{ "config", required_argument, NULL, 'c' },
	{ "help", no_argument, NULL, SO_HELP },
	{ NULL, 0, NULL, 0 },
};

static void
standby_usage(FILE *fp)
{
	fprintf(fp,
"usage: tdagent --standby [-h HOST] [-p PORT] [--cert FILE --key FILE --ca FILE]\n"
"                [--server-name NAME | --insecure] [--allow-events LIST]\n"
"                [--max-buffer KB] [--max-duration S] [--allow-arm] [-u USER]\n"
"                [-c FILE] [-q | -v]\n"
"\n"
"Wait for the collector HOST (tdlisten --control, tdctl start) to ask for\n"
"recordings, over one outbound connection kept open; record what it asks\n"
"within this machine's limits.  Unset options come from the configuration\n"
"file (keys: host port cert key ca server-name insecure allow-events\n"
"max-buffer max-duration allow-arm user).\n"
"\n"
"  --allow-events LIST  comma-separated SYSTEM or SYSTEM:EVENT patterns\n"
"                     (globs) a collector may ask for; a SYSTEM allows its\n"
"                     events (default " STANDBY_ALLOW_EVENTS ")\n"
"  --max-buffer KB    the largest ring buffer per CPU it may ask for\n"
"                     (default %d)\n"
"  --max-duration S   the longest recording; a request without -s gets\n"
"                     this (default %d)\n"
"  --allow-arm        let the collector arm a flight recorder here (tdctl\n"
"                     arm): a ring of its own in overwrite mode, within\n"
"                     the limits above, streamed only on a snapshot\n"
"                     (default: refused)\n"
"  -c, --config FILE  the configuration file (default " STANDBY_CONFIG ";\n"
"                     that one may be missing)\n"
"  -u USER            the recordings' unprivileged user (default nobody)\n",
	    STANDBY_MAX_BUFFER, STANDBY_MAX_DURATION);
}

/* A positive number up to max: 0, or -1. */
static int
standby_number(const char *s, uint32_t max, uint32_t *v)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || n == 0 || n > max ||
	    s[0] == '-')
		return -1;
	*v = (uint32_t)n;
	return 0;
}

/* One "key value" of the file, for what the flags left unset. */
static int
standby_key(struct standby_opts *o, const char *k, const char *v,
    bool *set_buf, bool *set_dur, char *err, size_t errlen)
{
	const char **slot = NULL;
	char *copy;

	if (strcmp(k, "host") == 0)
		slot = &o->host;
	else if (strcmp(k, "port") == 0)
		slot = &o->port;
	else if (strcmp(k, "cert") == 0)
		slot = &o->cert;
	else if (strcmp(k, "key") == 0)
		slot = &o->key;
	else if (strcmp(k, "ca") == 0)
		slot = &o->ca;
	else if (strcmp(k, "server-name") == 0)
		slot = &o->server_name;
	else if (strcmp(k, "user") == 0)
		slot = &o->user;
	else if (strcmp(k, "allow-events") == 0)
		slot = &o->allow_events;
	else if (strcmp(k, "allow-arm") == 0) {
		if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0) {
			snprintf(err, errlen, "allow-arm: yes or no");
			return -1;
		}
		if (strcmp(v, "yes") == 0)
			o->allow_arm = true;
		return 0;
	} else if (strcmp(k, "insecure") == 0) {
		if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0) {
			snprintf(err, errlen, "insecure: yes or no");
			return -1;
		}
		if (strcmp(v, "yes") == 0)
			o->insecure = true;
		return 0;
	} else if (strcmp(k, "max-buffer") == 0) {
		if (*set_buf)
			return 0;
		*set_buf = true;
		if (standby_number(v, 1u << 30, &o->max_buffer) == -1) {
			snprintf(err, errlen, "max-buffer: '%s' is not a "
			    "number of KB", v);
			return -1;
		}
		return 0;
	} else if (strcmp(k, "max-duration") == 0) {
		if (*set_dur)
			return 0;
		*set_dur = true;
		if (standby_number(v, 1u << 30, &o->max_duration) == -1) {
			snprintf(err, errlen, "max-duration: '%s' is not a "
			    "number of seconds", v);
			return -1;
		}
		return 0;
	} else {
		snprintf(err, errlen, "unknown key '%.64s'", k);
		return -1;
	}
	if (*slot != NULL || o->nheld >= (int)(sizeof o->held /
	    sizeof *o->held))
		return 0;
	copy = xstrdup(v);
	o->held[o->nheld++] = copy;
	*slot = copy;
	return 0;
}

/* Read the configuration file; a missing default one is no error. */
static int
standby_read_config(struct standby_opts *o, const char *path, bool given,
    bool set_buf, bool set_dur, char *err, size_t errlen)
{
	char line[4096], e[256], *k, *v, *end;
	FILE *fp;
	int n = 0;

	if ((fp = fopen(path, "re")) == NULL) {
		if (!given && errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, fp) != NULL) {
		n++;
		if (strchr(line, '\n') == NULL && !feof(fp)) {
			snprintf(err, errlen, "%s:%d: line too long", path, n);
			fclose(fp);
			return -1;
		}
		for (k = line; isspace((unsigned char)*k); k++)
			;
		if (*k == '#' || *k == '\0')
			continue;
		for (v = k; *v != '\0' && !isspace((unsigned char)*v) &&
		    *v != '='; v++)
			;
		if (*v != '\0')
			*v++ = '\0';
		while (isspace((unsigned char)*v) || *v == '=')
			v++;
		end = v + strlen(v);
		while (end > v && isspace((unsigned char)end[-1]))
			*--end = '\0';
		if (*v == '\0' && (strcmp(k, "insecure") == 0 ||
		    strcmp(k, "allow-arm") == 0))
			v = "yes";
		if (*v == '\0') {
			snprintf(err, errlen, "%s:%d: '%s' without a value",
			    path, n, k);
			fclose(fp);
			return -1;
		}
		if (standby_key(o, k, v, &set_buf, &set_dur, e,
		    sizeof e) == -1) {
			snprintf(err, errlen, "%s:%d: %s", path, n, e);
			fclose(fp);
			return -1;
		}
	}
	fclose(fp);
	return 0;
}

int
standby_parse(int argc, char **argv, struct standby_opts *o, char *err,
    size_t errlen)
{
	bool set_buf = false, set_dur = false;
	int ch;

	memset(o, 0, sizeof *o);
	o->max_buffer = STANDBY_MAX_BUFFER;
	o->max_duration = STANDBY_MAX_DURATION;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h:p:u:c:qv", standby_longopts,
	    NULL)) != -1) {
		switch (ch) {
		case SO_STANDBY:
			break;
		case 'h':
			o->host = optarg;
			break;
		case 'p':
			o->port = optarg;
			break;
		case 'u':
			o->user = optarg;
			break;
		case 'c':
			o->config = optarg;
			break;
		case 'q':
			o->verbosity = -1;
			break;
		case 'v':
			o->verbosity = 1;
			break;
		case SO_CERT:
			o->cert = optarg;
			break;
		case SO_KEY:
			o->key = optarg;
			break;
		case SO_CA:
			o->ca = optarg;
			break;
		case SO_SERVER_NAME:
			o->server_name = optarg;
			break;
		case SO_INSECURE:
			o->insecure = true;
			break;
		case SO_ALLOW_ARM:
			o->allow_arm = true;
			break;
		case SO_ALLOW:
			o->allow_events = optarg;
			break;
		case SO_MAX_BUFFER:
			set_buf = true;
			if (standby_number(optarg, 1u << 30,
			    &o->max_buffer) == -1) {
				snprintf(err, errlen, "invalid --max-buffer "
				    "'%s' (KB)", optarg);
				return -1;
			}
			break;
		case SO_MAX_DURATION:
			set_dur = true;
			if (standby_number(optarg, 1u << 30,
			    &o->max_duration) == -1) {
				snprintf(err, errlen, "invalid --max-duration "
				    "'%s' (seconds)", optarg);
				return -1;
			}
			break;
		case SO_HELP:
			standby_usage(stdout);
			exit(0);
		default:
			snprintf(err, errlen, "unknown option (see tdagent "
			    "--standby --help)");
			return -1;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s': a standby "
		    "agent runs no command", argv[optind]);
		return -1;
	}
	if (standby_read_config(o, o->config ? o->config : STANDBY_CONFIG,
	    o->config != NULL, set_buf, set_dur, err, errlen) == -1)
		return -1;
	if (o->allow_events == NULL)
		o->allow_events = STANDBY_ALLOW_EVENTS;
	if (o->port == NULL)
		o->port = "4000";
	if (o->host == NULL) {
		snprintf(err, errlen, "no collector: give -h HOST (or host "
		    "in the configuration file)");
		return -1;
	}
	if (!o->insecure && (o->cert == NULL || o->key == NULL ||
	    o->ca == NULL)) {
		snprintf(err, errlen, "TLS needs --cert, --key and --ca, or "
		    "--insecure on both sides");
		return -1;
	}
	return 0;
}

/* Whether every byte of s is one of ok's classes: a simple word. */
static bool
standby_word(const char *s, const char *extra)
{
	if (*s == '\0' || *s == '-')
		return false;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && strchr(extra, *s) == NULL)
			return false;
	return true;
}

/* Whether event spec ev is one of the allowed patterns. */
static bool
standby_event_ok(const char *allow, const char *ev)
{
	char *list, *p, *pat;
	bool ok = false;
	size_t n;

	/*
	 * The whole list, however long: cut at a fixed size, its last
	 * pattern could come out wider ("irq:irq_handler_entry" as "irq",
	 * every irq event; found by fuzz-standby).
	 */
	list = xstrdup(allow);
	for (p = list; !ok && (pat = strsep(&p, ",")) != NULL;) {
		/* "a, b" in a file: the spaces are no part of a pattern */
		while (isspace((unsigned char)*pat))
			pat++;
		n = strlen(pat);
		while (n > 0 && isspace((unsigned char)pat[n - 1]))
			pat[--n] = '\0';
		if (*pat == '\0')
			continue;
		if (fnmatch(pat, ev, 0) == 0)
			ok = true;
		/* a system allows each of its events */
		n = strlen(pat);
		if (strchr(pat, ':') == NULL && strncmp(ev, pat, n) == 0 &&
		    ev[n] == ':')
			ok = true;
	}
	free(list);
	return ok;
}

/* Whether clock is a word of clocks. */
static bool
standby_has_clock(const char *clocks, const char *clock)
{
	size_t n = strlen(clock);
	const char *p = clocks;

	while ((p = strstr(p, clock)) != NULL) {
		if ((p == clocks || p[-1] == ' ') && (p[n] == ' ' ||
		    p[n] == '\0'))
			return true;
		p += n;
	}
	return false;
}

bool
standby_allowed(const struct standby_opts *o, const struct td_start *r,
    const char *clocks, char *err, size_t errlen)
{
	char list[TD_STANDBY_EVENTS + 1], *p, *ev;
	int n = 0;

	snprintf(list, sizeof list, "%s", r->events);
	for (p = list; (ev = strsep(&p, ",")) != NULL;) {
		if (!standby_word(ev, "_:")) {
			snprintf(err, errlen, "event '%.64s' is not SYSTEM or "
			    "SYSTEM:EVENT", ev);
			return false;
		}
		if (!standby_event_ok(o->allow_events, ev)) {
			snprintf(err, errlen, "event '%.64s' not allowed "
			    "(--allow-events %.200s)", ev, o->allow_events);
			return false;
		}
		if (++n > TD_MAX_EVENT_ARGS) {
			snprintf(err, errlen, "more than %d events",
			    TD_MAX_EVENT_ARGS);
			return false;
		}
	}
	if (r->buffer_kb > o->max_buffer) {
		snprintf(err, errlen, "buffer of %u KB over --max-buffer %u KB",
		    r->buffer_kb, o->max_buffer);
		return false;
	}
	if (r->seconds > o->max_duration) {
		snprintf(err, errlen, "%u s over --max-duration %u s",
		    r->seconds, o->max_duration);
		return false;
	}
	if (r->name[0] != '\0' && !standby_word(r->name, "._-")) {
		snprintf(err, errlen, "name '%.64s': letters, digits, '.', "
		    "'_' and '-' only", r->name);
		return false;
	}
	if (r->clock[0] != '\0' && (!standby_word(r->clock, "_-") ||
	    !standby_has_clock(clocks, r->clock))) {
		snprintf(err, errlen, "no trace clock '%.64s' here (%.200s)",
		    r->clock, clocks);
		return false;
	}
	return true;
}
