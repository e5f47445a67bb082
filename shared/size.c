/*
 * size.c: sizes as people write them on command lines.
 */
#include <errno.h>
#include <stdlib.h>

#include "size.h"
#include "banned.h"

int
td_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		goto bad;
	switch (*end) {
	case 'K': case 'k':
		shift = 10;
		end++;
		break;
	case 'M': case 'm':
		shift = 20;
		end++;
		break;
	case 'G': case 'g':
		shift = 30;
		end++;
		break;
	}
	if (*end != '\0' || v > (1ULL << 50) >> shift)
		goto bad;
	*out = (uint64_t)v << shift;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

int
td_parse_duration(const char *s, uint64_t *secs)
{
	unsigned long long v, mul;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end[0] == '\0' || end[1] != '\0')
		goto bad;
	switch (*end) {
	case 's':
		mul = 1;
		break;
	case 'm':
		mul = 60;
		break;
	case 'h':
		mul = 3600;
		break;
	default:
		goto bad;
	}
	if (v > UINT32_MAX / mul)
		goto bad;
	*secs = v * mul;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}
