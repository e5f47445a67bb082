/*
 * test-onfinish.c: unit tests of listener/fleet/onfinish.c, the --on-finish
 * runner, with real /bin/sh children on a real event loop: the path
 * reaches the command as one argument that no shell reads, with the
 * environment; a failing command is run again with the waits doubling
 * and counted; one that outlives the timeout is killed and given up; the
 * queue stops at TD_ONFINISH_QUEUE (counted, the sidecar still written),
 * one identity at TD_ONFINISH_QUEUE_ID, the rest queued again later;
 * at start the sidecars left are queued again, one whose file is gone is
 * removed and one that is not ours is left alone.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "listener.h"
#include "onfinish.h"
#include "output.h"
#include "tdlimits.h"

/* A temporary directory, the loop and a runner on it. */
struct fixture {
	char			 dir[64];
	struct event_base	*base;
	struct onfinish		*of;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	snprintf(f->dir, sizeof f->dir, "/tmp/td-onfinish.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->base = event_base_new();
	assert_non_null(f->base);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	onfinish_free(f->of);
	event_base_free(f->base);
	if (chdir("/") != 0)
		fprintf(stderr, "cannot go to /\n");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", f->dir);
	free(f);
	return 0;
}

/* The runner for cmd (jobs at once, timeout s, retry s, attempts). */
static void
start(struct fixture *f, const char *cmd, int jobs, int timeout, int retry,
    int attempts)
{
	struct onfinish_config c = { cmd, jobs, timeout, retry, attempts,
	    0600 };
	char err[128];

	f->of = onfinish_new(f->base, &c, err, sizeof err);
	assert_non_null(f->of);
}

static void
done_of(struct fixture *f, const char *identity, const char *path,
    bool complete, const char *name)
{
	struct output_done d = { path, complete, "tdproto", identity, name };

	onfinish_done_cb(&d, f->of);
}

static void
done(struct fixture *f, const char *path, bool complete, const char *name)
{
	done_of(f, "web1", path, complete, name);
}

static void
touch(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static bool
exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

/* Run the loop until nothing is queued (at most 60 s). */
static void
drain(struct fixture *f)
{
	struct onfinish_stats st;
	time_t end = time(NULL) + 60;

	for (;;) {
		onfinish_stats(f->of, &st);
		if (st.queued == 0 || time(NULL) > end)
			break;
		event_base_loop(f->base, EVLOOP_ONCE);
	}
	assert_int_equal(st.queued, 0);
}

/* The path is $1, whole, unread by any shell; the environment is set. */
static void
test_path_and_env(void **state)
{
	struct fixture *f = *state;
	struct onfinish_stats st;
	char cmd[512], path[256], out[256], pwned[128], got[1024];
	char want[1024];
	FILE *fp;
	size_t n;

	snprintf(out, sizeof out, "%s/out", f->dir);
	snprintf(pwned, sizeof pwned, "%s/pwned", f->dir);
	snprintf(path, sizeof path, "%s/a b'c\"$(touch pwned)`touch pwned`;"
	    "d.dat", f->dir);
	touch(path, "x");
	/* a shell that read the path would make pwned here */
	assert_int_equal(chdir(f->dir), 0);
	/* CMD "$1": an inner sh that prints its arguments and the env */
	snprintf(cmd, sizeof cmd, "sh -c 'printf \"%%s\\n\" \"$#\" \"$1\" "
	    "\"$TD_FILE_KIND\" \"$TD_PRODUCER\" \"$TD_IDENTITY\" "
	    "\"$TD_RECORDING\" \"$TD_ATTEMPT\" > %s' inner", out);
	start(f, cmd, 2, 60, 1, 3);
	/* the name as a file's name has it (issue 31, row 5) */
	done(f, path, false, "night run");
	drain(f);
	fp = fopen(out, "r");
	assert_non_null(fp);
	n = fread(got, 1, sizeof got - 1, fp);
	fclose(fp);
	got[n] = '\0';
	snprintf(want, sizeof want, "1\n%s\nincomplete\ntdproto\nweb1\n"
	    "night_run\n1\n", path);
	assert_string_equal(got, want);
	assert_false(exists(pwned));
	onfinish_stats(f->of, &st);
	assert_int_equal(st.started, 1);
	assert_int_equal(st.succeeded, 1);
	assert_int_equal(st.failed, 0);
	/* the sidecar went with the success */
	snprintf(cmd, sizeof cmd, "%s.onfinish", path);
	assert_false(exists(cmd));
}

/*
 * TD_JSON: one JSON object, every string escaped (a quote, a backslash,
 * a control character in the path), the name sanitized (issue 31, row 5).
 */
static void
test_json(void **state)
{
	struct fixture *f = *state;
	char cmd[512], path[256], out[256], got[1024], want[1024];
	FILE *fp;
	size_t n;

	snprintf(out, sizeof out, "%s/out", f->dir);
	snprintf(path, sizeof path, "%s/a\"b\\c\td.dat", f->dir);
	touch(path, "x");
	snprintf(cmd, sizeof cmd, "printf '%%s' \"$TD_JSON\" > %s; :", out);
	start(f, cmd, 1, 60, 1, 1);
	done(f, path, true, "x\",\"identity\":\"web9");
	drain(f);
	fp = fopen(out, "r");
	assert_non_null(fp);
	n = fread(got, 1, sizeof got - 1, fp);
	fclose(fp);
	got[n] = '\0';
	snprintf(want, sizeof want, "{\"path\":\"%s/a\\\"b\\\\c\\u0009d.dat\","
	    "\"kind\":\"complete\",\"producer\":\"tdproto\",\"identity\":"
	    "\"web1\",\"recording\":\"x___identity___web9\",\"attempt\":1}",
	    f->dir);
	assert_string_equal(got, want);
}

/* Two failures then a success: three attempts, counted. */
static void
test_retry(void **state)
{
	struct fixture *f = *state;
	struct onfinish_stats st;
	char path[128], sidecar[160];

	snprintf(path, sizeof path, "%s/r.dat", f->dir);
	snprintf(sidecar, sizeof sidecar, "%s.onfinish", path);
	touch(path, "x");
	start(f, "[ \"$TD_ATTEMPT\" -ge 3 ] && :", 2, 60, 1, 5);
	done(f, path, true, "");
	assert_true(exists(sidecar));
	drain(f);
	onfinish_stats(f->of, &st);
	assert_int_equal(st.started, 3);
	assert_int_equal(st.failed, 2);
	assert_int_equal(st.succeeded, 1);
	assert_int_equal(st.given_up, 0);
	assert_false(exists(sidecar));
}

/* A command that hangs is killed at the timeout; given up, the sidecar
 * stays. */
static void
test_timeout_given_up(void **state)
{
	struct fixture *f = *state;
	struct onfinish_stats st;
	char path[128], sidecar[160];

	snprintf(path, sizeof path, "%s/t.dat", f->dir);
	snprintf(sidecar, sizeof sidecar, "%s.onfinish", path);
	touch(path, "x");
	start(f, "sleep 600; :", 1, 1, 1, 1);
	done(f, path, true, "");
	drain(f);
	onfinish_stats(f->of, &st);
	assert_int_equal(st.started, 1);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.timeouts, 1);
	assert_int_equal(st.given_up, 1);
	assert_true(exists(sidecar));
}

/*
 * Past TD_ONFINISH_QUEUE files (of as many identities): dropped and
 * counted, sidecars written.
 */
static void
test_queue_cap(void **state)
{
	struct fixture *f = *state;
	struct onfinish_stats st;
	char path[128], id[32];
	int i;

	start(f, "sleep 600; :", 1, 600, 1, 1);
	for (i = 0; i <= TD_ONFINISH_QUEUE; i++) {
		snprintf(path, sizeof path, "%s/%d.dat", f->dir, i);
		snprintf(id, sizeof id, "web%d", i);
		done_of(f, id, path, true, "");
	}
	/* the same file again is not queued twice, nor counted */
	snprintf(path, sizeof path, "%s/0.dat", f->dir);
	done_of(f, "web0", path, true, "");
	onfinish_stats(f->of, &st);
	assert_int_equal(st.queued, TD_ONFINISH_QUEUE);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.running, 1);
	assert_int_equal(st.started, 1);
	snprintf(path, sizeof path, "%s/%d.dat.onfinish", f->dir,
	    TD_ONFINISH_QUEUE);
	assert_true(exists(path));
	/* teardown's onfinish_free() stops the running one */
}

/*
 * Issue 31, row 6: one identity finishes 1,100 files while the command is
 * slow; it holds TD_ONFINISH_QUEUE_ID items, the rest wait in their
 * sidecars; another identity's file is queued all the same.  Once the
 * command is fast again every file's command runs, exactly once.
 */
static void
test_queue_per_identity(void **state)
{
	struct fixture *f = *state;
	struct onfinish_stats st;
	char cmd[512], path[128], out[128], line[256];
	FILE *fp;
	int i, n = 0, honest = 0;

	snprintf(out, sizeof out, "%s/out", f->dir);
	snprintf(cmd, sizeof cmd, "while [ ! -e %s/release ]; do sleep "
	    "0.02; done; printf '%%s %%s\\n' \"$TD_IDENTITY\" \"$1\" >> %s; :",
	    f->dir, out);
	start(f, cmd, 2, 600, 1, 1);
	for (i = 0; i < 1100; i++) {
		snprintf(path, sizeof path, "%s/evil-%04d.dat", f->dir, i);
		touch(path, "x");
		done_of(f, "evil", path, true, "");
	}
	onfinish_stats(f->of, &st);
	assert_int_equal(st.queued, TD_ONFINISH_QUEUE_ID);
	assert_int_equal(st.dropped, 1100 - TD_ONFINISH_QUEUE_ID);
	snprintf(path, sizeof path, "%s/honest.dat", f->dir);
	touch(path, "x");
	done_of(f, "web1", path, true, "");
	onfinish_stats(f->of, &st);
	assert_int_equal(st.queued, TD_ONFINISH_QUEUE_ID + 1);
	assert_int_equal(st.dropped, 1100 - TD_ONFINISH_QUEUE_ID);
	snprintf(path, sizeof path, "%s/release", f->dir);
	touch(path, "x");
	drain(f);
	onfinish_stats(f->of, &st);
	assert_int_equal(st.succeeded, 1101);
	assert_int_equal(st.started, 1101);
	fp = fopen(out, "r");
	assert_non_null(fp);
	while (fgets(line, sizeof line, fp) != NULL) {
		n++;
		if (strncmp(line, "web1 ", 5) == 0)
			honest++;
	}
	fclose(fp);
	assert_int_equal(n, 1101);
	assert_int_equal(honest, 1);
	/* every sidecar gone: each file's command ran to its end */
	snprintf(cmd, sizeof cmd, "test -z \"$(find %s -name '*.onfinish')\"",
	    f->dir);
	assert_int_equal(system(cmd), 0);
}

/* At start: a sidecar queued again, one whose file is gone removed, one
 * not ours left alone. */
static void
test_recover(void **state)
{
	struct fixture *f = *state;
	struct onfinish_stats st;
	char sub[96], p[160], out[128];
	char cmd[256], got[512], want[512];
	FILE *fp;
	size_t n;

	snprintf(sub, sizeof sub, "%s/web1", f->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(p, sizeof p, "%s/a.dat", sub);
	touch(p, "x");
	snprintf(p, sizeof p, "%s/a.dat.onfinish", sub);
	touch(p, "tdlisten-onfinish 1\nkind=incomplete\nproducer=tracecmd\n"
	    "identity=web1\nname=n1\n");
	snprintf(p, sizeof p, "%s/gone.dat.onfinish", sub);
	touch(p, "tdlisten-onfinish 1\nkind=complete\n");
	snprintf(p, sizeof p, "%s/x.dat", sub);
	touch(p, "x");
	snprintf(p, sizeof p, "%s/x.dat.onfinish", sub);
	touch(p, "something else\n");
	snprintf(out, sizeof out, "%s/out", f->dir);
	snprintf(cmd, sizeof cmd, "printf '%%s %%s %%s %%s\\n' "
	    "\"$TD_FILE_KIND\" \"$TD_PRODUCER\" \"$TD_RECORDING\" >> %s",
	    out);
	start(f, cmd, 2, 60, 1, 2);
	onfinish_recover(f->of, f->dir);
	drain(f);
	onfinish_stats(f->of, &st);
	assert_int_equal(st.started, 1);
	assert_int_equal(st.succeeded, 1);
	fp = fopen(out, "r");
	assert_non_null(fp);
	n = fread(got, 1, sizeof got - 1, fp);
	fclose(fp);
	got[n] = '\0';
	snprintf(want, sizeof want, "incomplete tracecmd n1 %s/a.dat\n", sub);
	assert_string_equal(got, want);
	snprintf(p, sizeof p, "%s/a.dat.onfinish", sub);
	assert_false(exists(p));
	snprintf(p, sizeof p, "%s/gone.dat.onfinish", sub);
	assert_false(exists(p));
	snprintf(p, sizeof p, "%s/x.dat.onfinish", sub);
	assert_true(exists(p));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_path_and_env, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_given_up, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_queue_cap, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_recover, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_queue_per_identity,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_json, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
