/*
 * budget.c: the memory and descriptor accounts of tdlisten's sessions
 * (see budget.h).  Identities are few and short-lived in the list: a pool
 * exists while one of its sessions does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* The sessions of one identity. */
struct budget_pool {
	char			 identity[TD_MAX_NAME_LEN + 1];
	uint64_t		 held;
	int			 fds;		/* reserved */
	int			 refs;
	struct budget_pool	*next;
};

/* One session's account. */
struct budget_account {
	struct budget_pool	*pool;
	uint64_t		 held;
	int			 fds;
};

static struct budget_caps budget_caps = {
	TD_SESSION_MEM, TD_IDENTITY_MEM, TD_LISTENER_MEM, 1024, TD_FD_RESERVE,
	0
};
static struct budget_pool *budget_pools;
static uint64_t budget_total;
static int budget_fd_total;

void
budget_init(const struct budget_caps *caps)
{
	budget_caps = *caps;
}

static struct budget_pool *
budget_pool_find(const char *identity)
{
	struct budget_pool *p;

	for (p = budget_pools; p != NULL; p = p->next)
		if (strcmp(p->identity, identity) == 0)
			return p;
	return NULL;
}

struct budget_account *
budget_open(const char *identity)
{
	struct budget_account *a;
	struct budget_pool *p;

	if ((p = budget_pool_find(identity)) == NULL) {
		p = xcalloc(1, sizeof *p);
		snprintf(p->identity, sizeof p->identity, "%s", identity);
		p->next = budget_pools;
		budget_pools = p;
	}
	p->refs++;
	a = xcalloc(1, sizeof *a);
	a->pool = p;
	return a;
}

void
budget_close(struct budget_account *a)
{
	struct budget_pool **pp;

	if (a == NULL)
		return;
	budget_set(a, 0);
	budget_fd_total -= a->fds;
	a->pool->fds -= a->fds;
	if (--a->pool->refs == 0) {
		for (pp = &budget_pools; *pp != a->pool; pp = &(*pp)->next)
			;
		*pp = a->pool->next;
		free(a->pool);
	}
	free(a);
}

enum budget_over
budget_set(struct budget_account *a, uint64_t held)
{
	budget_total = budget_total - a->held + held;
	a->pool->held = a->pool->held - a->held + held;
	a->held = held;
	if (held > budget_caps.session)
		return BUDGET_SESSION;
	if (a->pool->held > budget_caps.identity)
		return BUDGET_IDENTITY;
	if (budget_total > budget_caps.total)
		return BUDGET_TOTAL;
	return BUDGET_OK;
}

const char *
budget_over_name(enum budget_over o)
{
	switch (o) {
	case BUDGET_SESSION:
		return "the memory budget of a session";
	case BUDGET_IDENTITY:
		return "the memory budget of this identity";
	case BUDGET_TOTAL:
		return "the listener's memory budget";
	default:
		return "no budget";
	}
}

enum budget_over
budget_fds(struct budget_account *a, int n, int conns)
{
	int others = budget_fd_total - a->fds;
	int mine = a->pool->fds - a->fds;

	if (budget_caps.identity_fds > 0 && mine + n > budget_caps.identity_fds)
		return BUDGET_IDENTITY;
	if (others + n + conns + budget_caps.fd_reserve > budget_caps.fds)
		return BUDGET_TOTAL;
	budget_fd_total = others + n;
	a->pool->fds = mine + n;
	a->fds = n;
	return BUDGET_OK;
}

uint64_t
budget_held(void)
{
	return budget_total;
}

uint64_t
budget_identity_held(const char *identity)
{
	struct budget_pool *p = budget_pool_find(identity);

	return p != NULL ? p->held : 0;
}

int
budget_fds_reserved(void)
{
	return budget_fd_total;
}
