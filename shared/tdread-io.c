/*
 * tdread-io.c: bounded reads of a trace.dat file for the reader (see
 * tdread-local.h): every offset and length read from the file is checked
 * against the file's size here, before anything is read or allocated.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "tdread-local.h"
#include "banned.h"

/* Read exactly n bytes at off; EBADMSG if the range is not in the file. */
int
td_read_at(struct td_read *r, uint64_t off, void *p, size_t n)
{
	uint8_t *c = p;
	ssize_t got;

	if (off > r->fsize || n > r->fsize - off)
		return td_read_bad(r);
	while (n != 0) {
		got = pread(r->fd, c, n, (off_t)off);
		if (got == -1 && errno == EINTR)
			continue;
		if (got == -1) {
			r->ioerr = errno;
			return -1;
		}
		if (got == 0)
			return td_read_bad(r);	/* the file shrank */
		c += got;
		n -= got;
		off += got;
	}
	return 0;
}

/* Read a u32 at *pos and move past it. */
int
td_read_get32(struct td_read *r, uint64_t *pos, uint32_t *v)
{
	uint8_t b[4];

	if (td_read_at(r, *pos, b, sizeof b) == -1)
		return -1;
	*v = td_read_u32(r, b);
	*pos += sizeof b;
	return 0;
}

/* Read a u64 at *pos and move past it. */
int
td_read_get64(struct td_read *r, uint64_t *pos, uint64_t *v)
{
	uint8_t b[8];

	if (td_read_at(r, *pos, b, sizeof b) == -1)
		return -1;
	*v = td_read_u64(r, b);
	*pos += sizeof b;
	return 0;
}

/* Move *pos past n bytes of the file. */
int
td_read_skip(struct td_read *r, uint64_t *pos, uint64_t n)
{
	if (!td_read_in_file(r, *pos, n))
		return td_read_bad(r);
	*pos += n;
	return 0;
}

/* Read a NUL-terminated string of at most cap bytes (NUL included). */
int
td_read_str(struct td_read *r, uint64_t *pos, char *s, size_t cap)
{
	size_t n = cap;
	char *nul;

	if (*pos > r->fsize)
		return td_read_bad(r);
	if (r->fsize - *pos < n)
		n = r->fsize - *pos;
	if (n == 0 || td_read_at(r, *pos, s, n) == -1)
		return td_read_bad(r);
	if ((nul = memchr(s, '\0', n)) == NULL)
		return td_read_bad(r);
	*pos += (uint64_t)(nul - s) + 1;
	return 0;
}

/* Skip a NUL-terminated string of any length (bounded by the file). */
int
td_read_skip_str(struct td_read *r, uint64_t *pos)
{
	char tmp[256], *nul;
	size_t n;

	for (;;) {
		if (*pos >= r->fsize)
			return td_read_bad(r);
		n = r->fsize - *pos < sizeof tmp ? r->fsize - *pos : sizeof tmp;
		if (td_read_at(r, *pos, tmp, n) == -1)
			return -1;
		if ((nul = memchr(tmp, '\0', n)) != NULL) {
			*pos += (uint64_t)(nul - tmp) + 1;
			return 0;
		}
		*pos += n;
	}
}
