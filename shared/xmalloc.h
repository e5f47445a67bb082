/*
 * xmalloc.h: allocation of small internal objects; failure is fatal.
 *
 * Use these for bookkeeping structures whose size the program controls.  Big
 * data buffers, and anything sized by a remote peer, are bounded by
 * shared/tdlimits.h and allocated with plain malloc() and a checked result.
 */
#ifndef TD_XMALLOC_H
#define TD_XMALLOC_H

#include <stddef.h>

void	*xmalloc(size_t size);
void	*xcalloc(size_t nmemb, size_t size);
void	*xreallocarray(void *ptr, size_t nmemb, size_t size);
char	*xstrdup(const char *s);
int	 xasprintf(char **ret, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

#endif
