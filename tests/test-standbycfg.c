/*
 * test-standbycfg.c: tdagent --standby's options, configuration file and
 * the check of a collector's request against the machine's limits.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "standbycfg.h"

static const char *clocks = "local global mono x86-tsc";

/* A request for events, with buffer and seconds. */
static struct td_start *
req(const char *events, uint32_t kb, uint32_t secs)
{
	static struct td_start r;

	memset(&r, 0, sizeof r);
	snprintf(r.events, sizeof r.events, "%s", events);
	r.buffer_kb = kb;
	r.seconds = secs;
	return &r;
}

/* What a parse kept of the file. */
static void
drop(struct standby_opts *o)
{
	int i;

	for (i = 0; i < o->nheld; i++)
		free(o->held[i]);
	o->nheld = 0;
}

static void
parse(struct standby_opts *o, const char *conf, const char *a1,
    const char *a2, int want)
{
	char path[] = "/tmp/test-standbycfg-XXXXXX", err[512];
	char *argv[] = { "tdagent", "--standby", "-c", path,
	    (char *)a1, (char *)a2, NULL };
	int fd, argc = 4 + (a1 != NULL) + (a2 != NULL);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, conf, strlen(conf)), (ssize_t)strlen(conf));
	close(fd);
	assert_int_equal(standby_parse(argc, argv, o, err, sizeof err), want);
	unlink(path);
}

static void
test_allowed(void **state)
{
	struct standby_opts o;
	struct td_start *r;
	char err[512];

	(void)state;
	parse(&o, "host collector\ninsecure yes\n"
	    "allow-events = sched, raw_syscalls:sys_enter ,irq:*\n", NULL,
	    NULL, 0);
	/* the file's list, its spaces around commas kept as they are */
	assert_string_equal(o.allow_events,
	    "sched, raw_syscalls:sys_enter ,irq:*");
	/* ... but no part of the patterns */
	assert_true(standby_allowed(&o, req("raw_syscalls:sys_enter", 0, 0),
	    clocks, err, sizeof err));
	assert_true(standby_allowed(&o, req("irq:x", 0, 0), clocks, err,
	    sizeof err));
	drop(&o);
	parse(&o, "host collector\ninsecure yes\n", "--allow-events",
	    "sched,raw_syscalls:sys_enter,irq:irq_*", 0);
	assert_true(standby_allowed(&o, req("sched", 0, 0), clocks, err,
	    sizeof err));
	/* a system allows its events */
	assert_true(standby_allowed(&o, req("sched:sched_switch,sched", 0, 0),
	    clocks, err, sizeof err));
	assert_true(standby_allowed(&o, req("irq:irq_handler_entry", 0, 0),
	    clocks, err, sizeof err));
	assert_false(standby_allowed(&o, req("irq", 0, 0), clocks, err,
	    sizeof err));
	assert_string_equal(err, "event 'irq' not allowed (--allow-events "
	    "sched,raw_syscalls:sys_enter,irq:irq_*)");
	assert_false(standby_allowed(&o, req("raw_syscalls", 0, 0), clocks,
	    err, sizeof err));
	/* "sched" must not allow "schedx:..." */
	assert_false(standby_allowed(&o, req("schedx:a", 0, 0), clocks, err,
	    sizeof err));
	/* no globs, no options, nothing odd in a request */
	assert_false(standby_allowed(&o, req("sched*", 0, 0), clocks, err,
	    sizeof err));
	assert_false(standby_allowed(&o, req("-o/etc/x", 0, 0), clocks, err,
	    sizeof err));
	assert_false(standby_allowed(&o, req("sched,", 0, 0), clocks, err,
	    sizeof err));
	/* the limits: defaults 8192 KB and 3600 s */
	assert_true(standby_allowed(&o, req("sched", 8192, 3600), clocks, err,
	    sizeof err));
	assert_false(standby_allowed(&o, req("sched", 8193, 0), clocks, err,
	    sizeof err));
	assert_string_equal(err, "buffer of 8193 KB over --max-buffer 8192 KB");
	assert_false(standby_allowed(&o, req("sched", 0, 3601), clocks, err,
	    sizeof err));
	/* names and clocks */
	r = req("sched", 0, 0);
	strcpy(r->name, "ok.name_1-2");
	strcpy(r->clock, "mono");
	assert_true(standby_allowed(&o, r, clocks, err, sizeof err));
	strcpy(r->name, "../etc");
	assert_false(standby_allowed(&o, r, clocks, err, sizeof err));
	strcpy(r->name, "x");
	strcpy(r->clock, "mon");
	assert_false(standby_allowed(&o, r, clocks, err, sizeof err));
	strcpy(r->clock, "x86-tsc");
	assert_true(standby_allowed(&o, r, clocks, err, sizeof err));
	/*
	 * A list longer than a START's events, read whole: cut at 1024
	 * bytes, "irq:irq_handler_entry" was "irq", every irq event
	 * (fuzz-standby's standby-allow-truncated)
	 */
	{
		static char long_allow[2048];

		memset(long_allow, 'x', 1020);
		memcpy(long_allow, "sched_", 6);
		strcpy(long_allow + 1020, ",irq:irq_handler_entry");
		o.allow_events = long_allow;
		assert_false(standby_allowed(&o, req("irq:softirq_entry", 0, 0),
		    clocks, err, sizeof err));
		assert_true(standby_allowed(&o, req("irq:irq_handler_entry",
		    0, 0), clocks, err, sizeof err));
	}
	drop(&o);
}

static void
test_config(void **state)
{
	struct standby_opts o;

	(void)state;
	/* the flags win over the file */
	parse(&o, "# comment\n\nhost a\nport 4001\ninsecure yes\n"
	    "max-buffer 100\nmax-duration = 20\n", "--max-buffer", "50", 0);
	assert_string_equal(o.host, "a");
	assert_string_equal(o.port, "4001");
	assert_int_equal(o.max_buffer, 50);
	assert_int_equal(o.max_duration, 20);
	assert_string_equal(o.allow_events, STANDBY_ALLOW_EVENTS);
	drop(&o);
	parse(&o, "host a\ninsecure yes\nnosuch 1\n", NULL, NULL, -1);
	drop(&o);
	parse(&o, "host a\ninsecure yes\nmax-buffer -1\n", NULL, NULL, -1);
	drop(&o);
	parse(&o, "host a\ninsecure maybe\n", NULL, NULL, -1);
	drop(&o);
	/* TLS needs its files */
	parse(&o, "host a\n", NULL, NULL, -1);
	drop(&o);
	/* no collector */
	parse(&o, "insecure yes\n", NULL, NULL, -1);
	drop(&o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowed),
		cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
