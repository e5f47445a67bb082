/*
 * kvmclock.h: a KVM guest's TSC as its host sets it, read from debugfs the
 * way trace-cmd's "kvm" time sync reads it:
 *
 *	DIR/<qemu pid>-<vm fd>/vcpuN/tsc-offset			(signed)
 *	DIR/<qemu pid>-<vm fd>/vcpuN/tsc-scaling-ratio		(absent: 1)
 *	DIR/<qemu pid>-<vm fd>/vcpuN/tsc-scaling-ratio-frac-bits	(absent: 0)
 *
 * where guest TSC = (host TSC * ratio >> frac bits) + offset, exactly: the
 * CPU computes it so.  DIR is KVM's debugfs directory,
 * /sys/kernel/debug/kvm, or any directory of the same shape (the tests
 * make one).  kvmclock_open() runs as root in tdagent's set-up (debugfs
 * is root's) and keeps the VM's directory open; the recorder reads
 * through it later without privileges (KVM makes the files 0444 in
 * directories of 0755), vCPUs added since included.  Returns -1 (NULL)
 * with a message in err; never logs.  One thread.
 */
#ifndef TD_KVMCLOCK_H
#define TD_KVMCLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct kvmclock;

/* One vCPU's TSC parameters. */
struct kvmclock_vcpu {
	uint32_t	 vcpu;
	int64_t		 offset;
	uint64_t	 ratio;		/* 1 when the host does not scale */
	uint32_t	 frac;
};

/*
 * The VM of QEMU process pid under dir: NULL with errno ENOENT (and err)
 * when dir has none (not a KVM guest, or debugfs not mounted), another
 * errno when it cannot be read.
 */
struct kvmclock	*kvmclock_open(const char *dir, pid_t pid, char *err,
		    size_t errlen);
/* Its directory's name ("1234-12"). */
const char	*kvmclock_name(const struct kvmclock *k);
/*
 * Every vCPU's parameters now, up to max, by increasing vCPU number:
 * their count, or -1 with err (errno ENOENT: the VM is gone).
 */
int		 kvmclock_read(struct kvmclock *k, struct kvmclock_vcpu *v,
		    int max, char *err, size_t errlen);
void		 kvmclock_free(struct kvmclock *k);

#endif
