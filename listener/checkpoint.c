/*
 * checkpoint.c: a resumable session's state on disk.
 *
 * Beside each recording's PATH.part and spools, PATH.state describes the
 * last checkpoint: the HELLO, the counters, the time-sync samples and the
 * writer (td_file_checkpoint()).  It is written to PATH.state.tmp and
 * exchanged with PATH.state (renamed over it where exchanging is not
 * possible), so it is always whole; what the files hold past it is cut
 * off on restore.  Neither O_TRUNC nor a rename over the old state: on
 * ext4 (auto_da_alloc) either starts writing the file out at once, a third
 * of the cost of a checkpoint.  Only after the exchange does the listener
 * acknowledge the offset, so the agent still holds everything a restored
 * session lacks.
 *
 * The state is written with write(2), without fsync: it survives the
 * listener's crash or kill -9, which is what the acknowledgement promises,
 * not a power loss of the collection box.
 *
 * Layout (host byte order, this machine only): u32 "tdss", u32 version
 * (2), u32 n + the HELLO frame, u64 session id, rx offset, bytes, pages,
 * lost, elapsed ns; per CPU u64 next sequence, events, marked pages; u32
 * samples, u32 dropped, each sample as its TSYNC_SAMPLE frame; u32 TSC
 * mult, u32 TSC shift (x86-tsc's TSC2NSEC, 0 0 until it came: the agent
 * sends it at the end, and a listener restarted after that has it only
 * from here); then the writer's state to the end.  Version 1, without the
 * TSC pair, is still read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cursor.h"
#include "listener.h"
#include "session.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

#define CK_MAGIC	0x73736474	/* "tdss" */
#define CK_VERSION	2
#define CK_SAMPLE	(TD_FRAME_HEADER + 52)
#define CK_MAX		(2 * (size_t)TD_MAX_SECTION_SIZE)

static double
checkpoint_elapsed(const struct session *s)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - s->start.tv_sec) +
	    (now.tv_nsec - s->start.tv_nsec) / 1e9;
}

int
checkpoint_write(struct session *s)
{
	struct td_buf b, h;
	char *tmp;
	uint32_t i;
	int fd, ok, e;

	if (s->file == NULL || s->state_path == NULL) {
		errno = EINVAL;
		return -1;
	}
	td_buf_init(&b, CK_MAX);
	td_buf_init(&h, TD_MAX_HELLO + TD_FRAME_HEADER);
	ok = td_msg_pack_hello(&h, &s->hello) == 0 &&
	    td_buf_add_u32(&b, CK_MAGIC) == 0 &&
	    td_buf_add_u32(&b, CK_VERSION) == 0 &&
	    td_buf_add_u32(&b, (uint32_t)h.len) == 0 &&
	    td_buf_add(&b, h.data, h.len) == 0 &&
	    td_buf_add_u64(&b, s->session_id) == 0 &&
	    td_buf_add_u64(&b, s->rx_off) == 0 &&
	    td_buf_add_u64(&b, s->bytes) == 0 &&
	    td_buf_add_u64(&b, s->pages) == 0 &&
	    td_buf_add_u64(&b, s->lost) == 0 &&
	    td_buf_add_u64(&b, (uint64_t)(checkpoint_elapsed(s) * 1e9)) == 0;
	for (i = 0; ok && i < s->hello.ncpus; i++)
		ok = td_buf_add_u64(&b, s->cpu[i].next_seq) == 0 &&
		    td_buf_add_u64(&b, s->cpu[i].events) == 0 &&
		    td_buf_add_u64(&b, s->cpu[i].missed_pages) == 0;
	ok = ok && td_buf_add_u32(&b, s->nsamples) == 0 &&
	    td_buf_add_u32(&b, s->samples_dropped) == 0;
	for (i = 0; ok && i < s->nsamples; i++)
		ok = td_msg_pack_tsync_sample(&b, &s->samples[i]) == 0;
	ok = ok && td_buf_add_u32(&b, s->tsc_mult) == 0 &&
	    td_buf_add_u32(&b, s->tsc_shift) == 0;
	td_buf_free(&h);
	if (!ok) {
		td_buf_free(&b);
		errno = ENOBUFS;
		return -1;
	}
	/* last: it writes out the pages waiting in chunks */
	if (td_file_checkpoint(s->file, &b) == -1) {
		e = errno;
		td_buf_free(&b);
		errno = e;
		return -1;
	}
	xasprintf(&tmp, "%s.tmp", s->state_path);
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
	if (ok && renameat2(AT_FDCWD, tmp, AT_FDCWD, s->state_path,
	    RENAME_EXCHANGE) == -1 && ((errno != ENOENT && errno != EINVAL) ||
	    rename(tmp, s->state_path) == -1)) {
		ok = 0;
		e = errno;
	}
	if (!ok)
		unlink(tmp);
	else
		s->ck_len = b.len;
	free(tmp);
	td_buf_free(&b);
	if (!ok) {
		errno = e;
		return -1;
	}
	return 0;
}

/* One frame of exactly n bytes at the cursor. */
static int
ck_frame(struct td_cur *c, size_t n, uint16_t type, struct td_frame *f)
{
	const uint8_t *at = td_cur_take(c, n);

	if (at == NULL || td_frame_parse(at, n, f) != 1 || f->total != n ||
	    f->type != type)
		return -1;
	return 0;
}

int
checkpoint_read(struct session *s, const char *statepath, char *err,
    size_t errlen)
{
	struct td_buf b;
	struct td_frame f;
	const struct td_file_params *fp;
	struct td_hello h;
	struct td_cur c;
	uint64_t elapsed;
	uint32_t i, n, version;
	char *path;
	size_t rest, pl = strlen(statepath);

	if (pl < 7 || strcmp(statepath + pl - 6, ".state") != 0) {
		snprintf(err, errlen, "not a state file");
		return -1;
	}
	td_buf_init(&b, CK_MAX);
	if (td_buf_read_file(&b, statepath) == -1) {
		snprintf(err, errlen, "cannot read '%s': %s", statepath,
		    strerror(errno));
		td_buf_free(&b);
		return -1;
	}
	td_cur_init(&c, b.data, b.len);
	if (td_cur_u32(&c) != CK_MAGIC)
		goto bad;
	version = td_cur_u32(&c);
	if (version != 1 && version != CK_VERSION)
		goto bad;
	n = td_cur_u32(&c);
	if (td_cur_bad(&c) || n > TD_MAX_HELLO + TD_FRAME_HEADER ||
	    ck_frame(&c, n, TD_MSG_HELLO, &f) == -1 ||
	    td_msg_unpack_hello(&f, &h) == -1)
		goto bad;
	/* s->cpu has s->hello.ncpus entries: both change together */
	s->hello = h;
	s->session_id = td_cur_u64(&c);
	s->rx_off = s->ack_off = td_cur_u64(&c);
	s->bytes = td_cur_u64(&c);
	s->pages = td_cur_u64(&c);
	s->lost = td_cur_u64(&c);
	elapsed = td_cur_u64(&c);
	clock_gettime(CLOCK_MONOTONIC, &s->start);
	if (elapsed / 1000000000 < (uint64_t)s->start.tv_sec)
		s->start.tv_sec -= (time_t)(elapsed / 1000000000);
	free(s->cpu);
	s->cpu = xcalloc(s->hello.ncpus, sizeof *s->cpu);
	for (i = 0; i < s->hello.ncpus; i++) {
		s->cpu[i].next_seq = td_cur_u64(&c);
		s->cpu[i].events = td_cur_u64(&c);
		s->cpu[i].missed_pages = td_cur_u64(&c);
	}
	n = td_cur_u32(&c);
	s->samples_dropped = td_cur_u32(&c);
	if (td_cur_bad(&c) || n > TD_MAX_TSYNC_SAMPLES || (size_t)n * CK_SAMPLE > td_cur_left(&c))
		goto bad;
	free(s->samples);
	s->samples = NULL;
	s->nsamples = 0;
	if (n > 0)
		s->samples = xreallocarray(NULL, (n + 63) / 64 * 64,
		    sizeof *s->samples);
	for (i = 0; i < n; i++) {
		if (ck_frame(&c, CK_SAMPLE, TD_MSG_TSYNC_SAMPLE, &f) == -1 ||
		    td_msg_unpack_tsync_sample(&f, &s->samples[i]) == -1)
			goto bad;
		s->nsamples++;
	}
	s->tsc_mult = s->tsc_shift = 0;
	if (version >= 2) {
		s->tsc_mult = td_cur_u32(&c);
		s->tsc_shift = td_cur_u32(&c);
		if (td_cur_bad(&c) || s->tsc_shift >= 64 ||
		    (s->tsc_mult == 0 && s->tsc_shift != 0))
			goto bad;
	}
	path = xstrdup(statepath);
	path[pl - 6] = '\0';
	rest = td_cur_left(&c);		/* the writer's own state */
	s->file = td_file_restore(path, td_cur_take(&c, rest), rest);
	if (s->file == NULL) {
		snprintf(err, errlen, "cannot restore '%s': %s", path,
		    errno == EINVAL ? "the checkpoint does not fit" :
		    strerror(errno));
		free(path);
		td_buf_free(&b);
		return -1;
	}
	/* the sessions' shared compression context, not one of its own */
	if (s->cfg != NULL)
		td_file_share_codec(s->file, s->cfg->codec_ctx);
	td_file_set_limits(s->file, TD_WRITER_CHUNK_MEM, TD_WRITER_SPOOL_FDS);
	/* the HELLO and the writer's state must describe the same recording */
	fp = td_file_get_params(s->file);
	if (fp->ncpus != (int)s->hello.ncpus ||
	    fp->page_size != s->hello.page_size ||
	    fp->long_size != s->hello.long_size) {
		td_file_release(s->file);
		s->file = NULL;
		free(path);
		goto bad;
	}
	for (i = 0; i < s->hello.ncpus; i++)
		if (td_file_cpu_pages(s->file, (int)i) != s->cpu[i].next_seq) {
			td_file_release(s->file);
			s->file = NULL;
			free(path);
			goto bad;
		}
	free(s->path);
	s->path = path;
	if (s->state_path != statepath) {
		free(s->state_path);
		s->state_path = xstrdup(statepath);
	}
	td_buf_free(&b);
	return 0;
bad:
	snprintf(err, errlen, "'%s' is damaged", statepath);
	td_buf_free(&b);
	return -1;
}

/* The recording is finished or given up: its checkpoint goes. */
void
checkpoint_remove(struct session *s)
{
	char *tmp;

	if (s->state_path == NULL)
		return;
	unlink(s->state_path);
	xasprintf(&tmp, "%s.tmp", s->state_path);
	unlink(tmp);		/* the state before, after an exchange */
	free(tmp);
}
