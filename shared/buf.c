/*
 * buf.c: capped growable buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "xmalloc.h"
#include "banned.h"

/* Start an empty buffer that may hold at most max bytes. */
void
td_buf_init(struct td_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

/* Release the memory of a buffer; it may be reused after td_buf_init(). */
void
td_buf_free(struct td_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* Empty a buffer, keeping its memory. */
void
td_buf_reset(struct td_buf *b)
{
	b->len = 0;
}

static int
td_buf_grow(struct td_buf *b, size_t n)
{
	size_t want, cap;

	if (n > b->max || b->len > b->max - n) {
		errno = ENOBUFS;
		return -1;
	}
	want = b->len + n;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < want)
		cap = cap > b->max / 2 ? b->max : cap * 2;
	b->data = xreallocarray(b->data, cap, 1);
	b->cap = cap;
	return 0;
}

/* Append n bytes. */
int
td_buf_add(struct td_buf *b, const void *p, size_t n)
{
	if (td_buf_grow(b, n) == -1)
		return -1;
	if (n != 0 && p != b->data + b->len)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Room for n bytes at the end, filled in place (buf.h). */
void *
td_buf_room(struct td_buf *b, size_t n)
{
	if (td_buf_grow(b, n) == -1)
		return NULL;
	return b->data + b->len;
}

/* Append n zero bytes. */
int
td_buf_add_zero(struct td_buf *b, size_t n)
{
	if (td_buf_grow(b, n) == -1)
		return -1;
	if (n != 0)
		memset(b->data + b->len, 0, n);
	b->len += n;
	return 0;
}

/* Append a 16-bit integer. */
int
td_buf_add_u16(struct td_buf *b, uint16_t v)
{
	return td_buf_add(b, &v, sizeof v);
}

/* Append a 32-bit integer. */
int
td_buf_add_u32(struct td_buf *b, uint32_t v)
{
	return td_buf_add(b, &v, sizeof v);
}

/* Append a 64-bit integer. */
int
td_buf_add_u64(struct td_buf *b, uint64_t v)
{
	return td_buf_add(b, &v, sizeof v);
}

/* Append a string and its NUL. */
int
td_buf_add_str(struct td_buf *b, const char *s)
{
	return td_buf_add(b, s, strlen(s) + 1);
}

/* Append formatted text without a NUL. */
int
td_buf_printf(struct td_buf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256], *big;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof small)
		return td_buf_add(b, small, n);
	big = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	n = td_buf_add(b, big, n);
	free(big);
	return n;
}

/* Append the contents of a file (tracefs files report size 0, so read on). */
int
td_buf_read_file(struct td_buf *b, const char *path)
{
	char tmp[16384];
	ssize_t n;
	int fd, saved;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	for (;;) {
		n = read(fd, tmp, sizeof tmp);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (td_buf_add(b, tmp, n) == -1) {
			n = -1;
			break;
		}
	}
	saved = errno;
	close(fd);
	errno = saved;
	return n == 0 ? 0 : -1;
}
