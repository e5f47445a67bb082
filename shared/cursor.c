/*
 * cursor.c: bounds-checked reading (see cursor.h).
 */
#include <string.h>

#include "cursor.h"
#include "banned.h"

void
td_cur_init(struct td_cur *c, const void *p, size_t len)
{
	c->p = p;
	c->left = len;
	c->bad = false;
}

const void *
td_cur_take(struct td_cur *c, size_t n)
{
	const uint8_t *at = c->p;

	if (c->bad || n > c->left) {
		c->bad = true;
		return NULL;
	}
	c->p += n;
	c->left -= n;
	return at;
}

uint8_t
td_cur_u8(struct td_cur *c)
{
	const uint8_t *p = td_cur_take(c, 1);

	return p ? p[0] : 0;
}

uint16_t
td_cur_be16(struct td_cur *c)
{
	const uint8_t *p = td_cur_take(c, 2);

	return p ? (uint16_t)(p[0] << 8 | p[1]) : 0;
}

uint32_t
td_cur_be32(struct td_cur *c)
{
	const uint8_t *p = td_cur_take(c, 4);

	return p ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3] : 0;
}

uint64_t
td_cur_be64(struct td_cur *c)
{
	uint64_t hi = td_cur_be32(c);

	return hi << 32 | td_cur_be32(c);
}

uint32_t
td_cur_u32(struct td_cur *c)
{
	const void *p = td_cur_take(c, 4);
	uint32_t v = 0;

	if (p != NULL)
		memcpy(&v, p, 4);
	return v;
}

uint64_t
td_cur_u64(struct td_cur *c)
{
	const void *p = td_cur_take(c, 8);
	uint64_t v = 0;

	if (p != NULL)
		memcpy(&v, p, 8);
	return v;
}

void
td_cur_fail(struct td_cur *c)
{
	c->bad = true;
}

bool
td_cur_bad(const struct td_cur *c)
{
	return c->bad;
}

size_t
td_cur_left(const struct td_cur *c)
{
	return c->left;
}

int
td_cur_end(const struct td_cur *c)
{
	return c->bad || c->left != 0 ? -1 : 0;
}
