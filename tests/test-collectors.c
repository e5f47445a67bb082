/*
 * test-collectors.c: tdagent's list of collectors (-h A,B,C,
 * agent/net/collectors.c): each item's transport, address and port (its own,
 * or -p's), the server name each is checked against, and the lists that
 * are refused (an empty item, more than TD_MAX_COLLECTORS, a bad port).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "collectors.h"
#include "conn.h"
#include "tdlimits.h"

/* Parse list with -p 4000, TLS on, no --server-name; must succeed. */
static struct collectors *
parse(const char *list)
{
	struct collectors *cl;
	char err[512];

	cl = collectors_parse(list, "4000", NULL, true, err, sizeof err);
	if (cl == NULL)
		fail_msg("'%s': %s", list, err);
	return cl;
}

/* Parse list; must fail with an error that contains want. */
static void
refused(const char *list, const char *want)
{
	char err[512] = "";

	assert_null(collectors_parse(list, "4000", NULL, true, err,
	    sizeof err));
	if (strstr(err, want) == NULL)
		fail_msg("'%s': '%s' lacks '%s'", list, err, want);
}

/* Collector i is kind at addr, port port, checked against name. */
static void
is(struct collectors *cl, int i, enum conn_kind kind, const char *addr,
    const char *port, const char *name)
{
	const struct conn_target *t = collectors_target(cl, i);

	assert_int_equal(t->kind, kind);
	assert_string_equal(t->addr, addr);
	assert_string_equal(t->port, port);
	assert_string_equal(t->server_name, name);
}

/* One collector: what -h always took, unchanged. */
static void
test_one(void **state)
{
	struct collectors *cl;

	(void)state;
	cl = parse("collector");
	assert_int_equal(collectors_count(cl), 1);
	is(cl, 0, CONN_TCP, "collector", "4000", "collector");
	assert_string_equal(collectors_where(cl, 0), "'collector' port 4000");
	collectors_free(cl);
	cl = parse("::1");		/* a bare IPv6 address has no port */
	is(cl, 0, CONN_TCP, "::1", "4000", "::1");
	collectors_free(cl);
	cl = parse("[::1]");
	is(cl, 0, CONN_TCP, "[::1]", "4000", "[::1]");
	collectors_free(cl);
}

/* A list, each item with its own port or -p's. */
static void
test_list(void **state)
{
	struct collectors *cl;
	char err[512];

	(void)state;
	cl = parse("c1.example,10.0.0.2:4001,[fd00::3]:4002,[::1]");
	assert_int_equal(collectors_count(cl), 4);
	is(cl, 0, CONN_TCP, "c1.example", "4000", "c1.example");
	is(cl, 1, CONN_TCP, "10.0.0.2", "4001", "10.0.0.2");
	is(cl, 2, CONN_TCP, "[fd00::3]", "4002", "[fd00::3]");
	is(cl, 3, CONN_TCP, "[::1]", "4000", "[::1]");
	assert_string_equal(collectors_where(cl, 1), "'10.0.0.2' port 4001");
	assert_true(collectors_ported(cl));
	collectors_free(cl);
	/* --server-name: every collector's certificate must name it */
	cl = collectors_parse("vsock:2,vsock:3:5000,c1", "4000", "listener",
	    true, err, sizeof err);
	assert_non_null(cl);
	is(cl, 0, CONN_VSOCK, "2", "4000", "listener");
	assert_int_equal(collectors_target(cl, 1)->cid, 3);
	is(cl, 1, CONN_VSOCK, "3", "5000", "listener");
	is(cl, 2, CONN_TCP, "c1", "4000", "listener");
	assert_string_equal(collectors_where(cl, 1), "vsock CID 3 port 5000");
	collectors_free(cl);
}

/* A serial device keeps its path whole, colons and all. */
static void
test_serial(void **state)
{
	struct collectors *cl;
	char err[512];

	(void)state;
	cl = collectors_parse("serial:/dev/a:b", NULL, "listener", true, err,
	    sizeof err);
	assert_non_null(cl);
	is(cl, 0, CONN_SERIAL, "/dev/a:b", "", "listener");
	assert_false(collectors_ported(cl));
	collectors_free(cl);
	/* over serial a server name is required with TLS */
	refused("host,serial:/dev/x", "--server-name");
}

/* What is refused. */
static void
test_refused(void **state)
{
	char list[256] = "";
	int i;

	(void)state;
	refused("", "an empty collector in the list (item 1)");
	refused("a,,b", "an empty collector in the list (item 2)");
	refused("a,", "an empty collector in the list (item 2)");
	refused(",a", "an empty collector in the list (item 1)");
	refused("a:0", "bad port '0' in 'a:0'");
	refused("a:65536", "bad port '65536'");
	refused("a:x", "bad port 'x'");
	refused("[::1]:", "bad port ''");
	refused("vsock:x", "bad vsock context id");
	for (i = 0; i <= TD_MAX_COLLECTORS; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list),
		    "%sh%d", i ? "," : "", i);
	refused(list, "more than 8 collectors");
	list[strlen(list) - 3] = '\0';		/* 8 of them */
	collectors_free(parse(list));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_serial),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
