/*
 * hcache.c: header sections kept by content hash (see hcache.h).
 *
 * Why files named by hash: a kallsyms is 5 MB and the same for every
 * recording of one boot, the event formats the same for every machine of
 * one kernel build; the listener needs an entry's bytes only when a
 * recording refers to it, so they stay on disk (the page cache keeps the
 * hot ones), never in memory per session.  A name that is the hash of the
 * content makes an entry immutable: it is never rewritten, only created
 * (temporary file, rename) or removed, so a reader that opened it reads
 * one version, and the check when it is read catches a disk that lost or
 * changed it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fileio.h"
#include "tdfile.h"
#include "hcache.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "xmalloc.h"
#include "banned.h"

#define HCACHE_DIR	".tdlisten-cache"

/*
 * Entries this process has hashed and found good, as the file system
 * describes them (a write or a replacement changes the description): one
 * slot per inode number modulo HCACHE_SEEN (2.9 MB), so that the 5 MB of a
 * kallsyms is hashed once per listener, not at every offer and reference
 * (7 ms of the listener's CPU per recording otherwise: bench/README.md).
 * Two entries in one slot are hashed again in turn: with the 2,000 entries
 * of 1,000 agents, about one in sixteen.
 */
#define HCACHE_SEEN	32768
struct hcache_seen {
	dev_t		 dev;
	ino_t		 ino;
	off_t		 size;
	struct timespec	 ctime;
	struct timespec	 mtime;
	uint8_t		 sha[TD_HCACHE_SHA_LEN];
};

/*
 * What one identity had the cache write in the current window: every put
 * is charged its declared length at its start, kept or not (issue 31, row
 * 10: 1.9 MB of compressed sections, offered and sent again and again,
 * made the listener write 1,601 MiB into the cache in 10 s).
 */
struct hcache_writer {
	char		*identity;
	time_t		 since;		/* the window's start (monotonic) */
	uint64_t	 bytes;
};

/* The cache. */
struct hcache {
	char		*root;		/* DIR/.tdlisten-cache */
	uint64_t	 total;		/* bytes of entries */
	uint64_t	 hits, misses, stores, bad;
	struct hcache_seen *seen;	/* HCACHE_SEEN slots */
	struct hcache_writer *w;	/* identities that wrote lately */
	size_t		 nw;
};

/* A section being kept as it arrives. */
struct hcache_put {
	struct hcache	*hc;
	EVP_MD_CTX	*md;
	int		 fd;
	bool		 made;		/* tmp exists */
	uint64_t	 len;
	uint64_t	 want_len;	/* declared: charged at the start */
	uint8_t		 want[TD_HCACHE_SHA_LEN];
	char		 dir[PATH_MAX];
	char		 tmp[PATH_MAX];
};

/* An entry found by a scan, for eviction. */
struct hcache_ent {
	char		*path;
	uint64_t	 size;
	struct timespec	 mtime;
};

bool
hcache_shared(uint16_t id)
{
	return id == 16 || id == 17 || id == 18;	/* header_page and
							   _event, formats */
}

static void
hcache_hex(const uint8_t *sha, char *out)
{
	static const char x[] = "0123456789abcdef";
	int i;

	for (i = 0; i < TD_HCACHE_SHA_LEN; i++) {
		out[2 * i] = x[sha[i] >> 4];
		out[2 * i + 1] = x[sha[i] & 15];
	}
	out[2 * TD_HCACHE_SHA_LEN] = '\0';
}

/* The directory of id's entries for identity; -1 if too long. */
static int
hcache_dir(const struct hcache *hc, const char *identity, uint16_t id,
    char *out, size_t len)
{
	int n;

	if (hcache_shared(id))
		n = snprintf(out, len, "%s/shared", hc->root);
	else
		n = snprintf(out, len, "%s/id/%s", hc->root, identity);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int
hcache_path(const struct hcache *hc, const char *identity,
    const struct td_section_ref *r, char *out, size_t len)
{
	char dir[PATH_MAX], hex[2 * TD_HCACHE_SHA_LEN + 1];
	int n;

	if (hcache_dir(hc, identity, r->id, dir, sizeof dir) == -1)
		return -1;
	hcache_hex(r->sha, hex);
	n = snprintf(out, len, "%s/%s", dir, hex);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Each entry file under dir (one level), appended to *v. */
static void
hcache_scan(const char *dir, struct hcache_ent **v, size_t *n, size_t *cap)
{
	struct dirent *de;
	struct stat st;
	char path[PATH_MAX];
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >=
		    (int)sizeof path || lstat(path, &st) == -1 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			*v = xreallocarray(*v, *cap, sizeof **v);
		}
		(*v)[*n].path = xstrdup(path);
		(*v)[*n].size = (uint64_t)st.st_size;
		(*v)[*n].mtime = st.st_mtim;
		(*n)++;
	}
	closedir(d);
}

/* Every entry: shared/ and each id/IDENTITY/; leftovers of puts removed. */
static struct hcache_ent *
hcache_scan_all(struct hcache *hc, size_t *n)
{
	struct hcache_ent *v = NULL;
	struct dirent *de;
	char dir[PATH_MAX];
	size_t cap = 0;
	DIR *d;

	*n = 0;
	snprintf(dir, sizeof dir, "%s/shared", hc->root);
	hcache_scan(dir, &v, n, &cap);
	snprintf(dir, sizeof dir, "%s/id", hc->root);
	if ((d = opendir(dir)) == NULL)
		return v;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(dir, sizeof dir, "%s/id/%s", hc->root,
		    de->d_name) < (int)sizeof dir)
			hcache_scan(dir, &v, n, &cap);
	}
	closedir(d);
	return v;
}

static int
hcache_older(const void *a, const void *b)
{
	const struct hcache_ent *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return 0;
}

/* Remove the oldest of v[n] (holding *sum bytes) until *sum <= cap. */
static void
hcache_trim(struct hcache *hc, struct hcache_ent *v, size_t n, uint64_t *sum,
    uint64_t cap)
{
	size_t i;

	qsort(v, n, sizeof *v, hcache_older);
	for (i = 0; i < n && *sum > cap; i++) {
		if (unlink(v[i].path) == -1)
			continue;
		*sum -= v[i].size;
		hc->total -= hc->total < v[i].size ? hc->total : v[i].size;
	}
}

static void
hcache_ents_free(struct hcache_ent *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

/* Keep dir under its cap and the whole cache under its own. */
static void
hcache_evict(struct hcache *hc, const char *dir)
{
	struct hcache_ent *v = NULL;
	size_t n = 0, cap = 0, i;
	uint64_t sum = 0;

	hcache_scan(dir, &v, &n, &cap);
	for (i = 0; i < n; i++)
		sum += v[i].size;
	if (sum > TD_HCACHE_IDENTITY_MAX)
		hcache_trim(hc, v, n, &sum, TD_HCACHE_IDENTITY_MAX);
	hcache_ents_free(v, n);
	if (hc->total <= TD_HCACHE_TOTAL_MAX)
		return;
	v = hcache_scan_all(hc, &n);
	for (sum = 0, i = 0; i < n; i++)
		sum += v[i].size;
	hc->total = sum;
	hcache_trim(hc, v, n, &sum, TD_HCACHE_TOTAL_MAX);
	hcache_ents_free(v, n);
}

/* Remove what interrupted puts left (".tmp-*") in dir. */
static void
hcache_sweep(const char *dir)
{
	struct dirent *de;
	char path[PATH_MAX];
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, ".tmp-", 5) == 0 &&
		    snprintf(path, sizeof path, "%s/%s", dir, de->d_name) <
		    (int)sizeof path)
			(void)unlink(path);
	closedir(d);
}

struct hcache *
hcache_new(const char *dir)
{
	struct hcache *hc = xcalloc(1, sizeof *hc);
	struct hcache_ent *v;
	struct dirent *de;
	char sub[PATH_MAX];
	size_t n, i;
	DIR *d;

	xasprintf(&hc->root, "%s/%s", dir, HCACHE_DIR);
	hc->seen = xcalloc(HCACHE_SEEN, sizeof *hc->seen);
	snprintf(sub, sizeof sub, "%s/shared", hc->root);
	hcache_sweep(sub);
	snprintf(sub, sizeof sub, "%s/id", hc->root);
	if ((d = opendir(sub)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.' && snprintf(sub, sizeof sub,
			    "%s/id/%s", hc->root, de->d_name) <
			    (int)sizeof sub)
				hcache_sweep(sub);
		closedir(d);
	}
	v = hcache_scan_all(hc, &n);
	for (i = 0; i < n; i++)
		hc->total += v[i].size;
	hcache_ents_free(v, n);
	return hc;
}

void
hcache_free(struct hcache *hc)
{
	if (hc == NULL)
		return;
	while (hc->nw > 0)
		free(hc->w[--hc->nw].identity);
	free(hc->w);
	free(hc->root);
	free(hc->seen);
	free(hc);
}

void
hcache_stats(const struct hcache *hc, uint64_t st[4])
{
	st[0] = hc->hits;
	st[1] = hc->misses;
	st[2] = hc->stores;
	st[3] = hc->bad;
}

static bool	hcache_hash_check(int, const struct td_section_ref *);

/* Remember fd's file, as it is now, as holding the content of hash sha. */
static void
hcache_seen(struct hcache *hc, int fd, const uint8_t *sha)
{
	struct hcache_seen *seen;
	struct stat st;

	if (fstat(fd, &st) == -1)
		return;
	seen = &hc->seen[st.st_ino % HCACHE_SEEN];
	seen->dev = st.st_dev;
	seen->ino = st.st_ino;
	seen->size = st.st_size;
	seen->ctime = st.st_ctim;
	seen->mtime = st.st_mtim;
	memcpy(seen->sha, sha, TD_HCACHE_SHA_LEN);
}

static bool
hcache_same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/*
 * Whether fd holds exactly r: its size and its SHA-256 (read from 0),
 * unless this process found the same file (same inode, size, change and
 * modification times) good before.
 */
static bool
hcache_check(struct hcache *hc, int fd, const struct td_section_ref *r)
{
	struct hcache_seen *seen = NULL;
	struct stat st0;

	if (fstat(fd, &st0) == -1 || !S_ISREG(st0.st_mode) ||
	    (uint64_t)st0.st_size != r->length)
		return false;
	seen = &hc->seen[st0.st_ino % HCACHE_SEEN];
	if (seen->ino == st0.st_ino && seen->dev == st0.st_dev &&
	    seen->size == st0.st_size &&
	    hcache_same_time(&seen->ctime, &st0.st_ctim) &&
	    hcache_same_time(&seen->mtime, &st0.st_mtim) &&
	    memcmp(seen->sha, r->sha, TD_HCACHE_SHA_LEN) == 0)
		return true;
	if (!hcache_hash_check(fd, r))
		return false;
	hcache_seen(hc, fd, r->sha);
	return true;
}

/* Whether fd holds exactly r: its size and its SHA-256 (read from 0). */
static bool
hcache_hash_check(int fd, const struct td_section_ref *r)
{
	static uint8_t buf[65536];
	uint8_t sha[EVP_MAX_MD_SIZE];
	unsigned int shalen = 0;
	EVP_MD_CTX *md;
	struct stat st;
	uint64_t got = 0;
	ssize_t k;

	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != r->length)
		return false;
	if ((md = EVP_MD_CTX_new()) == NULL)
		return false;
	if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return false;
	}
	while ((k = pread(fd, buf, sizeof buf, (off_t)got)) > 0) {
		EVP_DigestUpdate(md, buf, (size_t)k);
		got += (uint64_t)k;
	}
	EVP_DigestFinal_ex(md, sha, &shalen);
	EVP_MD_CTX_free(md);
	return k == 0 && got == r->length && shalen == TD_HCACHE_SHA_LEN &&
	    memcmp(sha, r->sha, TD_HCACHE_SHA_LEN) == 0;
}

/*
 * Open the entry of r and check it.  A bad entry is removed (*bad set);
 * -1 then, or when there is none.
 */
static int
hcache_open_checked(struct hcache *hc, const char *identity,
    const struct td_section_ref *r, bool *bad)
{
	char path[PATH_MAX];
	int fd;

	*bad = false;
	if (hcache_path(hc, identity, r, path, sizeof path) == -1 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	if (hcache_check(hc, fd, r))
		return fd;
	*bad = true;
	hc->bad++;
	if (unlink(path) == 0)
		hc->total -= hc->total < r->length ? hc->total : r->length;
	close(fd);
	return -1;
}

int
hcache_have(struct hcache *hc, const char *identity,
    const struct td_section_ref *r, bool *bad)
{
	struct hcache_seen *seen;
	struct stat st;
	int fd;

	if ((fd = hcache_open_checked(hc, identity, r, bad)) == -1) {
		hc->misses++;
		return -1;
	}
	/* the least lately used go first; still known good */
	if (futimens(fd, NULL) == 0 && fstat(fd, &st) == 0) {
		seen = &hc->seen[st.st_ino % HCACHE_SEEN];
		if (seen->ino == st.st_ino && seen->dev == st.st_dev) {
			seen->ctime = st.st_ctim;
			seen->mtime = st.st_mtim;
		}
	}
	hc->hits++;
	return fd;
}

int
hcache_read(struct hcache *hc, const char *identity,
    const struct td_section_ref *r, int fd,
    int (*fn)(void *, const void *, size_t), void *arg, char *err,
    size_t errlen)
{
	static uint8_t buf[65536];
	uint64_t off = 0;
	ssize_t k;
	bool bad = true;

	if (fd == -1)
		fd = hcache_open_checked(hc, identity, r, &bad);
	else if (!hcache_check(hc, fd, r)) {
		close(fd);
		fd = -1;
	}
	if (fd == -1) {
		snprintf(err, errlen, "the header cache has no good copy of "
		    "section %u (%s)", r->id, bad ? "it was damaged" :
		    "it is gone");
		return -1;
	}
	while (off < r->length) {
		k = pread(fd, buf, r->length - off < sizeof buf ?
		    r->length - off : sizeof buf, (off_t)off);
		if (k <= 0) {
			snprintf(err, errlen, "cannot read the header cache's "
			    "copy of section %u", r->id);
			close(fd);
			return -1;
		}
		if (fn(arg, buf, (size_t)k) == -1) {
			close(fd);
			snprintf(err, errlen, "cannot write section %u",
			    r->id);
			return -1;
		}
		off += (uint64_t)k;
	}
	close(fd);
	return 0;
}

/* mkdir -p of a path below dir's root, one level at a time. */
static int
hcache_mkdirs(const struct hcache *hc, const char *path)
{
	char p[PATH_MAX];
	size_t i, base = strlen(hc->root);

	if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
		return -1;
	for (i = base; ; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0700) == -1 && errno != EEXIST)
			return -1;
		if (path[i] == '\0')
			return 0;
		p[i] = '/';
	}
}

/*
 * Charge identity n bytes of writes: 0, or -1 when that would pass
 * TD_HCACHE_WRITE_MAX in the TD_HCACHE_WRITE_WINDOW seconds since its
 * window began (then *used is what it wrote).  Windows that ended are
 * forgotten first.
 */
static int
hcache_charge(struct hcache *hc, const char *identity, uint64_t n,
    uint64_t *used)
{
	struct hcache_writer *w = NULL;
	struct timespec now;
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &now);
	for (i = 0; i < hc->nw; ) {
		if (now.tv_sec - hc->w[i].since >= TD_HCACHE_WRITE_WINDOW) {
			free(hc->w[i].identity);
			hc->w[i] = hc->w[--hc->nw];
			continue;
		}
		if (strcmp(hc->w[i].identity, identity) == 0)
			w = &hc->w[i];
		i++;
	}
	if (w == NULL) {
		hc->w = xreallocarray(hc->w, hc->nw + 1, sizeof *hc->w);
		w = &hc->w[hc->nw++];
		w->identity = xstrdup(identity);
		w->since = now.tv_sec;
		w->bytes = 0;
	}
	*used = w->bytes;
	if (w->bytes + n > TD_HCACHE_WRITE_MAX)
		return -1;
	w->bytes += n;
	return 0;
}

uint64_t
hcache_usage(const struct hcache *hc, const char *identity)
{
	struct hcache_ent *v = NULL;
	char dir[PATH_MAX];
	size_t n = 0, cap = 0, i;
	uint64_t sum = 0;

	if (hc == NULL || hcache_dir(hc, identity, TD_OPT_KALLSYMS, dir,
	    sizeof dir) == -1)
		return 0;
	hcache_scan(dir, &v, &n, &cap);
	for (i = 0; i < n; i++)
		sum += v[i].size;
	hcache_ents_free(v, n);
	return sum;
}

struct hcache_put *
hcache_put_begin(struct hcache *hc, const char *identity,
    const struct td_section_ref *want, char *err, size_t errlen)
{
	struct hcache_put *p;
	uint64_t used;

	if (want->length > TD_HCACHE_IDENTITY_MAX / 2) {
		snprintf(err, errlen, "section %u is too big for the header "
		    "cache", want->id);
		return NULL;
	}
	if (hcache_charge(hc, identity, want->length, &used) == -1) {
		snprintf(err, errlen, "section %u not kept: '%s' had %llu "
		    "bytes written within %d s (at most %llu)", want->id,
		    identity, (unsigned long long)used, TD_HCACHE_WRITE_WINDOW,
		    (unsigned long long)TD_HCACHE_WRITE_MAX);
		return NULL;
	}
	p = xcalloc(1, sizeof *p);
	p->hc = hc;
	p->want_len = want->length;
	p->fd = -1;
	memcpy(p->want, want->sha, sizeof p->want);
	if (hcache_dir(hc, identity, want->id, p->dir, sizeof p->dir) == -1 ||
	    snprintf(p->tmp, sizeof p->tmp, "%s/.tmp-XXXXXX", p->dir) >=
	    (int)sizeof p->tmp) {
		snprintf(err, errlen, "header cache path too long");
		goto fail;
	}
	if (mkdir(hc->root, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s': %s", hc->root,
		    strerror(errno));
		goto fail;
	}
	if (hcache_mkdirs(hc, p->dir) == -1 ||
	    (p->fd = mkostemp(p->tmp, O_CLOEXEC)) == -1) {
		p->fd = -1;
		snprintf(err, errlen, "cannot create a file in '%s': %s",
		    p->dir, strerror(errno));
		goto fail;
	}
	p->made = true;
	if ((p->md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(p->md, EVP_sha256(), NULL) != 1) {
		snprintf(err, errlen, "cannot start SHA-256");
		goto fail;
	}
	return p;
fail:
	hcache_put_abort(p);
	return NULL;
}

int
hcache_put_write(struct hcache_put *p, const void *buf, size_t n)
{
	uint64_t off = 0;

	p->len += n;
	if (p->len > p->want_len || p->len > TD_HCACHE_IDENTITY_MAX / 2) {
		errno = EFBIG;
		return -1;
	}
	EVP_DigestUpdate(p->md, buf, n);
	return td_fileio_write(p->fd, buf, n, &off);
}

int
hcache_put_end(struct hcache_put *p, char *err, size_t errlen)
{
	uint8_t sha[EVP_MAX_MD_SIZE];
	char hex[2 * TD_HCACHE_SHA_LEN + 1], path[PATH_MAX];
	unsigned int shalen = 0;
	int ret = 0;

	EVP_DigestFinal_ex(p->md, sha, &shalen);
	if (shalen != TD_HCACHE_SHA_LEN ||
	    memcmp(sha, p->want, TD_HCACHE_SHA_LEN) != 0)
		goto out;	/* not what was offered: keep nothing */
	hcache_hex(sha, hex);
	if (snprintf(path, sizeof path, "%s/%s", p->dir, hex) >=
	    (int)sizeof path) {
		snprintf(err, errlen, "header cache path too long");
		ret = -1;
		goto out;
	}
	if (rename(p->tmp, path) == -1) {
		snprintf(err, errlen, "cannot rename '%s': %s", p->tmp,
		    strerror(errno));
		ret = -1;
		goto out;
	}
	p->made = false;
	/* hashed as it came: known good as it is now (after the rename) */
	hcache_seen(p->hc, p->fd, sha);
	p->hc->total += p->len;
	p->hc->stores++;
	hcache_evict(p->hc, p->dir);
	ret = 1;
out:
	hcache_put_abort(p);
	return ret;
}

void
hcache_put_abort(struct hcache_put *p)
{
	if (p == NULL)
		return;
	if (p->fd != -1)
		close(p->fd);
	if (p->made)
		(void)unlink(p->tmp);
	EVP_MD_CTX_free(p->md);
	free(p);
}
