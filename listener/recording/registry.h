/*
 * registry.h: every recording the listener holds, open or waiting for its
 * producer to resume it, and those it finished lately.
 *
 * An index only: entries point at recordings (void *, owned by
 * recording.c, which adds and removes its own) and keep the keys they are
 * found by: the identity and the producer's recording id (resuming), the
 * recording's trace id, and, for an ownerless recording, the time its
 * resume deadline passes.  Finished recordings are found here too
 * (finished.c keeps them, across restarts).  Nothing here calls a
 * recording or logs.  Loop thread only.
 */
#ifndef TD_REGISTRY_H
#define TD_REGISTRY_H

#include <stdint.h>

struct finished;
struct registry_entry;

/* Index rec by identity and recording_id (trace_id is kept, unread). */
struct registry_entry *registry_add(void *rec, const char *identity,
		    uint64_t recording_id, uint64_t trace_id);
void		 registry_remove(struct registry_entry *e);
/* The open recording of identity with recording_id, or NULL. */
void		*registry_find(const char *identity, uint64_t recording_id);
/* Open recordings of identity. */
int		 registry_count(const char *identity);
/*
 * fn(rec, arg) for each open recording of identity (NULL: every open
 * recording); fn adds or removes none.
 */
void		 registry_each(const char *identity,
		    void (*fn)(void *rec, void *arg), void *arg);
/* Ownerless until the monotonic ms deadline (0: owned again). */
void		 registry_set_deadline(struct registry_entry *e,
		    uint64_t deadline_ms);
/* A recording whose deadline passed by now_ms (ms), or NULL. */
void		*registry_expired(uint64_t now_ms);
/* Any recording still here (to take them down one by one), or NULL. */
void		*registry_any(void);
/* A recording finished: remembered for a producer that missed its end. */
void		 registry_finished(const struct finished *f);
/* The recording of identity with recording_id finished lately, or NULL. */
const struct finished *registry_find_finished(const char *identity,
		    uint64_t recording_id);

#endif
