/*
 * test-uftrace.c: the uftrace producer's runs
 * (listener/producers/ufsession.c), driven as listener/producers/uftrace.c
 * drives them: a client's bytes go into an evbuffer in small pieces,
 * ufsession_feed() takes them, its verdict is acted on (ufsession_end() with
 * the error, as uf_close() does). Real files in a temporary directory, nothing
 * faked.
 *
 *   - a run as uftrace 0.13 sends it (SEND_DIR_NAME, SEND_DATA of two
 *     threads, one appended, SEND_PERF_DATA, task.txt, sid-*.map, a .sym,
 *     SEND_INFO, a --logfile, SEND_END) becomes DIR/uftrace-<addr>/<UTC
 *     time>/ with exactly the files uftrace replay reads, byte for byte:
 *     the info header in host order, the .dat files appended;
 *   - runs of other clients interleaved with it send a file name with
 *     "../", an absolute one, a frame that is no message, task.txt twice,
 *     SEND_END without the info file:
 *     each is refused with its reason and kept as <UTC time>.incomplete
 *     with it, nothing written outside its directory, while the good run
 *     goes on and completes.
 */
#define _XOPEN_SOURCE 700
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <event2/buffer.h>

#include "listener.h"
#include "log.h"
#include "output.h"
#include "tdlimits.h"
#include "testdata.h"
#include "ufsession.h"

#define MAP_NAME	"sid-0123456789abcdef.map"
#define CHUNK		7	/* bytes fed at a time */
#define NBAD		5	/* hostile runs */

static struct listener_config cfg;
static char *topdir;

/* One client: what it sends, how far the run took it, what it said. */
struct ufclient {
	const char		*addr;
	struct evbuffer		*wire;	/* all it sends */
	struct evbuffer		*in;	/* arrived, not taken yet */
	struct ufsession	*run;	/* NULL: closed */
	int			 verdict;
	char			 err[512];
};

/* What the done hook heard. */
static struct {
	int	 n;
	char	 path[8][512];
	bool	 complete[8];
} done;

static void
done_cb(const struct output_done *d, void *arg)
{
	(void)arg;
	assert_true(done.n < 8);
	assert_string_equal(d->producer, "uftrace");
	snprintf(done.path[done.n], sizeof done.path[0], "%s", d->path);
	done.complete[done.n++] = d->complete;
}

static void
add_hdr(struct evbuffer *b, uint16_t type, uint32_t len)
{
	uint16_t m = htons(0xface), t = htons(type);
	uint32_t l = htonl(len);

	evbuffer_add(b, &m, 2);
	evbuffer_add(b, &t, 2);
	evbuffer_add(b, &l, 4);
}

static void
add_dir(struct evbuffer *b, const char *dir)
{
	add_hdr(b, 101, (uint32_t)strlen(dir));
	evbuffer_add(b, dir, strlen(dir));
}

/* SEND_DATA (102) or SEND_PERF_DATA (104) of id: len bytes of fill. */
static void
add_data(struct evbuffer *b, uint16_t type, uint32_t id, size_t len,
    uint8_t fill)
{
	uint32_t nid = htonl(id);
	uint8_t *p;

	add_hdr(b, type, 4 + (uint32_t)len);
	evbuffer_add(b, &nid, 4);
	p = malloc(len);
	assert_non_null(p);
	memset(p, fill, len);
	evbuffer_add(b, p, len);
	free(p);
}

static void
add_meta(struct evbuffer *b, const char *name, const char *data)
{
	uint32_t nl = htonl((uint32_t)strlen(name));

	add_hdr(b, 106, 4 + (uint32_t)(strlen(name) + strlen(data)));
	evbuffer_add(b, &nl, 4);
	evbuffer_add(b, name, strlen(name));
	evbuffer_add(b, data, strlen(data));
}

/* The info file's 40-byte header, network order, as uftrace sends it. */
static void
info_header(uint8_t *h)
{
	uint32_t version = htonl(4);
	uint16_t hsize = htons(40), stack = htons(65);
	uint64_t feat = 0x0000000000000c3fULL, info = 0x00000000003fffffULL;
	int i;

	memcpy(h, "Ftrace!", 8);
	memcpy(h + 8, &version, 4);
	memcpy(h + 12, &hsize, 2);
	h[14] = 1;	/* little-endian data */
	h[15] = 2;	/* 64-bit */
	for (i = 0; i < 8; i++) {
		h[16 + i] = (uint8_t)(feat >> (56 - 8 * i));
		h[24 + i] = (uint8_t)(info >> (56 - 8 * i));
	}
	memcpy(h + 32, &stack, 2);
	memcpy(h + 34, "\1\2\3\4\5\6", 6);
}

/* What the receiver writes: the same header in host order. */
static void
info_header_host(uint8_t *h)
{
	uint32_t version = 4;
	uint16_t hsize = 40, stack = 65;
	uint64_t feat = 0x0000000000000c3fULL, info = 0x00000000003fffffULL;

	memcpy(h, "Ftrace!", 8);
	memcpy(h + 8, &version, 4);
	memcpy(h + 12, &hsize, 2);
	h[14] = 1;
	h[15] = 2;
	memcpy(h + 16, &feat, 8);
	memcpy(h + 24, &info, 8);
	memcpy(h + 32, &stack, 2);
	memcpy(h + 34, "\1\2\3\4\5\6", 6);
}

static const char info_text[] =
    "exename:/tmp/prog\nbuild_id:0123456789abcdef0123456789abcdef01234567\n"
    "exit_status:0\ncmdline:uftrace record --host 127.0.0.1 /tmp/prog\n"
    "cpuinfo:lines=2\ncpuinfo:nr_cpus=2 / 2 (online/possible)\n";
static const char task_text[] =
    "SESS timestamp=1.000000001 pid=4242 sid=0123456789abcdef "
    "exename=\"/tmp/prog\"\n"
    "TASK timestamp=1.000000002 tid=4242 pid=4242\n"
    "TASK timestamp=1.000000003 tid=4243 pid=4242\n";
static const char map_text[] =
    "555555554000-555555555000 r-xp 00000000 08:01 1 /tmp/prog\n";
static const char sym_text[] = "# symbols\n0000000000001139 T main\n";

static void
add_info(struct evbuffer *b)
{
	uint8_t h[40];

	info_header(h);
	add_hdr(b, 105, 40 + (uint32_t)strlen(info_text));
	evbuffer_add(b, h, 40);
	evbuffer_add(b, info_text, strlen(info_text));
}

/*
 * A run as uftrace 0.13 sends it: data while the program runs (thread
 * 4242 twice, appended), then the metadata, the info, the --logfile, END.
 */
static void
good_run(struct evbuffer *b)
{
	add_dir(b, "uftrace.data");
	add_data(b, 102, 4242, 4096, 0x42);
	add_data(b, 102, 4243, 1000, 0x43);
	add_data(b, 104, 1, 96, 0x01);
	add_data(b, 102, 4242, 808, 0x44);
	add_meta(b, "task.txt", task_text);
	add_meta(b, MAP_NAME, map_text);
	add_meta(b, "prog.sym", sym_text);
	add_info(b);
	add_meta(b, "uftrace.log", "a log nobody asked for\n");
	add_hdr(b, 107, 0);
}

/*
 * A hostile run: a name and a buffer of thread 1, then what bad says
 * ("dotdot", "slash", "garbage", "twice", "noinfo").
 */
static void
bad_run(struct evbuffer *b, const char *bad)
{
	add_dir(b, "../../ufpoke-evil");
	add_data(b, 102, 1, 32, 0x5a);
	if (strcmp(bad, "dotdot") == 0)
		add_meta(b, "../ufpoke-evil.sym", sym_text);
	else if (strcmp(bad, "slash") == 0)
		add_meta(b, "/tmp/ufpoke-evil.sym", sym_text);
	else if (strcmp(bad, "garbage") == 0)
		evbuffer_add(b, "GET / HTTP/1.0\r\n\r\n", 18);
	else if (strcmp(bad, "twice") == 0) {
		add_meta(b, "task.txt", task_text);
		add_meta(b, "task.txt", task_text);
	} else
		add_hdr(b, 107, 0);	/* "noinfo": END, no info */
	/* what would follow if it were not closed */
	add_meta(b, "after.sym", sym_text);
	add_info(b);
	add_hdr(b, 107, 0);
}

static void
client_init(struct ufclient *c, const char *addr, const char *bad)
{
	struct ufsession_done d = { done_cb, NULL };
	char label[64];

	memset(c, 0, sizeof *c);
	c->addr = addr;
	c->wire = evbuffer_new();
	c->in = evbuffer_new();
	assert_non_null(c->wire);
	assert_non_null(c->in);
	if (bad == NULL)
		good_run(c->wire);
	else
		bad_run(c->wire, bad);
	snprintf(label, sizeof label, "uftrace %s:1234", addr);
	c->run = ufsession_new(&cfg, addr, label, &d);
	assert_non_null(c->run);
}

/* CHUNK more bytes arrive; the run takes them.  Whether it is still open. */
static bool
client_step(struct ufclient *c)
{
	size_t n;

	if (c->run == NULL)
		return false;
	n = evbuffer_get_length(c->wire);
	if (n > CHUNK)
		n = CHUNK;
	if (n == 0)
		return false;
	assert_int_equal(evbuffer_remove_buffer(c->wire, c->in, n), (int)n);
	c->verdict = ufsession_feed(c->run, c->in, c->err, sizeof c->err);
	if (c->verdict == 0)
		return true;
	/* what uftrace.c's uf_close() does */
	ufsession_end(c->run, c->verdict == -1 ? c->err : NULL);
	ufsession_free(c->run);
	c->run = NULL;
	return false;
}

static void
client_free(struct ufclient *c)
{
	ufsession_free(c->run);
	evbuffer_free(c->wire);
	evbuffer_free(c->in);
}

/* The one entry of DIR/uftrace-<addr>/ (the run's directory), malloc'd. */
static char *
run_dir(const char *addr)
{
	struct dirent *de;
	char *host, *path = NULL;
	DIR *d;
	int n = 0;

	assert_true(asprintf(&host, "%s/uftrace-%s", topdir, addr) > 0);
	d = opendir(host);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		free(path);
		assert_true(asprintf(&path, "%s/%s", host, de->d_name) > 0);
	}
	closedir(d);
	free(host);
	assert_int_equal(n, 1);
	return path;
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted and joined by spaces, malloc'd. */
static char *
dir_names(const char *dir)
{
	struct dirent *de;
	char *names[64], *out;
	size_t n = 0, i, len = 1, off = 0, k;
	DIR *d;

	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		assert_true(n < 64);
		names[n] = strdup(de->d_name);
		len += strlen(de->d_name) + 1;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_names);
	out = calloc(1, len);
	assert_non_null(out);
	for (i = 0; i < n; i++) {
		if (i > 0)
			out[off++] = ' ';
		k = strlen(names[i]);
		memcpy(out + off, names[i], k);
		off += k;
		free(names[i]);
	}
	return out;
}

/* The whole file dir/name; *len its size. */
static uint8_t *
slurp(const char *dir, const char *name, size_t *len)
{
	struct stat st;
	uint8_t *p;
	char *path;
	int fd;

	assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
	fd = open(path, O_RDONLY);
	if (fd == -1)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	assert_int_equal(fstat(fd, &st), 0);
	p = malloc((size_t)st.st_size + 1);
	assert_non_null(p);
	assert_int_equal(read(fd, p, (size_t)st.st_size), st.st_size);
	p[st.st_size] = '\0';
	close(fd);
	free(path);
	*len = (size_t)st.st_size;
	return p;
}

/* dir/name holds n bytes of fill. */
static void
assert_fill(const char *dir, const char *name, size_t n, uint8_t fill,
    size_t from)
{
	size_t len, i;
	uint8_t *p = slurp(dir, name, &len);

	assert_true(len >= from + n);
	for (i = from; i < from + n; i++)
		if (p[i] != fill)
			fail_msg("%s: byte %zu is 0x%02x, not 0x%02x", name, i,
			    p[i], fill);
	free(p);
}

static void
assert_text(const char *dir, const char *name, const char *text)
{
	size_t len;
	uint8_t *p = slurp(dir, name, &len);

	assert_int_equal(len, strlen(text));
	assert_memory_equal(p, text, len);
	free(p);
}

/* Nothing named like the hostile files anywhere near topdir. */
static void
assert_nothing_escaped(void)
{
	static const char *const where[] = {
		"ufpoke-evil.sym", "../ufpoke-evil.sym", "ufpoke-evil",
		"../ufpoke-evil", "uftrace-10.0.0.2/ufpoke-evil.sym",
		"uftrace-10.0.0.2/ufpoke-evil",
	};
	struct stat st;
	char *path;
	size_t i;

	for (i = 0; i < sizeof where / sizeof *where; i++) {
		assert_true(asprintf(&path, "%s/%s", topdir, where[i]) > 0);
		if (lstat(path, &st) == 0)
			fail_msg("%s exists", path);
		free(path);
	}
	if (lstat("/tmp/ufpoke-evil.sym", &st) == 0)
		fail_msg("/tmp/ufpoke-evil.sym exists");
}

/*
 * A hostile run's directory: incomplete for why, holding files (thread
 * 1's buffer among them).
 */
static void
assert_incomplete(const char *addr, const char *why, const char *files)
{
	char *dir = run_dir(addr), *names;
	size_t len, n = strlen(dir);
	uint8_t *note;

	assert_true(n > 11);
	assert_string_equal(dir + n - 11, ".incomplete");
	names = dir_names(dir);
	assert_string_equal(names, files);
	free(names);
	assert_fill(dir, "1.dat", 32, 0x5a, 0);
	note = slurp(dir, "tdlisten.incomplete", &len);
	if (strstr((char *)note, why) == NULL)
		fail_msg("%s: '%s' does not say '%s'", dir, note, why);
	assert_int_equal(note[len - 1], '\n');
	free(note);
	free(dir);
}

/*
 * One good run and NBAD hostile ones, their bytes interleaved CHUNK at a
 * time: each hostile one is refused with its reason, the good one goes
 * on.
 */
static void
test_runs(void **unused)
{
	static const char *const bad[] = { "dotdot", "slash", "garbage",
	    "twice", "noinfo" };
	static const char *const why[] = {
		"unsafe file name '../ufpoke-evil.sym'",
		"unsafe file name '/tmp/ufpoke-evil.sym'",
		"not a uftrace message",
		"'task.txt' sent twice",
		"SEND_END without the info file",
	};
	static const char *const addr[] = { "10.0.0.2", "10.0.0.3",
	    "10.0.0.4", "10.0.0.5", "10.0.0.6" };
	struct ufclient good, evil[NBAD];
	uint8_t host_info[40];
	char *dir, *names, *clock;
	size_t len, n;
	uint8_t *info;
	bool more;
	int i, ncomplete = 0;

	(void)unused;
	memset(&done, 0, sizeof done);
	client_init(&good, "10.0.0.1", NULL);
	for (i = 0; i < NBAD; i++)
		client_init(&evil[i], addr[i], bad[i]);
	do {
		more = client_step(&good);
		for (i = 0; i < NBAD; i++)
			more |= client_step(&evil[i]);
	} while (more);

	/* each hostile run was closed for its reason, once named */
	for (i = 0; i < NBAD; i++) {
		assert_null(evil[i].run);
		assert_int_equal(evil[i].verdict, -1);
		if (strstr(evil[i].err, why[i]) == NULL)
			fail_msg("%s: '%s', not '%s'", bad[i], evil[i].err,
			    why[i]);
		/* closed at its bad frame: what followed was not taken */
		assert_true(evbuffer_get_length(evil[i].wire) > 0);
		assert_incomplete(addr[i], why[i], i == 3 ?
		    "1.dat task.txt tdlisten.clock tdlisten.incomplete" :
		    "1.dat tdlisten.clock tdlisten.incomplete");
	}
	assert_nothing_escaped();

	/* the good run completed: SEND_END after the info */
	assert_null(good.run);
	assert_int_equal(good.verdict, 1);
	assert_int_equal(evbuffer_get_length(good.wire), 0);
	assert_int_equal(evbuffer_get_length(good.in), 0);
	dir = run_dir("10.0.0.1");
	n = strlen(dir);
	/* DIR/uftrace-10.0.0.1/YYYYmmddTHHMMSSZ, nothing after */
	assert_int_equal(n, strlen(topdir) + strlen("/uftrace-10.0.0.1/") +
	    16);
	assert_int_equal(dir[n - 1], 'Z');
	assert_int_equal(dir[n - 8], 'T');
	names = dir_names(dir);
	assert_string_equal(names, "4242.dat 4243.dat info perf-cpu1.dat "
	    "prog.sym " MAP_NAME " task.txt tdlisten.clock");
	free(names);

	/* the info file: its header in host order, then its text */
	info = slurp(dir, "info", &len);
	assert_int_equal(len, 40 + strlen(info_text));
	info_header_host(host_info);
	assert_memory_equal(info, host_info, 40);
	assert_memory_equal(info + 40, info_text, strlen(info_text));
	free(info);
	assert_text(dir, "task.txt", task_text);
	assert_text(dir, MAP_NAME, map_text);
	assert_text(dir, "prog.sym", sym_text);

	/* the .dat files: exact sizes, thread 4242's two buffers in order */
	info = slurp(dir, "4242.dat", &len);
	assert_int_equal(len, 4096 + 808);
	free(info);
	assert_fill(dir, "4242.dat", 4096, 0x42, 0);
	assert_fill(dir, "4242.dat", 808, 0x44, 4096);
	info = slurp(dir, "4243.dat", &len);
	assert_int_equal(len, 1000);
	free(info);
	assert_fill(dir, "4243.dat", 1000, 0x43, 0);
	info = slurp(dir, "perf-cpu1.dat", &len);
	assert_int_equal(len, 96);
	free(info);
	assert_fill(dir, "perf-cpu1.dat", 96, 0x01, 0);

	clock = (char *)slurp(dir, "tdlisten.clock", &len);
	assert_non_null(strstr(clock, "start_offset_ns: "));
	assert_non_null(strstr(clock, "end_offset_ns: "));
	free(clock);

	/* the done hook heard of all five, the good one complete */
	assert_int_equal(done.n, NBAD + 1);
	for (i = 0; i < done.n; i++)
		if (done.complete[i]) {
			ncomplete++;
			assert_string_equal(done.path[i], dir);
		}
	assert_int_equal(ncomplete, 1);
	free(dir);

	client_free(&good);
	for (i = 0; i < NBAD; i++)
		client_free(&evil[i]);
}

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
setup(void **unused)
{
	(void)unused;
	log_init("test-uftrace", -1, 0);
	topdir = testdata_tmpdir();
	cfg = (struct listener_config){ .dir = topdir, .insecure = true,
	    .max_sessions = 8, .handshake_timeout = 10, .dir_mode = 0700,
	    .file_mode = 0600, .gid = (gid_t)-1 };
	return 0;
}

static int
teardown(void **unused)
{
	(void)unused;
	nftw(topdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(topdir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
