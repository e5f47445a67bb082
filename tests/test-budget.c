/*
 * test-budget.c: the memory and descriptor accounts of tdlisten's sessions
 * (listener/edge/budget.c).
 *
 * A session's figure counts against its own cap, its identity's and the
 * total, each reported as the one passed; closing an account gives
 * everything back and drops an identity's pool with its last session;
 * descriptor reservations stop at the limit less the connections and the
 * reserve, and at an identity's share, and a refused reservation takes
 * nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "budget.h"
#include "banned.h"

static const struct budget_caps caps = {
	.session = 100, .identity = 150, .total = 250, .fds = 64,
	.fd_reserve = 10,
};

static int
setup(void **state)
{
	budget_init(&caps);
	return 0;
}

static void
test_caps(void **state)
{
	struct budget_account *a = budget_open("web1");
	struct budget_account *b = budget_open("web1");
	struct budget_account *c = budget_open("db1");
	struct budget_account *d = budget_open("db2");

	assert_int_equal(budget_set(a, 100), BUDGET_OK);
	assert_int_equal(budget_set(a, 101), BUDGET_SESSION);
	assert_int_equal(budget_set(a, 90), BUDGET_OK);
	/* web1: 90 + 61 passes its identity's 150, db1 does not notice */
	assert_int_equal(budget_set(b, 61), BUDGET_IDENTITY);
	assert_int_equal(budget_set(c, 99), BUDGET_OK);
	assert_int_equal(budget_identity_held("web1"), 151);
	assert_int_equal(budget_set(b, 60), BUDGET_OK);
	/* 90 + 60 + 99 = 249; one more byte anywhere passes the total */
	assert_int_equal(budget_held(), 249);
	assert_int_equal(budget_set(d, 2), BUDGET_TOTAL);
	assert_int_equal(budget_set(d, 1), BUDGET_OK);
	budget_close(a);
	assert_int_equal(budget_identity_held("web1"), 60);
	assert_int_equal(budget_held(), 160);
	budget_close(b);
	assert_int_equal(budget_identity_held("web1"), 0);
	budget_close(c);
	budget_close(d);
	assert_int_equal(budget_held(), 0);
	budget_close(NULL);
}

static void
test_fds(void **state)
{
	struct budget_account *a = budget_open("web1");
	struct budget_account *b = budget_open("web2");

	/* 64 - 10 reserved - 4 connections = 50 for recordings */
	assert_true(budget_fds(a, 30, 4) == BUDGET_OK);
	assert_false(budget_fds(b, 21, 4) == BUDGET_OK);
	assert_int_equal(budget_fds_reserved(), 30);
	assert_true(budget_fds(b, 20, 4) == BUDGET_OK);
	assert_false(budget_fds(b, 20, 5) == BUDGET_OK);	/* one more connection */
	assert_int_equal(budget_fds_reserved(), 50);
	/* a second reservation replaces the first */
	assert_true(budget_fds(a, 10, 4) == BUDGET_OK);
	assert_int_equal(budget_fds_reserved(), 30);
	budget_close(a);
	budget_close(b);
	assert_int_equal(budget_fds_reserved(), 0);
}

/* One identity's reservations stop at its share; others still fit. */
static void
test_identity_fds(void **state)
{
	static const struct budget_caps shared = {
		.session = 100, .identity = 150, .total = 250, .fds = 64,
		.fd_reserve = 10, .identity_fds = 18,
	};
	struct budget_account *a, *b, *c, *d, *e, *f;

	/* 64 - 10 reserved = 54 for recordings, 18 of them per identity */
	budget_init(&shared);
	a = budget_open("hostile");
	b = budget_open("hostile");
	c = budget_open("hostile");
	d = budget_open("honest");
	e = budget_open("db1");
	f = budget_open("db2");
	assert_int_equal(budget_fds(a, 9, 0), BUDGET_OK);
	assert_int_equal(budget_fds(b, 9, 0), BUDGET_OK);
	/* its share is spent: refused, nothing taken */
	assert_int_equal(budget_fds(c, 1, 0), BUDGET_IDENTITY);
	assert_int_equal(budget_fds_reserved(), 18);
	/* the others still get theirs, until the process's limit */
	assert_int_equal(budget_fds(d, 19, 0), BUDGET_IDENTITY);
	assert_int_equal(budget_fds(d, 18, 0), BUDGET_OK);
	assert_int_equal(budget_fds(e, 18, 0), BUDGET_OK);
	assert_int_equal(budget_fds(f, 1, 0), BUDGET_TOTAL);
	assert_int_equal(budget_fds_reserved(), 54);
	/* a closed account gives its share back */
	budget_close(a);
	assert_int_equal(budget_fds(c, 9, 0), BUDGET_OK);
	assert_int_equal(budget_fds_reserved(), 54);
	budget_close(b);
	budget_close(c);
	budget_close(d);
	budget_close(e);
	budget_close(f);
	assert_int_equal(budget_fds_reserved(), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_caps, setup),
		cmocka_unit_test_setup(test_fds, setup),
		cmocka_unit_test(test_identity_fds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
