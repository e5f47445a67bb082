/*
 * tcmsg.c: trace-cmd's v3 message framing, encode and decode (see
 * tcmsg.h).  Bounds are checked before anything is read; nothing logs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cursor.h"
#include "tcmsg.h"
#include "tdlimits.h"
#include "banned.h"

struct td_tc_info {
	const char	*name;
	uint32_t	 block;
};

static const struct td_tc_info td_tc_table[] = {
#define TD_TC_INFO(n, v, b) [v] = { #n, b },
	TD_TC_MSG_TABLE(TD_TC_INFO)
#undef TD_TC_INFO
};

#define TD_TC_NCMDS	(sizeof td_tc_table / sizeof td_tc_table[0])

static uint32_t
td_tc_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static int
td_tc_add_be32(struct td_buf *b, uint32_t v)
{
	uint8_t p[4] = { v >> 24, v >> 16, v >> 8, v };

	return td_buf_add(b, p, sizeof p);
}

static int
td_tc_bad(void)
{
	errno = EBADMSG;
	return -1;
}

int
td_tc_first(const uint8_t *buf, size_t avail, bool *v3, uint32_t *cpus,
    size_t *used)
{
	const uint8_t *nul;
	size_t n = avail < TD_TC_FIRST_MAX ? avail : TD_TC_FIRST_MAX;
	uint64_t v = 0;
	size_t i, len;

	*used = 0;
	if ((nul = memchr(buf, '\0', n)) == NULL)
		return avail < TD_TC_FIRST_MAX ? 0 : td_tc_bad();
	len = (size_t)(nul - buf);
	*used = len + 1;
	if (len == strlen(TD_TC_V3_CPU) &&
	    memcmp(buf, TD_TC_V3_CPU, len) == 0) {
		*v3 = true;
		return 1;
	}
	if (len == 0 || len > 5)
		return td_tc_bad();
	for (i = 0; i < len; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return td_tc_bad();
		v = v * 10 + (buf[i] - '0');
	}
	if (v == 0 || v > TD_MAX_CPUS)
		return td_tc_bad();
	*v3 = false;
	*cpus = (uint32_t)v;
	return 1;
}

bool
td_tc_magic_ok(const uint8_t *p)
{
	return memcmp(p, TD_TC_MAGIC, TD_TC_MAGIC_LEN) == 0;
}

int
td_tc_msg_parse(const uint8_t *buf, size_t avail, struct td_tc_msg *m)
{
	uint32_t size, cmd, block;

	memset(m, 0, sizeof *m);
	if (avail < TD_TC_MSG_HEADER)
		return 0;
	size = td_tc_be32(buf);
	cmd = td_tc_be32(buf + 4);
	block = td_tc_be32(buf + 8);
	if (cmd >= TD_TC_NCMDS || size > TD_TC_MSG_MAX ||
	    size < TD_TC_MSG_HEADER || block > size - TD_TC_MSG_HEADER ||
	    block < td_tc_table[cmd].block)
		return td_tc_bad();
	m->cmd = cmd;
	m->total = size;
	if (avail < size)
		return 0;
	m->block = buf + TD_TC_MSG_HEADER;
	m->block_len = block;
	m->payload = m->block + block;
	m->len = size - TD_TC_MSG_HEADER - block;
	return 1;
}

const char *
td_tc_name(uint32_t cmd)
{
	return cmd < TD_TC_NCMDS ? td_tc_table[cmd].name : "?";
}

int
td_tc_unpack_tinit(const struct td_tc_msg *m, struct td_tc_tinit *t)
{
	struct td_cur c;
	const uint8_t *s, *nul;
	uint32_t nopts, i;
	size_t k, len;

	memset(t, 0, sizeof *t);
	if (m->cmd != TD_TC_TINIT)
		return td_tc_bad();
	td_cur_init(&c, m->block, m->block_len);
	t->cpus = td_cur_be32(&c);
	t->page_size = td_cur_be32(&c);
	nopts = td_cur_be32(&c);
	if (td_cur_bad(&c) || t->cpus == 0 || t->cpus > TD_MAX_CPUS ||
	    t->page_size < TD_MIN_PAGE_SIZE ||
	    t->page_size > TD_MAX_PAGE_SIZE ||
	    (t->page_size & (t->page_size - 1)) != 0 ||
	    nopts > m->len / 2)
		return td_tc_bad();
	td_cur_init(&c, m->payload, m->len);
	for (i = 0; i < nopts; i++) {
		s = c.p;
		if ((nul = memchr(s, '\0', td_cur_left(&c))) == NULL)
			return td_tc_bad();
		len = (size_t)(nul - s);
		if (len == 0 || len > TD_TC_OPT_MAX)
			return td_tc_bad();
		for (k = 0; k < len; k++)
			if (s[k] < 0x20 || s[k] > 0x7e)
				return td_tc_bad();
		td_cur_take(&c, len + 1);
		if (len == 3 && memcmp(s, "tcp", 3) == 0)
			t->tcp = true;
		else if (len == 5 && memcmp(s, "vsock", 5) == 0)
			t->vsock = true;
		else
			t->unknown++;
	}
	return td_cur_end(&c) == 0 ? 0 : td_tc_bad();
}

int
td_tc_unpack_rinit(const struct td_tc_msg *m, uint32_t max, uint32_t *cpus,
    uint16_t *ports)
{
	struct td_cur c;
	const uint8_t *s, *nul;
	uint32_t i, v;
	size_t k, len;

	if (m->cmd != TD_TC_RINIT)
		return td_tc_bad();
	td_cur_init(&c, m->block, m->block_len);
	*cpus = td_cur_be32(&c);
	if (td_cur_bad(&c) || *cpus == 0 || *cpus > max)
		return td_tc_bad();
	td_cur_init(&c, m->payload, m->len);
	for (i = 0; i < *cpus; i++) {
		s = c.p;
		if ((nul = memchr(s, '\0', td_cur_left(&c))) == NULL)
			return td_tc_bad();
		len = (size_t)(nul - s);
		if (len == 0 || len > 5)
			return td_tc_bad();
		for (k = 0, v = 0; k < len; k++) {
			if (s[k] < '0' || s[k] > '9')
				return td_tc_bad();
			v = v * 10 + (uint32_t)(s[k] - '0');
		}
		if (v == 0 || v > 65535)
			return td_tc_bad();
		ports[i] = (uint16_t)v;
		td_cur_take(&c, len + 1);
	}
	return td_cur_end(&c) == 0 ? 0 : td_tc_bad();
}

/* The header of a message of cmd with a block and n payload bytes. */
static int
td_tc_header(struct td_buf *b, uint32_t cmd, size_t block, size_t n)
{
	size_t size = TD_TC_MSG_HEADER + block + n;

	if (cmd >= TD_TC_NCMDS || block != td_tc_table[cmd].block ||
	    size > TD_TC_MSG_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (td_tc_add_be32(b, (uint32_t)size) == -1 ||
	    td_tc_add_be32(b, cmd) == -1 ||
	    td_tc_add_be32(b, (uint32_t)block) == -1)
		return -1;
	return 0;
}

int
td_tc_pack(struct td_buf *b, uint32_t cmd, const void *p, size_t n)
{
	size_t len = b->len;

	if (td_tc_header(b, cmd, 0, n) == -1 ||
	    (n > 0 && td_buf_add(b, p, n) == -1)) {
		b->len = len;
		return -1;
	}
	return 0;
}

int
td_tc_pack_tinit(struct td_buf *b, uint32_t cpus, uint32_t page_size,
    const char *const *opts)
{
	size_t len = b->len, n = 0;
	uint32_t nopts = 0;

	for (; opts != NULL && opts[nopts] != NULL; nopts++)
		n += strlen(opts[nopts]) + 1;
	if (td_tc_header(b, TD_TC_TINIT, 12, n) == -1 ||
	    td_tc_add_be32(b, cpus) == -1 ||
	    td_tc_add_be32(b, page_size) == -1 ||
	    td_tc_add_be32(b, nopts) == -1)
		goto out_undo;
	for (n = 0; n < nopts; n++)
		if (td_buf_add_str(b, opts[n]) == -1)
			goto out_undo;
	return 0;
out_undo:
	b->len = len;
	return -1;
}

int
td_tc_pack_rinit(struct td_buf *b, uint32_t cpus, const uint16_t *ports)
{
	char num[8];
	size_t len = b->len, n = 0;
	uint32_t i;

	for (i = 0; i < cpus; i++)
		n += (size_t)snprintf(num, sizeof num, "%u", ports[i]) + 1;
	if (td_tc_header(b, TD_TC_RINIT, 4, n) == -1 ||
	    td_tc_add_be32(b, cpus) == -1)
		goto out_undo;
	for (i = 0; i < cpus; i++) {
		snprintf(num, sizeof num, "%u", ports[i]);
		if (td_buf_add_str(b, num) == -1)
			goto out_undo;
	}
	return 0;
out_undo:
	b->len = len;
	return -1;
}

bool
td_tc_rinit_fits(uint32_t cpus, uint16_t max_port)
{
	char num[8];
	size_t each = (size_t)snprintf(num, sizeof num, "%u", max_port) + 1;

	return TD_TC_MSG_HEADER + 4 + (uint64_t)cpus * each <= TD_TC_MSG_MAX;
}
