/*
 * registry.c: the index of the listener's recordings (see registry.h).
 *
 * A list: a HELLO looks up one identity's recordings, and a tdlisten holds
 * a few thousand at most (--max-sessions, 1024 by default), so a walk
 * costs microseconds next to the TLS handshake before it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "finished.h"
#include "listener.h"
#include "registry.h"
#include "xmalloc.h"
#include "banned.h"

/* One recording's keys. */
struct registry_entry {
	void			*rec;
	char			 identity[TD_MAX_NAME_LEN + 1];
	uint64_t		 recording_id;
	uint64_t		 trace_id;
	uint64_t		 deadline_ms;	/* 0: it has an owner */
	struct registry_entry	*next;
	struct registry_entry	*prev;
};

static struct registry_entry *registry_list;

struct registry_entry *
registry_add(void *rec, const char *identity, uint64_t recording_id,
    uint64_t trace_id)
{
	struct registry_entry *e = xcalloc(1, sizeof *e);

	e->rec = rec;
	snprintf(e->identity, sizeof e->identity, "%s", identity);
	e->recording_id = recording_id;
	e->trace_id = trace_id;
	e->next = registry_list;
	if (registry_list != NULL)
		registry_list->prev = e;
	registry_list = e;
	return e;
}

void
registry_remove(struct registry_entry *e)
{
	if (e == NULL)
		return;
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		registry_list = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	free(e);
}

void *
registry_find(const char *identity, uint64_t recording_id)
{
	struct registry_entry *e;

	for (e = registry_list; e != NULL; e = e->next)
		if (e->recording_id == recording_id &&
		    strcmp(e->identity, identity) == 0)
			return e->rec;
	return NULL;
}

int
registry_count(const char *identity)
{
	struct registry_entry *e;
	int n = 0;

	for (e = registry_list; e != NULL; e = e->next)
		if (strcmp(e->identity, identity) == 0)
			n++;
	return n;
}

void
registry_set_deadline(struct registry_entry *e, uint64_t deadline_ms)
{
	e->deadline_ms = deadline_ms;
}

void *
registry_expired(uint64_t now_ms)
{
	struct registry_entry *e;

	for (e = registry_list; e != NULL; e = e->next)
		if (e->deadline_ms != 0 && e->deadline_ms <= now_ms)
			return e->rec;
	return NULL;
}

void *
registry_any(void)
{
	return registry_list != NULL ? registry_list->rec : NULL;
}

void
registry_finished(const struct finished *f)
{
	finished_add(f);
}

const struct finished *
registry_find_finished(const char *identity, uint64_t recording_id)
{
	return finished_find(identity, recording_id);
}

void
registry_each(const char *identity, void (*fn)(void *, void *), void *arg)
{
	struct registry_entry *e;

	for (e = registry_list; e != NULL; e = e->next)
		if (identity == NULL || strcmp(e->identity, identity) == 0)
			fn(e->rec, arg);
}
