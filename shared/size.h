/*
 * size.h: sizes as people write them on command lines.
 */
#ifndef TD_SIZE_H
#define TD_SIZE_H

#include <stdint.h>

/*
 * "0", "4096", "512K", "64M", "2G" (powers of 1024, either case) into
 * bytes, at most 2^50; -1 with errno EINVAL for anything else.
 */
int	td_parse_size(const char *s, uint64_t *out);
/*
 * "30s", "10m", "1h" (seconds, minutes, hours; lower case only, so that
 * "10M" stays a size) into seconds, at most 2^32 - 1; -1 with errno
 * EINVAL for anything else.
 */
int	td_parse_duration(const char *s, uint64_t *secs);

#endif
