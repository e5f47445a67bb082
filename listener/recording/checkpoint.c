/*
 * checkpoint.c: a recording's state on disk (see checkpoint.h).
 *
 * Beside each recording's PATH.part and spools, PATH.state describes the
 * last checkpoint: the recording's parameters, the producer's position,
 * the counters, the time-sync samples and the writer
 * (td_file_checkpoint()).  It is written to PATH.state.tmp and exchanged
 * with PATH.state (renamed over it where exchanging is not possible), so
 * it is always whole; what the files hold past it is cut off on restore.
 * Neither O_TRUNC nor a rename over the old state: on ext4
 * (auto_da_alloc) either starts writing the file out at once, a third of
 * the cost of a checkpoint.  Only after the exchange does the listener
 * acknowledge the position, so the producer still holds everything a
 * restored recording lacks.
 *
 * The state is written with write(2), without fsync: it survives the
 * listener's crash or kill -9, which is what the acknowledgement promises,
 * not a power loss of the collection box.
 *
 * Layout (host byte order, this machine only): u32 "tdss", u32 version
 * (6); the parameters: u32 CPUs, u32 page size, u8 long size, u8 commit
 * size, u8 big endian, u8 flags (0x80 | 1 when the producer's CMDLINES
 * section is in the writer; 0 before version 6), u64 recording id, u32 n + the name, u32 n +
 * the clock, u64 the file's TRACEID; u64 trace id, position, bytes, pages,
 * lost, elapsed ns; per CPU u64 next sequence, events, marked pages; the
 * time-sync samples and TSC2NSEC factors (timesync_save()); the host and
 * guest pairings (guests_save()); per CPU u64 the first sequence of the
 * piece being written (--rotate, rotate.h; 0 unrotated: the writer holds
 * next - first pages of the CPU); then the writer's state to the end.
 * Versions 1 and 2 (session 2 to 7) kept the agent's HELLO frame instead
 * of the parameters and the samples as TSYNC_SAMPLE frames (1 without the
 * factors); version 3 had neither the TRACEID nor the pairings: they are
 * still read; version 4 had no pieces (each first sequence 0); version 5
 * did not say whose CMDLINES a piece holds.  The next checkpoint is
 * version 6.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "checkpoint.h"
#include "cursor.h"
#include "guests.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "timesync.h"
#include "xmalloc.h"
#include "banned.h"

#define CK_MAGIC	0x73736474	/* "tdss" */
#define CK_VERSION	6
#define CK_MAX		(2 * (size_t)TD_MAX_SECTION_SIZE)

/* A string of the parameters: u32 length, the bytes. */
static int
ck_add_str(struct td_buf *b, const char *s)
{
	size_t n = strlen(s);

	return td_buf_add_u32(b, (uint32_t)n) == 0 &&
	    td_buf_add(b, s, n) == 0 ? 0 : -1;
}

int
checkpoint_write(const char *state_path, const struct checkpoint *ck,
    size_t *len)
{
	const struct recording_params *p = &ck->params;
	struct td_buf b;
	char *tmp;
	uint32_t i;
	int fd, ok, e;

	if (ck->file == NULL || state_path == NULL) {
		errno = EINVAL;
		return -1;
	}
	td_buf_init(&b, CK_MAX);
	ok = td_buf_add_u32(&b, CK_MAGIC) == 0 &&
	    td_buf_add_u32(&b, CK_VERSION) == 0 &&
	    td_buf_add_u32(&b, p->ncpus) == 0 &&
	    td_buf_add_u32(&b, p->page_size) == 0 &&
	    td_buf_add(&b, (uint8_t[]){ p->long_size, p->commit_size,
	    p->big_endian, td_file_has_section(ck->file, TD_OPT_CMDLINES) ?
	    0x81 : 0x80 }, 4) == 0 &&
	    td_buf_add_u64(&b, p->recording_id) == 0 &&
	    ck_add_str(&b, p->name) == 0 &&
	    ck_add_str(&b, p->clock) == 0 &&
	    td_buf_add_u64(&b, p->file_trace_id) == 0 &&
	    td_buf_add_u64(&b, ck->trace_id) == 0 &&
	    td_buf_add_u64(&b, ck->position) == 0 &&
	    td_buf_add_u64(&b, ck->bytes) == 0 &&
	    td_buf_add_u64(&b, ck->pages) == 0 &&
	    td_buf_add_u64(&b, ck->lost) == 0 &&
	    td_buf_add_u64(&b, ck->elapsed_ns) == 0;
	for (i = 0; ok && i < p->ncpus; i++)
		ok = td_buf_add_u64(&b, ck->cpu[i].next_seq) == 0 &&
		    td_buf_add_u64(&b, ck->cpu[i].events) == 0 &&
		    td_buf_add_u64(&b, ck->cpu[i].missed_pages) == 0;
	ok = ok && timesync_save(ck->ts, &b) == 0;
	if (ok && ck->guests == NULL) {
		struct guests *none = guests_new("", 0, "", "");

		ok = guests_save(none, &b) == 0;
		guests_free(none);
	} else if (ok)
		ok = guests_save(ck->guests, &b) == 0;
	/* version 5: where each CPU's pages of the piece begin (rotate.h) */
	for (i = 0; ok && i < p->ncpus; i++)
		ok = td_buf_add_u64(&b, ck->cpu[i].piece_seq) == 0;
	if (!ok) {
		td_buf_free(&b);
		errno = ENOBUFS;
		return -1;
	}
	/* last: it writes out the pages waiting in chunks */
	if (td_file_checkpoint(ck->file, &b) == -1) {
		e = errno;
		td_buf_free(&b);
		errno = e;
		return -1;
	}
	xasprintf(&tmp, "%s.tmp", state_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	ok = fd != -1 && pwrite(fd, b.data, b.len, 0) == (ssize_t)b.len &&
	    ftruncate(fd, (off_t)b.len) == 0;
	if (!ok && fd != -1 && errno == 0)
		errno = ENOSPC;
	e = errno;
	if (fd != -1 && close(fd) == -1 && ok) {
		ok = 0;
		e = errno;
	}
	if (ok && renameat2(AT_FDCWD, tmp, AT_FDCWD, state_path,
	    RENAME_EXCHANGE) == -1 && ((errno != ENOENT && errno != EINVAL) ||
	    rename(tmp, state_path) == -1)) {
		ok = 0;
		e = errno;
	}
	if (!ok)
		unlink(tmp);
	else if (len != NULL)
		*len = b.len;
	free(tmp);
	td_buf_free(&b);
	if (!ok) {
		errno = e;
		return -1;
	}
	return 0;
}

/*
 * A string of the parameters into s (size n): -1 when it does not fit or
 * holds a control character (HELLO refuses them).
 */
static int
ck_str(struct td_cur *c, char *s, size_t n)
{
	uint32_t len = td_cur_u32(c), i;
	const char *at;

	if (td_cur_bad(c) || len >= n || (at = td_cur_take(c, len)) == NULL)
		return -1;
	for (i = 0; i < len; i++)
		if ((unsigned char)at[i] < 0x20 || at[i] == 0x7f)
			return -1;
	memcpy(s, at, len);
	s[len] = '\0';
	return 0;
}

/*
 * The parameters of a state of version 3 and later (*cmdlines: whose
 * CMDLINES, struct checkpoint).
 */
static int
ck_params(struct td_cur *c, struct recording_params *p, uint32_t version,
    int *cmdlines)
{
	const uint8_t *b;

	p->ncpus = td_cur_u32(c);
	p->page_size = td_cur_u32(c);
	if ((b = td_cur_take(c, 4)) == NULL || (version < 6 && b[3] != 0) ||
	    (version >= 6 && (b[3] & ~0x01) != 0x80))
		return -1;
	*cmdlines = version >= 6 ? b[3] & 1 : -1;
	p->long_size = b[0];
	p->commit_size = b[1];
	p->big_endian = b[2];
	p->recording_id = td_cur_u64(c);
	if (ck_str(c, p->name, sizeof p->name) == -1 ||
	    ck_str(c, p->clock, sizeof p->clock) == -1 || td_cur_bad(c))
		return -1;
	p->file_trace_id = version >= 4 ? td_cur_u64(c) : 0;
	/* what HELLO would have refused */
	if (p->ncpus == 0 || p->ncpus > TD_MAX_CPUS ||
	    p->page_size < TD_MIN_PAGE_SIZE ||
	    p->page_size > TD_MAX_PAGE_SIZE ||
	    (uint64_t)p->ncpus * p->page_size > TD_MAX_CPU_SPAN ||
	    (p->long_size != 4 && p->long_size != 8) ||
	    (p->commit_size != 4 && p->commit_size != 8) ||
	    p->big_endian > 1 || p->clock[0] == '\0')
		return -1;
	return 0;
}

/* The parameters of a version 1 or 2 state: the agent's HELLO frame. */
static int
ck_hello(struct td_cur *c, struct recording_params *p)
{
	struct td_frame f;
	struct td_hello h;
	const uint8_t *at;
	uint32_t n = td_cur_u32(c);

	if (td_cur_bad(c) || n > TD_MAX_HELLO + TD_FRAME_HEADER ||
	    (at = td_cur_take(c, n)) == NULL ||
	    td_frame_parse(at, n, &f) != 1 || f.total != n ||
	    f.type != TD_MSG_HELLO || td_msg_unpack_hello(&f, &h) == -1)
		return -1;
	p->ncpus = h.ncpus;
	p->page_size = h.page_size;
	p->long_size = h.long_size;
	p->commit_size = h.commit_size;
	p->big_endian = h.big_endian;
	p->recording_id = h.recording_id;
	p->file_trace_id = h.trace_id;
	snprintf(p->name, sizeof p->name, "%s", h.name);
	snprintf(p->clock, sizeof p->clock, "%s", h.clock);
	return 0;
}

int
checkpoint_read(const char *state_path, struct checkpoint *ck,
    struct td_codec *shared, char *err, size_t errlen)
{
	struct recording_params *p = &ck->params;
	const struct td_file_params *fp;
	struct td_buf b;
	struct td_cur c;
	uint32_t i, version;
	char *path;
	size_t rest, pl = strlen(state_path);
	int e;

	ck->cpu = NULL;
	ck->file = NULL;
	if (pl < 7 || strcmp(state_path + pl - 6, ".state") != 0) {
		snprintf(err, errlen, "not a state file");
		errno = EINVAL;
		return -1;
	}
	td_buf_init(&b, CK_MAX);
	if (td_buf_read_file(&b, state_path) == -1) {
		e = errno;
		snprintf(err, errlen, "cannot read '%s': %s", state_path,
		    strerror(e));
		td_buf_free(&b);
		errno = e;
		return -1;
	}
	td_cur_init(&c, b.data, b.len);
	if (td_cur_u32(&c) != CK_MAGIC)
		goto bad;
	version = td_cur_u32(&c);
	if (version < 1 || version > CK_VERSION)
		goto bad;
	ck->cmdlines = -1;
	if ((version < 3 ? ck_hello(&c, p) : ck_params(&c, p, version,
	    &ck->cmdlines)) == -1)
		goto bad;
	ck->trace_id = td_cur_u64(&c);
	ck->position = td_cur_u64(&c);
	ck->bytes = td_cur_u64(&c);
	ck->pages = td_cur_u64(&c);
	ck->lost = td_cur_u64(&c);
	ck->elapsed_ns = td_cur_u64(&c);
	if (td_cur_bad(&c) || (size_t)p->ncpus * 24 > td_cur_left(&c))
		goto bad;
	ck->cpu = xcalloc(p->ncpus, sizeof *ck->cpu);
	for (i = 0; i < p->ncpus; i++) {
		ck->cpu[i].next_seq = td_cur_u64(&c);
		ck->cpu[i].events = td_cur_u64(&c);
		ck->cpu[i].missed_pages = td_cur_u64(&c);
	}
	if (td_cur_bad(&c) || timesync_load(ck->ts, &c, version) == -1)
		goto bad;
	if (version >= 4) {
		struct guests *g = ck->guests != NULL ? ck->guests :
		    guests_new("", 0, "", "");
		int r = guests_load(g, &c);

		if (g != ck->guests)
			guests_free(g);
		if (r == -1)
			goto bad;
	}
	for (i = 0; version >= 5 && i < p->ncpus; i++)
		ck->cpu[i].piece_seq = td_cur_u64(&c);
	if (td_cur_bad(&c))
		goto bad;
	if (ck->no_file) {
		td_buf_free(&b);
		return 0;
	}
	path = xstrdup(state_path);
	path[pl - 6] = '\0';
	rest = td_cur_left(&c);		/* the writer's own state */
	ck->file = td_file_restore(path, td_cur_take(&c, rest), rest);
	if (ck->file == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot restore '%s': %s", path,
		    e == EINVAL ? "the checkpoint does not fit" :
		    strerror(e));
		free(path);
		free(ck->cpu);
		ck->cpu = NULL;
		td_buf_free(&b);
		errno = e;
		return -1;
	}
	free(path);
	/* the recordings' shared compression context, not one of its own */
	if (shared != NULL)
		td_file_share_codec(ck->file, shared);
	td_file_set_limits(ck->file, TD_WRITER_CHUNK_MEM, TD_WRITER_SPOOL_FDS);
	/* the parameters and the writer's state: the same recording */
	fp = td_file_get_params(ck->file);
	if (fp->ncpus != (int)p->ncpus || fp->page_size != p->page_size ||
	    fp->long_size != p->long_size)
		goto bad;
	for (i = 0; i < p->ncpus; i++)
		if (ck->cpu[i].piece_seq > ck->cpu[i].next_seq ||
		    td_file_cpu_pages(ck->file, (int)i) !=
		    ck->cpu[i].next_seq - ck->cpu[i].piece_seq)
			goto bad;
	td_buf_free(&b);
	return 0;
bad:
	snprintf(err, errlen, "'%s' is damaged", state_path);
	td_file_release(ck->file);
	ck->file = NULL;
	free(ck->cpu);
	ck->cpu = NULL;
	td_buf_free(&b);
	errno = EBADMSG;
	return -1;
}

void
checkpoint_remove(const char *state_path)
{
	char *tmp;

	if (state_path == NULL)
		return;
	unlink(state_path);
	xasprintf(&tmp, "%s.tmp", state_path);
	unlink(tmp);		/* the state before, after an exchange */
	free(tmp);
}
