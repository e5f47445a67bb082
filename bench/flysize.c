/*
 * flysize.c: the raw size of a trace.dat file's per-CPU ring-buffer data,
 * the same number whichever program wrote the file.
 *
 * bench/run.sh takes each CPU's data offset and size from
 * "trace-cmd dump --flyrecord" and passes them here.  Uncompressed data
 * (version 6, or version 7 with compression "none") is the pages
 * themselves.  Compressed version 7 data is a u32 chunk count followed by
 * chunks {u32 csize, u32 usize, data[csize]}: the usize fields add up to
 * the pages that were compressed, and nothing is decompressed.  The result
 * is pages times page size, in bytes, on one line; little-endian files
 * only (the machines the benchmark runs on).
 *
 * usage: flysize FILE none|CODEC OFFSET SIZE [OFFSET SIZE]...
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
flysize_read(int fd, void *p, size_t n, uint64_t off)
{
	ssize_t r = pread(fd, p, n, (off_t)off);

	if (r == (ssize_t)n)
		return 0;
	if (r >= 0)
		errno = EIO;
	return -1;
}

static uint32_t
flysize_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* Add up the uncompressed sizes of the chunks of one CPU. */
static int
flysize_chunks(int fd, uint64_t off, uint64_t size, uint64_t *total)
{
	unsigned char hdr[8];
	uint64_t pos, end;
	uint32_t count, i;

	if (flysize_read(fd, hdr, 4, off) == -1)
		return -1;
	count = flysize_le32(hdr);
	pos = off + 4;
	end = pos + size;
	for (i = 0; i < count; i++) {
		if (pos + 8 > end || flysize_read(fd, hdr, 8, pos) == -1) {
			errno = EINVAL;
			return -1;
		}
		*total += flysize_le32(hdr + 4);
		pos += 8 + (uint64_t)flysize_le32(hdr);
	}
	if (pos != end) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	uint64_t total = 0, off, size;
	int compressed, fd, i;

	if (argc < 5 || argc % 2 != 1) {
		fprintf(stderr, "usage: flysize FILE none|CODEC OFFSET SIZE "
		    "[OFFSET SIZE]...\n");
		return 2;
	}
	if ((fd = open(argv[1], O_RDONLY)) == -1) {
		fprintf(stderr, "flysize: cannot open '%s': %s\n", argv[1],
		    strerror(errno));
		return 1;
	}
	compressed = strcmp(argv[2], "none") != 0;
	for (i = 3; i + 1 < argc; i += 2) {
		off = strtoull(argv[i], NULL, 0);
		size = strtoull(argv[i + 1], NULL, 0);
		if (!compressed) {
			total += size;
			continue;
		}
		if (flysize_chunks(fd, off, size, &total) == -1) {
			fprintf(stderr, "flysize: '%s': bad chunks at offset "
			    "%" PRIu64 ": %s\n", argv[1], off,
			    strerror(errno));
			close(fd);
			return 1;
		}
	}
	close(fd);
	printf("%" PRIu64 "\n", total);
	return 0;
}
