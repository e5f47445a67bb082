/*
 * standby-agent.c: fuzz-standby's agent side (first byte odd): what
 * a collector sends a standby agent (START, STOP, GO, ...), decoded as
 * agent/standby/standby.c's standby_frame() does and each START put to the
 * machine's policy, agent/standby/standbycfg.c's standby_allowed(), with the
 * options standby_parse() made of --allow-events, --max-buffer and
 * --max-duration. agent/standby/standby.c itself (its loop, the TLS
 * connection, the child it forks) is not linked: the decoding and the policy
 * are.
 *
 * The input: a policy line "EVENTS\tKB\tSECONDS\tCLOCKS" (a field left
 * out: not given; CLOCKS: the machine's trace clocks), a newline, then
 * the collector's byte stream, frame after frame until one does not
 * parse.  Checked: every START, STOP and GO that unpacks packs again to
 * the same bytes; a START the policy allows is one the agent may run:
 * each event a SYSTEM or SYSTEM:EVENT word (no leading '-': it becomes an
 * argument) matching one of the --allow-events patterns as given (whole,
 * however long), at most TD_MAX_EVENT_ARGS of them, the buffer within
 * --max-buffer, the duration within --max-duration, the name a word of
 * letters, digits, '.', '_', '-' (no leading '-'), the clock one of the
 * machine's; a refused one says why.
 *
 * The oracle (word(), event_allowed(), has_clock(), check_allowed()) is
 * written apart from standbycfg.c on purpose, and must stay so: it says
 * again, in code of its own, what tdagent.8 promises of --allow-events,
 * --max-buffer and --max-duration, and the real standby_allowed() is held
 * to it.  Calling standbycfg.c's own helpers here would hold the policy
 * to itself and find nothing: an independent oracle is what found a
 * --allow-events list cut at a fixed size letting "irq:irq_handler_entry"
 * through as "irq" (standbycfg.c's standby_event_ok() tells it).  What is
 * under test, standby_parse() and standby_allowed(), is the real code.
 */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "standbycfg.h"
#include "fuzz.h"

void	fuzz_standby_agent(const uint8_t *data, size_t size);
void	fuzz_standby_agent_setup(void);

static char *conf;	/* an empty configuration file (-c) */

static void
cleanup(void)
{
	char *dir;

	unlink(conf);
	if ((dir = strrchr(conf, '/')) != NULL) {
		*dir = '\0';
		rmdir(conf);
	}
	free(conf);
}

void
fuzz_standby_agent_setup(void)
{
	char *dir = fuzz_tmpdir("fuzz-standby");
	FILE *fp;

	FUZZ_CHECK(asprintf(&conf, "%s/agent.conf", dir) > 0);
	free(dir);
	FUZZ_CHECK((fp = fopen(conf, "w")) != NULL);
	fclose(fp);
	atexit(cleanup);
}

/* A word: letters, digits and extra's bytes only, not starting with '-'. */
static bool
word(const char *s, const char *extra)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char set[sizeof alnum + 8];

	FUZZ_CHECK(strlen(extra) < 8);
	snprintf(set, sizeof set, "%s%s", alnum, extra);
	return s[0] != '\0' && s[0] != '-' && strspn(s, set) == strlen(s);
}

/* pat without the blanks around it ("a, b" in a file), in place. */
static char *
trim(char *pat)
{
	char *end;

	pat += strspn(pat, " \t\n\v\f\r");
	end = pat + strlen(pat);
	while (end > pat && strchr(" \t\n\v\f\r", end[-1]) != NULL)
		end--;
	*end = '\0';
	return pat;
}

/*
 * Whether ev is allowed by one of allow's patterns, the whole list as
 * given: a glob of SYSTEM:EVENT, or a SYSTEM (no ':') that is ev's own.
 */
static bool
event_allowed(const char *allow, const char *ev)
{
	const char *colon = strchr(ev, ':');
	size_t syslen = colon != NULL ? (size_t)(colon - ev) : 0;
	char *list = strdup(allow), *p, *pat;
	bool ok = false;

	FUZZ_CHECK(list != NULL);
	for (p = list; !ok && (pat = strsep(&p, ",")) != NULL;) {
		pat = trim(pat);
		if (*pat == '\0')
			continue;
		ok = fnmatch(pat, ev, 0) == 0 || (colon != NULL &&
		    strchr(pat, ':') == NULL && strlen(pat) == syslen &&
		    strncmp(pat, ev, syslen) == 0);
	}
	free(list);
	return ok;
}

/* Whether clock is one of clocks' space-separated words. */
static bool
has_clock(const char *clocks, const char *clock)
{
	char *list = strdup(clocks), *p, *w;
	bool ok = false;

	FUZZ_CHECK(list != NULL);
	for (p = list; !ok && (w = strsep(&p, " ")) != NULL;)
		ok = strcmp(w, clock) == 0;
	free(list);
	return ok;
}

/* A START the policy allowed: one the agent may run. */
static void
check_allowed(const struct standby_opts *o, const struct td_start *r,
    const char *clocks)
{
	char list[TD_STANDBY_EVENTS + 1], *p, *ev;
	int n = 0;

	snprintf(list, sizeof list, "%s", r->events);
	for (p = list; (ev = strsep(&p, ",")) != NULL; n++) {
		FUZZ_CHECK(word(ev, "_:"));
		FUZZ_CHECK(event_allowed(o->allow_events, ev));
	}
	FUZZ_CHECK(n >= 1 && n <= TD_MAX_EVENT_ARGS);
	FUZZ_CHECK(r->buffer_kb <= o->max_buffer);
	FUZZ_CHECK(r->seconds <= o->max_duration);
	FUZZ_CHECK(r->name[0] == '\0' || word(r->name, "._-"));
	FUZZ_CHECK(r->clock[0] == '\0' || (word(r->clock, "_-") &&
	    has_clock(clocks, r->clock)));
}

/* The frame f packs again (into b) to the same payload. */
static void
same_again(const struct td_frame *f, int packed, struct td_buf *b)
{
	FUZZ_CHECK(packed == 0);
	FUZZ_CHECK(b->len == TD_FRAME_HEADER + f->len &&
	    memcmp(b->data + TD_FRAME_HEADER, f->payload, f->len) == 0);
	td_buf_reset(b);
}

void
fuzz_standby_agent(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	char *line, *fields[4] = { NULL }, *p, err[TD_MAX_ERROR_LEN];
	char clocks[TD_STANDBY_CLOCKS + 1];
	const char *argv[16];
	struct standby_opts o;
	struct td_start *r;
	struct td_frame f;
	struct td_buf b;
	size_t pos, off;
	uint32_t req;
	int argc = 0, i;

	if (nl == NULL)
		return;
	FUZZ_CHECK((line = strndup((const char *)data,
	    (size_t)(nl - data))) != NULL);
	p = line;
	for (i = 0; i < 4 && p != NULL; i++)
		fields[i] = strsep(&p, "\t");
	argv[argc++] = "tdagent";
	argv[argc++] = "--standby";
	argv[argc++] = "-h";
	argv[argc++] = "collector.example";
	argv[argc++] = "--insecure";
	argv[argc++] = "-c";
	argv[argc++] = conf;
	if (fields[0] != NULL && fields[0][0] != '\0') {
		argv[argc++] = "--allow-events";
		argv[argc++] = fields[0];
	}
	if (fields[1] != NULL && fields[1][0] != '\0') {
		argv[argc++] = "--max-buffer";
		argv[argc++] = fields[1];
	}
	if (fields[2] != NULL && fields[2][0] != '\0') {
		argv[argc++] = "--max-duration";
		argv[argc++] = fields[2];
	}
	argv[argc] = NULL;
	snprintf(clocks, sizeof clocks, "%s", fields[3] != NULL ?
	    fields[3] : "local global counter uptime perf mono mono_raw boot "
	    "x86-tsc");
	if (standby_parse(argc, (char **)argv, &o, err, sizeof err) == -1) {
		FUZZ_CHECK(err[0] != '\0');
		free(line);
		return;
	}
	FUZZ_CHECK((r = malloc(sizeof *r)) != NULL);
	td_buf_init(&b, TD_FRAME_HEADER + TD_MAX_STANDBY_MSG);
	off = (size_t)(nl + 1 - data);
	data += off;
	size -= off;
	for (pos = 0; td_frame_parse(data + pos, size - pos, &f) == 1;
	    pos += f.total) {
		switch (f.type) {
		case TD_MSG_START:
			if (td_msg_unpack_start(&f, r) == -1)
				break;
			same_again(&f, td_msg_pack_start(&b, r), &b);
			err[0] = '\0';
			if (standby_allowed(&o, r, clocks, err, sizeof err))
				check_allowed(&o, r, clocks);
			else
				FUZZ_CHECK(err[0] != '\0');
			break;
		case TD_MSG_STOP:
			if (td_msg_unpack_stop(&f, &req) == 0)
				same_again(&f, td_msg_pack_stop(&b, req), &b);
			break;
		case TD_MSG_GO:
			if (td_msg_unpack_go(&f, &req) == 0)
				same_again(&f, td_msg_pack_go(&b, req), &b);
			break;
		default:
			break;
		}
	}
	td_buf_free(&b);
	free(r);
	for (i = 0; i < o.nheld; i++)
		free(o.held[i]);
	free(line);
}
