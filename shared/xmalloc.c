/*
 * xmalloc.c: allocators that exit on failure, for small internal objects.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

static void __attribute__((noreturn))
xmalloc_die(size_t size)
{
	fprintf(stderr, "tracedock: out of memory allocating %zu bytes\n", size);
	abort();
}

/* Allocate size bytes or die. */
void *
xmalloc(size_t size)
{
	void *p;

	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		xmalloc_die(size);
	return p;
}

/* Allocate a zeroed array or die. */
void *
xcalloc(size_t nmemb, size_t size)
{
	void *p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = calloc(nmemb, size)) == NULL)
		xmalloc_die(nmemb * size);
	return p;
}

/* Resize an array, checking the multiplication, or die. */
void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void *p;

	if (size != 0 && nmemb > SIZE_MAX / size)
		xmalloc_die(SIZE_MAX);
	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = realloc(ptr, nmemb * size)) == NULL)
		xmalloc_die(nmemb * size);
	return p;
}

/* Duplicate a string or die. */
char *
xstrdup(const char *s)
{
	char *p;

	if ((p = strdup(s)) == NULL)
		xmalloc_die(strlen(s) + 1);
	return p;
}

/* Format into a new string or die; returns its length. */
int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(ret, fmt, ap);
	va_end(ap);
	if (n < 0)
		xmalloc_die(strlen(fmt));
	return n;
}
