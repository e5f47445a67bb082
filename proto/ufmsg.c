/*
 * ufmsg.c: decoding of uftrace's record-to-recv messages (ufmsg.h), every
 * length checked against its bounds before it is used, and every file name
 * checked against the kinds of files of a uftrace data directory: what
 * uftrace's own receiver does not do (it trusts the names and lengths a
 * client sends: uftrace issue 480).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cursor.h"
#include "ufmsg.h"
#include "banned.h"

/* X(name, type, min payload, max payload) */
#define TD_UF_TABLE(X)							\
	X(SEND_DIR_NAME,	TD_UF_DIR_NAME,	0, TD_UF_MAX_DIR_NAME)	\
	X(SEND_DATA,		TD_UF_DATA,	4, TD_UF_MAX_MSG)	\
	X(SEND_KERNEL_DATA,	TD_UF_KERNEL_DATA, 4, TD_UF_MAX_MSG)	\
	X(SEND_PERF_DATA,	TD_UF_PERF_DATA, 4, TD_UF_MAX_MSG)	\
	X(SEND_INFO,		TD_UF_INFO,	TD_UF_INFO_HEADER,	\
	    TD_UF_INFO_HEADER + TD_UF_MAX_INFO)				\
	X(SEND_META_DATA,	TD_UF_META_DATA, 5, TD_UF_MAX_MSG)	\
	X(SEND_END,		TD_UF_END,	0, 0)

static const struct {
	const char	*name;
	uint16_t	 type;
	uint32_t	 min;
	uint32_t	 max;
} td_uf_types[] = {
#define TD_UF_ROW(n, t, lo, hi) { #n, t, lo, hi },
	TD_UF_TABLE(TD_UF_ROW)
#undef TD_UF_ROW
};

#define TD_UF_NTYPES	(sizeof td_uf_types / sizeof *td_uf_types)

static int
td_ufmsg_row(uint16_t type)
{
	size_t i;

	for (i = 0; i < TD_UF_NTYPES; i++)
		if (td_uf_types[i].type == type)
			return (int)i;
	return -1;
}

const char *
td_ufmsg_type_name(uint16_t type)
{
	int i = td_ufmsg_row(type);

	return i == -1 ? "?" : td_uf_types[i].name;
}

int
td_ufmsg_header(const uint8_t *p, struct td_uf_hdr *h, char *err,
    size_t errlen)
{
	struct td_cur c;
	uint16_t magic;
	int i;

	td_cur_init(&c, p, TD_UF_HEADER);
	magic = td_cur_be16(&c);
	h->type = td_cur_be16(&c);
	h->len = td_cur_be32(&c);
	if (magic != TD_UF_MAGIC) {
		snprintf(err, errlen, "not a uftrace message (magic 0x%04x)",
		    magic);
		return -1;
	}
	if ((i = td_ufmsg_row(h->type)) == -1) {
		snprintf(err, errlen, "unknown message type %u", h->type);
		return -1;
	}
	if (h->len < td_uf_types[i].min || h->len > td_uf_types[i].max) {
		snprintf(err, errlen, "%s of %u bytes (%u to %u)",
		    td_uf_types[i].name, h->len, td_uf_types[i].min,
		    td_uf_types[i].max);
		return -1;
	}
	return 0;
}

/* Whether name ends with suffix, with something before it. */
static bool
td_ufmsg_suffix(const char *name, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len > n && memcmp(name + len - n, suffix, n) == 0;
}

/* Whether name is sid-<16 hex digits>.map (a session's memory map). */
static bool
td_ufmsg_map_name(const char *name, size_t len)
{
	size_t i;

	if (len != 4 + 16 + 4 || memcmp(name, "sid-", 4) != 0 ||
	    memcmp(name + 20, ".map", 4) != 0)
		return false;
	for (i = 4; i < 20; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return true;
}

int
td_ufmsg_name_kind(const char *name, size_t len)
{
	static const struct {
		const char	*name;
		enum td_uf_kind	 kind;
	} fixed[] = {
		{ "task.txt", TD_UF_K_TASK_TXT },
		{ "kernel_header", TD_UF_K_KERNEL_HEADER },
		{ "kallsyms", TD_UF_K_KALLSYMS },
		{ "events.txt", TD_UF_K_EVENTS },
	};
	size_t i;

	if (len == 0 || len > TD_UF_MAX_NAME || name[0] == '.')
		return -1;
	for (i = 0; i < len; i++)
		if (name[i] < 0x20 || name[i] > 0x7e || name[i] == '/' ||
		    (name[i] == '.' && i + 1 < len && name[i + 1] == '.'))
			return -1;
	for (i = 0; i < sizeof fixed / sizeof *fixed; i++)
		if (strlen(fixed[i].name) == len &&
		    memcmp(fixed[i].name, name, len) == 0)
			return fixed[i].kind;
	if (td_ufmsg_map_name(name, len))
		return TD_UF_K_MAP;
	if (td_ufmsg_suffix(name, len, ".sym"))
		return TD_UF_K_SYM;
	if (td_ufmsg_suffix(name, len, ".dbg"))
		return TD_UF_K_DBG;
	return TD_UF_K_OTHER;
}

long
td_ufmsg_head_need(const struct td_uf_hdr *h, const uint8_t *p, size_t n,
    char *err, size_t errlen)
{
	struct td_cur c;
	uint32_t namelen;

	switch (h->type) {
	case TD_UF_DIR_NAME:
		return (long)h->len;
	case TD_UF_DATA:
	case TD_UF_KERNEL_DATA:
	case TD_UF_PERF_DATA:
		return 4;
	case TD_UF_INFO:
		return TD_UF_INFO_HEADER;
	case TD_UF_META_DATA:
		if (n < 4)
			return 4;
		td_cur_init(&c, p, 4);
		namelen = td_cur_be32(&c);
		if (namelen == 0 || namelen > TD_UF_MAX_NAME ||
		    namelen > h->len - 4) {
			snprintf(err, errlen, "SEND_META_DATA: name of %u "
			    "bytes in %u", namelen, h->len);
			return -1;
		}
		return 4 + (long)namelen;
	default:
		return 0;
	}
}

/* Keep the client's directory name printable, for the log only. */
static void
td_ufmsg_dir(const uint8_t *p, size_t n, char *dir, size_t size)
{
	size_t i;

	if (n > size - 1)
		n = size - 1;
	for (i = 0; i < n; i++)
		dir[i] = p[i] >= 0x20 && p[i] <= 0x7e ? (char)p[i] : '?';
	dir[n] = '\0';
}

/*
 * The info file's header from network order to host order, as uftrace
 * recv writes it: magic "Ftrace!", a version, its 40-byte size, the
 * data's byte order and word size as ELF says them, the feature and info
 * masks, the stack depth; the two unused fields as they came.
 */
static int
td_ufmsg_info(const uint8_t *p, uint8_t *out, char *err, size_t errlen)
{
	static const char magic[8] = "Ftrace!";
	struct td_cur c;
	uint32_t version;
	uint16_t hsize, max_stack;
	uint64_t feat, info;
	uint8_t endian, class;
	const uint8_t *unused;

	td_cur_init(&c, p, TD_UF_INFO_HEADER);
	if (memcmp(td_cur_take(&c, 8), magic, 8) != 0) {
		snprintf(err, errlen, "SEND_INFO: not a uftrace info header");
		return -1;
	}
	version = td_cur_be32(&c);
	hsize = td_cur_be16(&c);
	endian = td_cur_u8(&c);
	class = td_cur_u8(&c);
	feat = td_cur_be64(&c);
	info = td_cur_be64(&c);
	max_stack = td_cur_be16(&c);
	unused = td_cur_take(&c, 6);
	if (td_cur_end(&c) == -1 || version < 1 || version > 255 ||
	    hsize != TD_UF_INFO_HEADER || endian < 1 || endian > 2 ||
	    class < 1 || class > 2) {
		snprintf(err, errlen, "SEND_INFO: header of version %u, size "
		    "%u, byte order %u, class %u", version, hsize, endian,
		    class);
		return -1;
	}
	memcpy(out, magic, 8);
	memcpy(out + 8, &version, 4);
	memcpy(out + 12, &hsize, 2);
	out[14] = endian;
	out[15] = class;
	memcpy(out + 16, &feat, 8);
	memcpy(out + 24, &info, 8);
	memcpy(out + 32, &max_stack, 2);
	memcpy(out + 34, unused, 6);
	return 0;
}

int
td_ufmsg_head(const struct td_uf_hdr *h, const uint8_t *p, size_t n,
    struct td_uf_msg *m, char *err, size_t errlen)
{
	struct td_cur c;
	long need;
	int kind;

	memset(m, 0, sizeof *m);
	m->type = h->type;
	need = td_ufmsg_head_need(h, p, n, err, errlen);
	if (need == -1)
		return -1;
	if ((size_t)need > n || (uint32_t)need > h->len) {
		snprintf(err, errlen, "%s: %zu of %ld bytes of its head",
		    td_ufmsg_type_name(h->type), n, need);
		return -1;
	}
	m->head_len = (uint32_t)need;
	m->body_len = h->len - m->head_len;
	td_cur_init(&c, p, (size_t)need);
	switch (h->type) {
	case TD_UF_DIR_NAME:
		td_ufmsg_dir(p, (size_t)need, m->dir, sizeof m->dir);
		m->kind = TD_UF_K_NONE;
		return 0;
	case TD_UF_DATA:
	case TD_UF_KERNEL_DATA:
	case TD_UF_PERF_DATA:
		m->id = (int32_t)td_cur_be32(&c);
		if (h->type == TD_UF_DATA && m->id <= 0) {
			snprintf(err, errlen, "SEND_DATA: thread id %d",
			    (int)m->id);
			return -1;
		}
		if (h->type != TD_UF_DATA &&
		    (m->id < 0 || m->id >= TD_MAX_CPUS)) {
			snprintf(err, errlen, "%s: CPU %d",
			    td_ufmsg_type_name(h->type), (int)m->id);
			return -1;
		}
		if (h->type == TD_UF_DATA) {
			m->kind = TD_UF_K_TASK_DATA;
			snprintf(m->name, sizeof m->name, "%d.dat",
			    (int)m->id);
		} else if (h->type == TD_UF_KERNEL_DATA) {
			m->kind = TD_UF_K_KERNEL_DATA;
			snprintf(m->name, sizeof m->name, "kernel-cpu%d.dat",
			    (int)m->id);
		} else {
			m->kind = TD_UF_K_PERF_DATA;
			snprintf(m->name, sizeof m->name, "perf-cpu%d.dat",
			    (int)m->id);
		}
		return 0;
	case TD_UF_INFO:
		if (td_ufmsg_info(p, m->info, err, errlen) == -1)
			return -1;
		m->kind = TD_UF_K_INFO;
		snprintf(m->name, sizeof m->name, "info");
		return 0;
	case TD_UF_META_DATA:
		kind = td_ufmsg_name_kind((const char *)p + 4,
		    (size_t)need - 4);
		if (kind == -1) {
			char shown[TD_UF_MAX_NAME + 1];

			td_ufmsg_dir(p + 4, (size_t)need - 4, shown,
			    sizeof shown);
			snprintf(err, errlen, "SEND_META_DATA: unsafe file "
			    "name '%s'", shown);
			return -1;
		}
		m->kind = (enum td_uf_kind)kind;
		memcpy(m->name, p + 4, (size_t)need - 4);
		m->name[need - 4] = '\0';
		return 0;
	case TD_UF_END:
		m->kind = TD_UF_K_NONE;
		return 0;
	default:
		snprintf(err, errlen, "unknown message type %u", h->type);
		return -1;
	}
}
