/*
 * test-kallsyms.c: the KALLSYMS text when /proc/kallsyms is read a second
 * time (agent/capture/meta.c meta_kallsyms_copy(): tdagent without a
 * memfd).  The size was counted by a first read; the file may have grown
 * or shrunk since.  Whatever the reads give, the section holds exactly
 * size bytes: the file's whole lines up to the last one that ends within
 * size, then newlines; never a piece of a line.
 *
 *   - a file of exactly size bytes goes as it is;
 *   - a file that grew, cut at every kind of place (inside a line that
 *     starts in an earlier read of 64 KiB, right after a newline, one byte
 *     into a line, on a read's boundary): its whole lines, then newlines;
 *   - a file that shrank: all of it, then newlines;
 *   - the same through a pipe written in uneven pieces (reads cut lines
 *     anywhere);
 *   - a sink that fails makes it fail.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "meta.h"
#include "banned.h"

static struct td_buf	text;	/* a kallsyms of about 300 KB */
static struct td_buf	got;	/* what the sink was given */
static int		fail_write;

static int
sink_write(void *arg, const void *p, size_t n)
{
	(void)arg;
	if (fail_write) {
		errno = ENOSPC;
		return -1;
	}
	return td_buf_add(&got, p, n);
}

static const struct meta_sink sink = { .write = sink_write };

/* Lines as /proc/kallsyms has them, of uneven lengths. */
static void
make_text(void)
{
	unsigned int i;

	td_buf_init(&text, 1 << 20);
	for (i = 0; text.len < 300000; i++)
		assert_int_equal(td_buf_printf(&text, "ffffffff%08x %c %s_%u%s\n",
		    0x81000000u + i * 16, "TtDdBbRr"[i % 8],
		    i % 7 == 0 ? "a_rather_longer_symbol_name_of_a_driver" :
		    "sym", i, i % 5 == 0 ? "\t[some_module]" : ""), 0);
}

/* A file (memfd) holding the first len bytes of text, at offset 0. */
static int
text_fd(size_t len)
{
	int fd = memfd_create("test-kallsyms", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text.data, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* got must be text's whole lines within size (of len), then newlines. */
static void
check(size_t size, size_t len)
{
	size_t whole = size < len ? size : len, i;

	while (whole > 0 && text.data[whole - 1] != '\n')
		whole--;
	assert_int_equal(got.len, size);
	assert_memory_equal(got.data, text.data, whole);
	for (i = whole; i < size; i++)
		if (got.data[i] != '\n')
			fail_msg("size %zu of %zu: byte %zu is 0x%02x, not a "
			    "newline (whole lines end at %zu)", size, len, i,
			    (unsigned char)got.data[i], whole);
}

/* meta_kallsyms_copy() of size bytes from a file of len bytes. */
static void
copy(size_t size, size_t len)
{
	int fd = text_fd(len);

	td_buf_reset(&got);
	assert_int_equal(meta_kallsyms_copy(fd, (int64_t)size, &sink), 0);
	close(fd);
	check(size, len);
}

/* The offset of the n-th line's first byte after at. */
static size_t
line_after(size_t at)
{
	while (at < text.len && text.data[at] != '\n')
		at++;
	return at + 1;
}

static void
test_unchanged(void **unused)
{
	(void)unused;
	copy(text.len, text.len);
	assert_memory_equal(got.data, text.data, text.len);
	copy(0, text.len);
}

static void
test_grew(void **unused)
{
	size_t sizes[64], n = 0, b, i;

	(void)unused;
	/* around each 64 KiB read: inside the line that spans it */
	for (b = 65536; b < text.len; b += 65536) {
		sizes[n++] = b - 1;
		sizes[n++] = b;
		sizes[n++] = b + 1;
		sizes[n++] = b + 10;
		sizes[n++] = line_after(b) - 1;	/* on a newline */
		sizes[n++] = line_after(b);	/* right after one */
		sizes[n++] = line_after(b) + 1;	/* one byte into a line */
	}
	sizes[n++] = 1;
	sizes[n++] = 100;
	sizes[n++] = text.len - 1;
	for (i = 0; i < n; i++)
		copy(sizes[i], text.len);
}

static void
test_shrank(void **unused)
{
	(void)unused;
	copy(text.len, line_after(70000));
	copy(200000, line_after(150000));
	copy(text.len, 0);
}

/* Through a pipe, written in uneven pieces by a child. */
static void
test_pipe(void **unused)
{
	size_t sizes[] = { 65536 + 10, 131072 + 3, 250001 };
	size_t i, at, piece;
	int p[2], status;
	pid_t pid;

	(void)unused;
	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		assert_int_equal(pipe(p), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			for (at = 0; at < text.len; at += piece) {
				piece = 1 + (at * 7919 + i) % 5000;
				if (piece > text.len - at)
					piece = text.len - at;
				if (write(p[1], text.data + at, piece) !=
				    (ssize_t)piece)
					_exit(1);
			}
			_exit(0);
		}
		close(p[1]);
		td_buf_reset(&got);
		assert_int_equal(meta_kallsyms_copy(p[0], (int64_t)sizes[i],
		    &sink), 0);
		close(p[0]);	/* the child may be told EPIPE: not asked */
		assert_int_equal(waitpid(pid, &status, 0), pid);
		check(sizes[i], text.len);
	}
}

static void
test_sink_fails(void **unused)
{
	int fd = text_fd(text.len);

	(void)unused;
	fail_write = 1;
	assert_int_equal(meta_kallsyms_copy(fd, (int64_t)text.len, &sink), -1);
	assert_int_equal(errno, ENOSPC);
	fail_write = 0;
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unchanged),
		cmocka_unit_test(test_grew),
		cmocka_unit_test(test_shrank),
		cmocka_unit_test(test_pipe),
		cmocka_unit_test(test_sink_fails),
	};
	int ret;

	make_text();
	td_buf_init(&got, 1 << 20);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	td_buf_free(&text);
	td_buf_free(&got);
	return ret;
}
