/*
 * collectors.c: the list of listeners of tdagent -h A,B,C (see
 * collectors.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors.h"
#include "conn.h"
#include "tdlimits.h"
#include "xmalloc.h"
#include "banned.h"

/* The parsed list: each target and its description. */
struct collectors {
	int		 n;
	struct conn_target t[TD_MAX_COLLECTORS];
	char		 where[TD_MAX_COLLECTORS][4200];
};

/* Whether s is a port number, 1 to 65535. */
static bool
collectors_port_ok(const char *s)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	v = strtoul(s, &end, 10);
	return *end == '\0' && v >= 1 && v <= 65535;
}

/*
 * Split item (len bytes, no comma) into its address and its own port, if
 * it has one ("HOST:PORT", "[V6]:PORT", "vsock:CID:PORT"): the address
 * into addr, the port into port (else left as it is).  -1 with err when
 * the port is not a number.
 */
static int
collectors_split(const char *item, char *addr, size_t addrlen, char *port,
    size_t portlen, char *err, size_t errlen)
{
	const char *colon = NULL, *rest = item;

	if (strncmp(item, "serial:", 7) == 0) {
		snprintf(addr, addrlen, "%s", item);	/* a path: as it is */
		return 0;
	}
	if (strncmp(item, "vsock:", 6) == 0) {
		rest = item + 6;
		colon = strchr(rest, ':');
	} else if (item[0] == '[') {
		/* "[V6]" or "[V6]:PORT" */
		if ((colon = strchr(item, ']')) != NULL)
			colon = colon[1] == ':' ? colon + 1 : NULL;
	} else if ((colon = strchr(item, ':')) != NULL &&
	    strchr(colon + 1, ':') != NULL)
		colon = NULL;	/* a bare IPv6 address: no port in it */
	if (colon == NULL) {
		snprintf(addr, addrlen, "%s", item);
		return 0;
	}
	if (!collectors_port_ok(colon + 1)) {
		snprintf(err, errlen, "bad port '%s' in '%s'", colon + 1, item);
		return -1;
	}
	snprintf(port, portlen, "%s", colon + 1);
	snprintf(addr, addrlen, "%.*s", (int)(colon - item), item);
	return 0;
}

/* Parse tdagent's -h (collectors.h). */
struct collectors *
collectors_parse(const char *list, const char *port,
    const char *server_name, bool tls, char *err, size_t errlen)
{
	struct collectors *cl;
	char item[sizeof cl->t[0].addr + 16], addr[sizeof item];
	char iport[16], msg[512];
	const char *p = list, *comma;
	size_t len;
	int i;

	cl = xcalloc(1, sizeof *cl);
	for (i = 0; i < TD_MAX_COLLECTORS; i++)
		cl->t[i].devfd = -1;
	for (;;) {
		comma = strchr(p, ',');
		len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (len == 0) {
			snprintf(err, errlen, "an empty collector in the list "
			    "(item %d)", cl->n + 1);
			goto fail;
		}
		if (cl->n == TD_MAX_COLLECTORS) {
			snprintf(err, errlen, "more than %d collectors",
			    TD_MAX_COLLECTORS);
			goto fail;
		}
		if (len >= sizeof item) {
			snprintf(err, errlen, "collector %d is too long",
			    cl->n + 1);
			goto fail;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		snprintf(iport, sizeof iport, "%s", port != NULL ? port : "");
		if (collectors_split(item, addr, sizeof addr, iport,
		    sizeof iport, err, errlen) == -1)
			goto fail;
		if (conn_target_parse(addr, iport, server_name, tls,
		    &cl->t[cl->n], msg, sizeof msg) == -1) {
			if (comma == NULL && cl->n == 0)
				snprintf(err, errlen, "%s", msg);
			else
				snprintf(err, errlen, "'%s': %s", item, msg);
			goto fail;
		}
		conn_target_describe(&cl->t[cl->n], cl->where[cl->n],
		    sizeof cl->where[cl->n]);
		cl->n++;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return cl;
fail:
	free(cl);
	return NULL;
}

/* Open the serial devices while root (collectors.h). */
int
collectors_open(struct collectors *cl, char *err, size_t errlen)
{
	int i;

	for (i = 0; i < cl->n; i++)
		if (conn_target_open(&cl->t[i], err, errlen) == -1)
			return -1;
	return 0;
}

/* Close the devices and free. */
void
collectors_free(struct collectors *cl)
{
	int i;

	if (cl == NULL)
		return;
	for (i = 0; i < cl->n; i++)
		conn_target_close(&cl->t[i]);
	free(cl);
}

/* How many collectors. */
int
collectors_count(const struct collectors *cl)
{
	return cl->n;
}

/* The i-th collector's target. */
const struct conn_target *
collectors_target(const struct collectors *cl, int i)
{
	return &cl->t[i];
}

/* Where the i-th leads, for messages. */
const char *
collectors_where(const struct collectors *cl, int i)
{
	return cl->where[i];
}

/* Whether one of them takes a port. */
bool
collectors_ported(const struct collectors *cl)
{
	int i;

	for (i = 0; i < cl->n; i++)
		if (cl->t[i].kind != CONN_SERIAL)
			return true;
	return false;
}
