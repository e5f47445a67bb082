/*
 * page.c: ring-buffer page walker (see page.h for the layout).
 */
#include <errno.h>
#include <string.h>

#include "page.h"
#include "banned.h"

#define TD_RB_MISSED_EVENTS	(1ULL << 31)
#define TD_RB_MISSED_STORED	(1ULL << 30)
#define TD_RB_COMMIT_MASK	((1ULL << 27) - 1)

#define TD_RB_PADDING		29
#define TD_RB_TIME_EXTEND	30
#define TD_RB_TIME_STAMP	31

static uint32_t
rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t
rdlong(const uint8_t *p, int size)
{
	uint64_t v = 0;
	uint32_t v32;

	if (size == 8)
		memcpy(&v, p, 8);
	else {
		memcpy(&v32, p, 4);
		v = v32;
	}
	return v;
}

/* Parse one page and count its events. */
int
td_page_parse(const void *page, size_t page_size, int commit_size,
    struct td_page_info *info)
{
	const uint8_t *p = page, *d;
	size_t hdr, off, len, ev;
	uint64_t commit;
	uint32_t word, type;

	memset(info, 0, sizeof *info);
	if (commit_size != 4 && commit_size != 8)
		goto bad;
	hdr = 8 + (size_t)commit_size;
	if (page_size < hdr)
		goto bad;
	memcpy(&info->timestamp, p, 8);
	commit = rdlong(p + 8, commit_size);
	info->missed = (commit & TD_RB_MISSED_EVENTS) != 0;
	info->missed_stored = (commit & TD_RB_MISSED_STORED) != 0;
	len = commit & TD_RB_COMMIT_MASK;
	if (len > page_size - hdr)
		goto bad;
	info->data_len = (uint32_t)len;
	d = p + hdr;
	if (info->missed_stored) {
		if (len + commit_size > page_size - hdr)
			goto bad;
		info->missed_count = rdlong(d + len, commit_size);
	}
	for (off = 0; off < len; off += ev) {
		if (len - off < 4)
			goto bad;
		word = rd32(d + off);
		type = word & 0x1f;
		switch (type) {
		case TD_RB_PADDING:
			if ((word >> 5) == 0)
				return 0;	/* rest of the page is empty */
			if (len - off < 8)
				goto bad;
			ev = 4 + (size_t)rd32(d + off + 4);
			break;
		case TD_RB_TIME_EXTEND:
		case TD_RB_TIME_STAMP:
			ev = 8;
			break;
		case 0:
			if (len - off < 8)
				goto bad;
			ev = 4 + (((size_t)rd32(d + off + 4) + 3) & ~(size_t)3);
			if (ev < 8)
				goto bad;
			info->events++;
			break;
		default:
			ev = 4 + (size_t)type * 4;
			info->events++;
			break;
		}
		if (ev > len - off)
			goto bad;
	}
	return 0;
bad:
	errno = EBADMSG;
	return -1;
}
