/*
 * kvmclock.c: a KVM guest's TSC parameters from debugfs (see
 * kvmclock.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmclock.h"
#include "xmalloc.h"
#include "banned.h"

/* One VM's directory, kept open. */
struct kvmclock {
	int		 fd;
	char		 name[64];
};

/* The number that all of s is (decimal, after prefix), or -1. */
static long long
kvmclock_number(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	char *end;
	long long v;

	if (strncmp(s, prefix, n) != 0 || s[n] < '0' || s[n] > '9')
		return -1;
	errno = 0;
	v = strtoll(s + n, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		return -1;
	return v;
}

struct kvmclock *
kvmclock_open(const char *dir, pid_t pid, char *err, size_t errlen)
{
	struct kvmclock *k;
	struct dirent *de;
	char prefix[32];
	long long fd, best = -1;
	DIR *d;
	int e;

	if ((d = opendir(dir)) == NULL) {
		e = errno;
		snprintf(err, errlen, "cannot read '%s': %s", dir,
		    strerror(e));
		errno = e;
		return NULL;
	}
	/* "<pid>-<fd>": QEMU opened one VM; the lowest fd if more */
	snprintf(prefix, sizeof prefix, "%ld-", (long)pid);
	while ((de = readdir(d)) != NULL)
		if ((fd = kvmclock_number(de->d_name, prefix)) >= 0 &&
		    (best == -1 || fd < best))
			best = fd;
	if (best == -1) {
		closedir(d);
		snprintf(err, errlen, "no '%s<fd>' in '%s'", prefix, dir);
		errno = ENOENT;
		return NULL;
	}
	k = xcalloc(1, sizeof *k);
	snprintf(k->name, sizeof k->name, "%s%lld", prefix, best);
	k->fd = openat(dirfd(d), k->name, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC);
	e = errno;
	closedir(d);
	if (k->fd == -1) {
		snprintf(err, errlen, "cannot open '%s/%s': %s", dir, k->name,
		    strerror(e));
		free(k);
		errno = e;
		return NULL;
	}
	return k;
}

const char *
kvmclock_name(const struct kvmclock *k)
{
	return k->name;
}

/*
 * The number in file vcpuN/name: 0 and *v, 1 when the file does not
 * exist, -1 when it cannot be read or holds no number.
 */
static int
kvmclock_file(struct kvmclock *k, uint32_t vcpu, const char *name,
    bool is_signed, uint64_t *v)
{
	char path[64], text[64], *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "vcpu%u/%s", vcpu, name);
	fd = openat(k->fd, path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return errno == ENOENT ? 1 : -1;
	n = read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	if (text[n - 1] == '\n')
		text[n - 1] = '\0';
	errno = 0;
	if (is_signed)
		*v = (uint64_t)strtoll(text, &end, 10);
	else
		*v = strtoull(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' ||
	    (!is_signed && text[0] == '-'))
		return -1;
	return 0;
}

int
kvmclock_read(struct kvmclock *k, struct kvmclock_vcpu *v, int max,
    char *err, size_t errlen)
{
	struct kvmclock_vcpu t;
	struct dirent *de;
	long long num;
	uint64_t x;
	int count = 0, i, j, fd, r;
	DIR *d;

	fd = openat(k->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		snprintf(err, errlen, "cannot read '%s': %s", k->name,
		    strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if ((num = kvmclock_number(de->d_name, "vcpu")) < 0 ||
		    num > UINT32_MAX)
			continue;
		if (count == max) {
			closedir(d);
			snprintf(err, errlen, "'%s' has more than %d vCPUs",
			    k->name, max);
			errno = E2BIG;
			return -1;
		}
		v[count++].vcpu = (uint32_t)num;
	}
	closedir(d);
	if (count == 0) {
		snprintf(err, errlen, "'%s' has no vCPU (the VM is gone)",
		    k->name);
		errno = ENOENT;
		return -1;
	}
	/* by vCPU number (a handful: insertion) */
	for (i = 1; i < count; i++) {
		t = v[i];
		for (j = i; j > 0 && v[j - 1].vcpu > t.vcpu; j--)
			v[j] = v[j - 1];
		v[j] = t;
	}
	for (i = 0; i < count; i++) {
		if (kvmclock_file(k, v[i].vcpu, "tsc-offset", true, &x) != 0) {
			snprintf(err, errlen, "cannot read '%s/vcpu%u/"
			    "tsc-offset'", k->name, v[i].vcpu);
			if (errno == 0)
				errno = EINVAL;
			return -1;
		}
		v[i].offset = (int64_t)x;
		v[i].ratio = 1;
		v[i].frac = 0;
		/* no ratio file: the host does not scale TSCs */
		r = kvmclock_file(k, v[i].vcpu, "tsc-scaling-ratio", false,
		    &x);
		if (r == 0 && x != 0) {
			v[i].ratio = x;
			r = kvmclock_file(k, v[i].vcpu,
			    "tsc-scaling-ratio-frac-bits", false, &x);
			if (r == 0 && x >= 64)
				r = -1;
			v[i].frac = (uint32_t)x;
			if (r != 0) {
				snprintf(err, errlen, "cannot read '%s/vcpu%u/"
				    "tsc-scaling-ratio-frac-bits'", k->name,
				    v[i].vcpu);
				errno = EINVAL;
				return -1;
			}
		} else if (r != 1) {
			snprintf(err, errlen, "cannot read '%s/vcpu%u/"
			    "tsc-scaling-ratio'", k->name, v[i].vcpu);
			errno = EINVAL;
			return -1;
		}
	}
	return count;
}

void
kvmclock_free(struct kvmclock *k)
{
	if (k == NULL)
		return;
	close(k->fd);
	free(k);
}
