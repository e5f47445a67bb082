/*
 * hcache.h: the listener's header cache, header sections kept by content
 * (protocol version 4, docs/tdproto.md "The header cache").
 *
 * Each entry is one section's exact content in a file named after its
 * SHA-256, under DIR/.tdlisten-cache: shared/ for the sections without
 * secrets (HEADER_INFO, FTRACE_EVENTS, EVENT_FORMATS: the same for every
 * machine of one kernel build), id/IDENTITY/ for the others (KALLSYMS
 * holds the machine's KASLR base, PRINTK and CMDLINES its strings), which
 * only that identity's recordings ever see.  An entry is written from what
 * a recording received, its name the hash the listener computed (never
 * the agent's word), through a temporary file and rename(2); it is checked
 * against its name when it is used: hashed the first time, and whenever
 * its inode, size or times change (a bad one is removed).  The cache
 * holds at most TD_HCACHE_IDENTITY_MAX bytes per identity directory
 * (shared/ included) and TD_HCACHE_TOTAL_MAX in all; the entries used
 * least lately go first (a hit renews an entry's time).  Whatever becomes
 * of it, a section being kept is charged to the identity that sent it: at
 * most TD_HCACHE_WRITE_MAX bytes within TD_HCACHE_WRITE_WINDOW seconds,
 * past which its sections are not kept (they still reach its file).
 *
 * Errors: -1 or NULL with a message; nothing here logs.  Loop thread only.
 */
#ifndef TD_HCACHE_H
#define TD_HCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hcache;
struct hcache_put;
struct td_section_ref;

/* The cache under dir (made when first written); takes stock of it. */
struct hcache	*hcache_new(const char *dir);
void		 hcache_free(struct hcache *hc);
/* Whether sections of this id may be shared across identities. */
bool		 hcache_shared(uint16_t id);
/*
 * A good copy of r that identity may use, opened (its time renewed), or
 * -1 (a bad one is removed, and bad set).  Entries are never rewritten,
 * so the descriptor keeps that content even if the entry is evicted.
 */
int		 hcache_have(struct hcache *hc, const char *identity,
		    const struct td_section_ref *r, bool *bad);
/*
 * Check the copy of r (fd from hcache_have(), which this closes, or -1 to
 * open it now) and hand it to fn in pieces; -1 with err when it is gone or
 * bad (nothing handed then), or when fn fails (errno its own).
 */
int		 hcache_read(struct hcache *hc, const char *identity,
		    const struct td_section_ref *r, int fd,
		    int (*fn)(void *, const void *, size_t), void *arg,
		    char *err, size_t errlen);
/*
 * Keep the section id that identity is about to send, if it has the
 * hash want: its bytes go to hcache_put_write(), and hcache_put_end()
 * stores it under the hash of what came, if that is want.
 */
struct hcache_put *hcache_put_begin(struct hcache *hc, const char *identity,
		    const struct td_section_ref *want, char *err,
		    size_t errlen);
int		 hcache_put_write(struct hcache_put *p, const void *buf,
		    size_t n);
/* 1 stored, 0 not (the content is not what was offered), -1 err. */
int		 hcache_put_end(struct hcache_put *p, char *err, size_t errlen);
void		 hcache_put_abort(struct hcache_put *p);
/*
 * Bytes of identity's own entries (id/IDENTITY: KALLSYMS, PRINTK,
 * CMDLINES), which its --quota counts; 0 for a NULL cache.
 */
uint64_t	 hcache_usage(const struct hcache *hc, const char *identity);
/* Hits, misses, stores and bad entries so far (for the log). */
void		 hcache_stats(const struct hcache *hc, uint64_t st[4]);

#endif
