/*
 * test-hcache.c: the listener's header cache (listener/recording/hcache.c) on a
 * directory of its own: entries are kept only under the hash of what came,
 * private sections per identity and the formats shared, a damaged entry is
 * dropped, a copy opened survives its eviction, the oldest go first past
 * the cap, and what an interrupted put left is swept at start.
 */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "buf.h"
#include "hcache.h"
#include "tdlimits.h"
#include "tdproto.h"

static char dir[] = "/tmp/test-hcache.XXXXXX";

static void
ref_of(struct td_section_ref *r, uint16_t id, const void *p, size_t n)
{
	unsigned int len;

	memset(r, 0, sizeof *r);
	r->id = id;
	r->length = n;
	EVP_Digest(p, n, r->sha, &len, EVP_sha256(), NULL);
}

/* Keep n bytes of p as section id of identity, offered as want. */
static int
put(struct hcache *hc, const char *identity, const struct td_section_ref *want,
    const void *p, size_t n)
{
	struct hcache_put *hp;
	char err[256];

	hp = hcache_put_begin(hc, identity, want, err, sizeof err);
	assert_non_null(hp);
	assert_int_equal(hcache_put_write(hp, p, n), 0);
	return hcache_put_end(hp, err, sizeof err);
}

static int
collect_cb(void *arg, const void *p, size_t n)
{
	return td_buf_add(arg, p, n);
}

/* Whether DIR/.tdlisten-cache/SUB/ holds r's entry. */
static bool
exists(const char *sub, const struct td_section_ref *r)
{
	char path[4096], hex[65];
	struct stat st;
	int i;

	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", r->sha[i]);
	snprintf(path, sizeof path, "%s/.tdlisten-cache/%s/%s", dir, sub, hex);
	return stat(path, &st) == 0;
}

static void
test_hcache(void **state)
{
	static const char formats[] = "name: sched_switch\nID: 316\n";
	struct td_section_ref rf, rk, rbad;
	struct hcache *hc;
	struct td_buf got;
	char *kallsyms, path[4096], err[256];
	size_t klen = 3 * 1024 * 1024 + 17;
	bool bad;
	int fd;
	FILE *f;

	kallsyms = malloc(klen);
	assert_non_null(kallsyms);
	for (size_t i = 0; i < klen; i++)
		kallsyms[i] = "0123456789abcdef T sym\n"[i % 23];
	ref_of(&rf, 18, formats, sizeof formats - 1);
	ref_of(&rk, 19, kallsyms, klen);
	hc = hcache_new(dir);
	assert_non_null(hc);

	/* nothing yet */
	assert_int_equal(hcache_have(hc, "web1", &rk, &bad), -1);
	assert_false(bad);
	/* an agent that offered rk but sent other bytes: not kept */
	kallsyms[0] ^= 1;
	assert_int_equal(put(hc, "web1", &rk, kallsyms, klen), 0);
	kallsyms[0] ^= 1;
	assert_int_equal(hcache_have(hc, "web1", &rk, &bad), -1);
	/* the true bytes: kept, kallsyms in the identity's own directory */
	assert_int_equal(put(hc, "web1", &rk, kallsyms, klen), 1);
	assert_int_equal(put(hc, "web1", &rf, formats, sizeof formats - 1), 1);
	assert_true(exists("id/web1", &rk));
	assert_true(exists("shared", &rf));
	/* web2 gets the formats, never web1's kallsyms */
	assert_int_equal(hcache_have(hc, "web2", &rk, &bad), -1);
	fd = hcache_have(hc, "web2", &rf, &bad);
	assert_true(fd >= 0);
	close(fd);
	/* the copy, exactly */
	td_buf_init(&got, 16 * 1024 * 1024);
	fd = hcache_have(hc, "web1", &rk, &bad);
	assert_true(fd >= 0);
	assert_int_equal(hcache_read(hc, "web1", &rk, fd, collect_cb, &got,
	    err, sizeof err), 0);
	assert_int_equal(got.len, klen);
	assert_memory_equal(got.data, kallsyms, klen);
	/* by name too (a resumed stream) */
	td_buf_reset(&got);
	assert_int_equal(hcache_read(hc, "web1", &rk, -1, collect_cb, &got,
	    err, sizeof err), 0);
	assert_int_equal(got.len, klen);
	/* an opened copy survives the entry's removal */
	fd = hcache_have(hc, "web1", &rk, &bad);
	assert_true(fd >= 0);
	snprintf(path, sizeof path, "%s/.tdlisten-cache/id/web1/", dir);
	for (int i = 0; i < 32; i++)
		snprintf(path + strlen(path), 3, "%02x", rk.sha[i]);
	assert_int_equal(unlink(path), 0);
	td_buf_reset(&got);
	assert_int_equal(hcache_read(hc, "web1", &rk, fd, collect_cb, &got,
	    err, sizeof err), 0);
	assert_int_equal(got.len, klen);
	assert_int_equal(hcache_read(hc, "web1", &rk, -1, collect_cb, &got,
	    err, sizeof err), -1);
	assert_non_null(strstr(err, "it is gone"));
	/* a damaged entry is removed and said so */
	assert_int_equal(put(hc, "web1", &rk, kallsyms, klen), 1);
	f = fopen(path, "r+");
	assert_non_null(f);
	fseek(f, 1000, SEEK_SET);
	fputc('X', f);
	fclose(f);
	assert_int_equal(hcache_have(hc, "web1", &rk, &bad), -1);
	assert_true(bad);
	assert_false(exists("id/web1", &rk));
	/* too big to keep */
	rbad = rk;
	rbad.length = TD_HCACHE_IDENTITY_MAX / 2 + 1;
	assert_null(hcache_put_begin(hc, "web1", &rbad, err, sizeof err));
	td_buf_free(&got);
	hcache_free(hc);
	free(kallsyms);
}

/* Make web3's entry of r s seconds old. */
static void
age(const struct td_section_ref *r, int s)
{
	struct timespec t[2];
	char path[4096];
	int i;

	snprintf(path, sizeof path, "%s/.tdlisten-cache/id/web3/", dir);
	for (i = 0; i < 32; i++)
		snprintf(path + strlen(path), 3, "%02x", r->sha[i]);
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= s;
	t[1] = t[0];
	assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* Past TD_HCACHE_IDENTITY_MAX the least lately used go first. */
static void
test_hcache_evict(void **state)
{
	size_t n = 30 * 1024 * 1024;
	struct td_section_ref r[3];
	struct hcache *hc;
	char *p, tmp[4096];
	bool bad;
	int i, fd;

	p = calloc(1, n);
	assert_non_null(p);
	hc = hcache_new(dir);
	for (i = 0; i < 3; i++) {
		p[0] = (char)i;
		ref_of(&r[i], 19, p, n);
		assert_int_equal(put(hc, "web3", &r[i], p, n), 1);
		if (i == 1) {
			/* both old, the first older; then it is used again */
			age(&r[0], 200);
			age(&r[1], 100);
			fd = hcache_have(hc, "web3", &r[0], &bad);
			assert_true(fd >= 0);
			close(fd);
		}
	}
	assert_true(exists("id/web3", &r[0]));
	assert_false(exists("id/web3", &r[1]));
	assert_true(exists("id/web3", &r[2]));
	hcache_free(hc);
	/* what an interrupted put left goes at the next start */
	snprintf(tmp, sizeof tmp, "%s/.tdlisten-cache/id/web3/.tmp-abcdef",
	    dir);
	fclose(fopen(tmp, "w"));
	hc = hcache_new(dir);
	assert_int_equal(access(tmp, F_OK), -1);
	hcache_free(hc);
	free(p);
}

/*
 * Issue 31, row 10: one identity's sections, offered with a hash they do
 * not have (never kept), are still written: past TD_HCACHE_WRITE_MAX
 * within the window no put starts for it; another identity's does, and
 * its own entries count in hcache_usage() (its --quota).
 */
static void
test_hcache_write_budget(void **state)
{
	size_t n = 30 * 1024 * 1024;
	struct td_section_ref r, good;
	struct hcache_put *hp;
	struct hcache *hc;
	char err[256], *p;
	uint64_t written = 0;
	int i;

	p = calloc(1, n);
	assert_non_null(p);
	hc = hcache_new(dir);
	ref_of(&r, 19, p, n);
	r.sha[0] ^= 1;				/* a lie */
	for (i = 0; i < 10; i++) {
		hp = hcache_put_begin(hc, "evil", &r, err, sizeof err);
		if (hp == NULL)
			break;
		assert_int_equal(hcache_put_write(hp, p, n), 0);
		assert_int_equal(hcache_put_end(hp, err, sizeof err), 0);
		written += n;
	}
	assert_true(written <= TD_HCACHE_WRITE_MAX);
	assert_int_equal(written, (TD_HCACHE_WRITE_MAX / n) * n);
	assert_non_null(strstr(err, "'evil' had"));
	/* more bytes than declared are refused */
	ref_of(&good, 19, p, 1024);
	hp = hcache_put_begin(hc, "web6", &good, err, sizeof err);
	assert_non_null(hp);
	assert_int_equal(hcache_put_write(hp, p, 2048), -1);
	hcache_put_abort(hp);
	/* another identity is not held back */
	assert_int_equal(hcache_usage(hc, "web5"), 0);
	assert_int_equal(put(hc, "web5", &good, p, 1024), 1);
	assert_int_equal(hcache_usage(hc, "web5"), 1024);
	assert_int_equal(hcache_usage(hc, "evil"), 0);
	assert_int_equal(hcache_usage(NULL, "web5"), 0);
	hcache_free(hc);
	free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hcache),
		cmocka_unit_test(test_hcache_evict),
		cmocka_unit_test(test_hcache_write_budget),
	};
	char cmd[256];
	int ret;

	if (mkdtemp(dir) == NULL)
		return 1;
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		ret = 1;
	return ret;
}
