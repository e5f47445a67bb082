/*
 * fuzz-ufmsg.c: libFuzzer target for the decoding of uftrace's
 * record-to-recv messages (proto/ufmsg.c), which tdlisten --uftrace-port
 * runs on what any client of that port sends.
 *
 * The input is walked as a stream of messages the way
 * listener/producers/uftrace.c walks it (header, head, body skipped) until
 * something is refused or it ends, and its first bytes are also taken as a
 * file name. Properties:
 *
 *   - a header accepted has a type a client sends and a length within its
 *     bounds (TD_UF_MAX_MSG at most, SEND_END empty);
 *   - what the head needs never exceeds the payload once it can say, and a
 *     head accepted splits the payload exactly (head + body = length);
 *   - every file name a head gives, and every name td_ufmsg_name_kind()
 *     accepts, is one safe path component: 1 to 255 printable bytes, no
 *     '/', no "..", no leading dot; a metadata message's kind is the kind
 *     of its name; a data message's name is the decimal number it carries;
 *   - an info head has the "Ftrace!" magic and a 40-byte header size.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufmsg.h"
#include "fuzz.h"

static void
check_name(const char *name, size_t len)
{
	size_t i;

	FUZZ_CHECK(len >= 1 && len <= TD_UF_MAX_NAME);
	FUZZ_CHECK(name[0] != '.');
	for (i = 0; i < len; i++) {
		FUZZ_CHECK(name[i] >= 0x20 && name[i] <= 0x7e);
		FUZZ_CHECK(name[i] != '/');
		FUZZ_CHECK(!(name[i] == '.' && i + 1 < len &&
		    name[i + 1] == '.'));
	}
}

static void
check_head(const struct td_uf_hdr *h, const struct td_uf_msg *m)
{
	char want[TD_UF_MAX_NAME + 1];
	size_t n = strlen(m->name);
	uint16_t hsize;

	FUZZ_CHECK((uint64_t)m->head_len + m->body_len == h->len);
	FUZZ_CHECK(m->type == h->type);
	switch (h->type) {
	case TD_UF_DATA:
	case TD_UF_KERNEL_DATA:
	case TD_UF_PERF_DATA:
		snprintf(want, sizeof want, "%s%d.dat", h->type == TD_UF_DATA ?
		    "" : h->type == TD_UF_PERF_DATA ? "perf-cpu" :
		    "kernel-cpu", (int)m->id);
		FUZZ_CHECK(strcmp(want, m->name) == 0);
		FUZZ_CHECK(h->type == TD_UF_DATA ? m->id > 0 :
		    m->id >= 0 && m->id < TD_MAX_CPUS);
		check_name(m->name, n);
		break;
	case TD_UF_META_DATA:
		check_name(m->name, n);
		FUZZ_CHECK(td_ufmsg_name_kind(m->name, n) == (int)m->kind);
		FUZZ_CHECK(m->head_len == 4 + n);
		break;
	case TD_UF_INFO:
		FUZZ_CHECK(memcmp(m->info, "Ftrace!", 8) == 0);
		memcpy(&hsize, m->info + 12, 2);
		FUZZ_CHECK(hsize == TD_UF_INFO_HEADER);
		FUZZ_CHECK(m->kind == TD_UF_K_INFO);
		break;
	default:
		FUZZ_CHECK(m->kind == TD_UF_K_NONE);
		FUZZ_CHECK(m->name[0] == '\0');
		FUZZ_CHECK(strlen(m->dir) <= TD_UF_MAX_NAME);
		break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_uf_hdr h;
	struct td_uf_msg m;
	char err[512];
	size_t off = 0, avail, n;
	long need;
	int kind;

	n = size < TD_UF_MAX_NAME + 8 ? size : TD_UF_MAX_NAME + 8;
	kind = td_ufmsg_name_kind((const char *)data, n);
	if (kind != -1)
		check_name((const char *)data, n);
	while (size - off >= TD_UF_HEADER) {
		if (td_ufmsg_header(data + off, &h, err, sizeof err) == -1)
			break;
		FUZZ_CHECK(h.type >= TD_UF_DIR_NAME && h.type <= TD_UF_END);
		FUZZ_CHECK(h.len <= TD_UF_MAX_DIR_NAME ||
		    h.type != TD_UF_DIR_NAME);
		FUZZ_CHECK(h.len <= TD_UF_MAX_MSG);
		FUZZ_CHECK(h.type != TD_UF_END || h.len == 0);
		off += TD_UF_HEADER;
		avail = size - off;
		n = avail < 4 ? avail : 4;
		need = td_ufmsg_head_need(&h, data + off, n, err, sizeof err);
		if (need == -1)
			break;
		FUZZ_CHECK(need >= 0);
		if (n >= 4 || h.type != TD_UF_META_DATA)
			FUZZ_CHECK((uint64_t)need <= h.len);
		if ((size_t)need > avail)
			break;
		if (td_ufmsg_head(&h, data + off, (size_t)need, &m, err,
		    sizeof err) == -1)
			break;
		check_head(&h, &m);
		if (m.body_len > size - off - m.head_len)
			break;
		off += m.head_len + m.body_len;
	}
	return 0;
}
