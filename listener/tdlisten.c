/*
 * tdlisten.c: command line and main loop of tdlisten, the collection side
 * of tracedock: one process, one libevent loop, many agents.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "admit.h"
#include "budget.h"
#include "client.h"
#include "agentconn.h"
#include "control.h"
#include "finished.h"
#include "httpd.h"
#include "hcache.h"
#include "history.h"
#include "listener.h"
#include "crash.h"
#include "guests.h"
#include "log.h"
#include "memtrim.h"
#include "onfinish.h"
#include "notify.h"
#include "output.h"
#include "recording.h"
#include "reload.h"
#include "rotate.h"
#include "server.h"
#include "tclocal.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "size.h"
#include "standbytab.h"
#include "tls.h"
#include "uftrace.h"
#include "tracecmd.h"
#include "banned.h"

enum {
	OPT_CERT = 1000,
	OPT_UNIX,
	OPT_VSOCK,
	OPT_KEY,
	OPT_CA,
	OPT_CRL,
	OPT_INSECURE,
	OPT_FILE_VERSION,
	OPT_COMPRESSION,
	OPT_BIND,
	OPT_MAX_SESSIONS,
	OPT_TSYNC_INTERVAL,
	OPT_RESUME_WAIT,
	OPT_IDLE_TIMEOUT,
	OPT_HANDSHAKE_TIMEOUT,
	OPT_MAX_HANDSHAKES,
	OPT_MAX_HANDSHAKES_ADDR,
	OPT_MAX_PER_IDENTITY,
	OPT_MAX_STANDBY_PER_IDENTITY,
	OPT_QUOTA,
	OPT_ROTATE,
	OPT_KEEP,
	OPT_GROUP,
	OPT_UFTRACE_PORT,
	OPT_UFTRACE_BIND,
	OPT_TRACECMD_PORT,
	OPT_TRACECMD_BIND,
	OPT_TRACECMD_DATA_PORTS,
	OPT_HTTP,
	OPT_CONTROL,
	OPT_ON_FINISH,
	OPT_ON_FINISH_JOBS,
	OPT_ON_FINISH_TIMEOUT,
	OPT_ON_FINISH_RETRY,
	OPT_ON_FINISH_ATTEMPTS,
	OPT_NO_HEADER_CACHE,
	OPT_GUEST,
	OPT_NO_UDP_PROBES,
	OPT_HELP,
	OPT_VERSION,
};

/* Checkpoint and acknowledge at least this often (and expire). */
#define TDLISTEN_TICK_MS	250

static struct listener_config *tdlisten_cfg;
static struct event *tdlisten_tick_ev;
/* --on-finish and its options (cmd NULL: none) */
static struct onfinish_config tdlisten_of = { NULL, 2, 600, 10, 8, 0600 };

static const struct option tdlisten_longopts[] = {
	{ "cert", required_argument, NULL, OPT_CERT },
	{ "key", required_argument, NULL, OPT_KEY },
	{ "ca", required_argument, NULL, OPT_CA },
	{ "crl", required_argument, NULL, OPT_CRL },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
	{ "file-version", required_argument, NULL, OPT_FILE_VERSION },
	{ "compression", required_argument, NULL, OPT_COMPRESSION },
	{ "bind", required_argument, NULL, OPT_BIND },
	{ "unix", required_argument, NULL, OPT_UNIX },
	{ "vsock", required_argument, NULL, OPT_VSOCK },
	{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
	{ "tsync-interval", required_argument, NULL, OPT_TSYNC_INTERVAL },
	{ "resume-wait", required_argument, NULL, OPT_RESUME_WAIT },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "handshake-timeout", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT },
	{ "max-handshakes", required_argument, NULL, OPT_MAX_HANDSHAKES },
	{ "max-handshakes-per-address", required_argument, NULL,
	    OPT_MAX_HANDSHAKES_ADDR },
	{ "max-per-identity", required_argument, NULL, OPT_MAX_PER_IDENTITY },
	{ "max-standby-per-identity", required_argument, NULL,
	    OPT_MAX_STANDBY_PER_IDENTITY },
	{ "quota", required_argument, NULL, OPT_QUOTA },
	{ "rotate", required_argument, NULL, OPT_ROTATE },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "group", required_argument, NULL, OPT_GROUP },
	{ "uftrace-port", required_argument, NULL, OPT_UFTRACE_PORT },
	{ "uftrace-bind", required_argument, NULL, OPT_UFTRACE_BIND },
	{ "tracecmd-port", required_argument, NULL, OPT_TRACECMD_PORT },
	{ "tracecmd-bind", required_argument, NULL, OPT_TRACECMD_BIND },
	{ "tracecmd-data-ports", required_argument, NULL,
	    OPT_TRACECMD_DATA_PORTS },
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "on-finish", required_argument, NULL, OPT_ON_FINISH },
	{ "on-finish-jobs", required_argument, NULL, OPT_ON_FINISH_JOBS },
	{ "on-finish-timeout", required_argument, NULL, OPT_ON_FINISH_TIMEOUT },
	{ "on-finish-retry", required_argument, NULL, OPT_ON_FINISH_RETRY },
	{ "on-finish-attempts", required_argument, NULL,
	    OPT_ON_FINISH_ATTEMPTS },
	{ "no-header-cache", no_argument, NULL, OPT_NO_HEADER_CACHE },
	{ "guest", required_argument, NULL, OPT_GUEST },
	{ "no-udp-probes", no_argument, NULL, OPT_NO_UDP_PROBES },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *fp)
{
	fprintf(fp,
"usage: tdlisten [-p PORT] [-d DIR] [--cert FILE --key FILE --ca FILE] [--crl FILE]\n"
"                [--insecure] [--bind ADDR] [--unix PATH] [--vsock PORT]\n"
"                [--guest HOST:GUEST] [--file-version 6|7]\n"
"                [--compression zstd|zlib|none] [--max-sessions N]\n"
"                [--tsync-interval MS] [--no-udp-probes]\n"
"                [--resume-wait S] [--idle-timeout S]\n"
"                [--handshake-timeout S] [--max-handshakes N]\n"
"                [--max-handshakes-per-address N] [--max-per-identity N]\n"
"                [--max-standby-per-identity N]\n"
"                [--quota SIZE] [--rotate SIZE|DURATION [--keep N|SIZE]]\n"
"                [--uftrace-port PORT [--uftrace-bind ADDR]]\n"
"                [--tracecmd-port PORT [--tracecmd-bind ADDR]\n"
"                [--tracecmd-data-ports A-B]]\n"
"                [--http [ADDR:]PORT] [--no-header-cache] [--control PATH]\n"
"                [--on-finish CMD [--on-finish-jobs N] [--on-finish-timeout S]\n"
"                [--on-finish-retry S] [--on-finish-attempts N]]\n"
"                [-u USER] [--group GROUP] [-D] [-l LOGFILE] [-q | -v]\n"
"       tdlisten --help | --version\n"
"\n"
"Receive recordings from tdagent -h over TLS and write one trace.dat per\n"
"recording as DIR/<host>/<host>-<UTC time>[-<name>].dat, <host> being the\n"
"name in the agent's verified certificate.\n"
"\n"
"  -p PORT            TCP port to listen on (default 4000)\n"
"  -d DIR             output directory (default: .)\n"
"  --cert FILE        this listener's certificate (PEM)\n"
"  --key FILE         its private key\n"
"  --ca FILE          the CA that signs agent certificates (tdcert init)\n"
"  --crl FILE         revoked agent certificates (tdcert revoke)\n"
"  --insecure         plain TCP, no authentication (the agent needs it too)\n"
"  --bind ADDR        listen on ADDR only (default: every address)\n"
"  --unix PATH        also listen on the Unix socket PATH (mode 0660), for\n"
"                     QEMU's chardev of a guest's virtio-serial port\n"
"  --vsock PORT       also listen on AF_VSOCK port PORT, for the guests of\n"
"                     this host (tdagent -h vsock:2 -p PORT in a guest)\n"
"  --guest HOST:GUEST  identity HOST's recordings may be paired with\n"
"                     identity GUEST's as its guest (repeatable; an\n"
"                     agent's --guest alone pairs nothing; [ADDR]: the\n"
"                     identity of an --insecure agent at ADDR)\n"
"  --file-version N   7 (default) or 6\n"
"  --compression C    zstd (default), zlib or none; v6 is never compressed\n"
"                     (zlib files: Debian 12's trace-cmd, libtracecmd and\n"
"                     KernelShark, built without zlib, cannot open them)\n"
"  --max-sessions N   refuse clients beyond N, of every kind together:\n"
"                     agents past their TLS handshake, trace-cmd and\n"
"                     uftrace clients (default 1024)\n"
"  --tsync-interval MS  time-sync round every MS ms (default 1000; 0: at\n"
"                     start and end only; -1: no time sync)\n"
"  --no-udp-probes    no UDP port for time-sync probes beside the TCP port:\n"
"                     agents probe over their stream (less precise)\n"
"  --resume-wait S    keep a recording whose agent went away S seconds for\n"
"                     it to come back and resume (default 600; 0: close it)\n"
"  --handshake-timeout S  a connection must be through TLS and its HELLO\n"
"                     within S seconds (default 10; 1 to 3600)\n"
"  --max-handshakes N  connections in the TLS handshake at once, apart from\n"
"                     --max-sessions (default 64; when all are taken, a\n"
"                     newcomer takes one of the busiest address, or is\n"
"                     refused)\n"
"  --max-handshakes-per-address N  of those, from one address or IPv6 /64\n"
"                     (default 16; more are refused)\n"
"  --idle-timeout S   an agent silent for S seconds is taken as gone\n"
"                     (default 60; 0: never)\n"
"  --max-per-identity N  recordings open at once per identity, and its\n"
"                     connections waiting for their HELLO (default 64)\n"
"  --max-standby-per-identity N  standby connections per identity\n"
"                     (default 2; a load generator playing many agents\n"
"                     with one certificate needs more)\n"
"  --quota SIZE       disk space per identity (K, M, G suffixes); a recording\n"
"                     over it pauses (its agent keeps the data) until there\n"
"                     is room again (default: no quota)\n"
"  --rotate SIZE|DURATION  write each recording of tdagent as complete\n"
"                     pieces NAME-0001.dat, NAME-0002.dat ..., the next one\n"
"                     begun once a piece holds SIZE bytes (K, M, G; at\n"
"                     least 1M) or spans DURATION (s, m, h: 30s, 10m, 1h)\n"
"  --keep N|SIZE      with --rotate, remove the oldest finished pieces of a\n"
"                     recording beyond N pieces, or SIZE bytes of pieces\n"
"  --uftrace-port PORT  also take runs of uftrace record --host H --port\n"
"                     PORT, each as the uftrace data directory\n"
"                     DIR/uftrace-<address>/<UTC time>/ (plain TCP, no\n"
"                     authentication: off unless given)\n"
"  --uftrace-bind ADDR  listen for uftrace on ADDR only (default 127.0.0.1)\n"
"  --tracecmd-port PORT  also take stock trace-cmd record -N HOST:PORT\n"
"                     clients (plain TCP and UDP, unauthenticated) into\n"
"                     DIR/tracecmd-<address>/tracecmd-<address>-<UTC\n"
"                     time>.dat (default: off)\n"
"  --tracecmd-bind ADDR  the address for them (default 127.0.0.1)\n"
"  --tracecmd-data-ports A-B  their per-CPU data ports (default 1500-6000,\n"
"                     trace-cmd listen's range)\n"
"  --on-finish CMD    run /bin/sh -c 'CMD \"$1\"' with $1 the absolute path of\n"
"                     each file put in place (a .dat, an .incomplete.dat, a\n"
"                     uftrace run's directory) and TD_FILE_KIND,\n"
"                     TD_PRODUCER, TD_IDENTITY, TD_RECORDING (sanitized as\n"
"                     in the file's name), TD_ATTEMPT, TD_JSON (all as one\n"
"                     escaped JSON object) set: quote \"$TD_...\"; off the\n"
"                     event loop, as -u USER; a failure is tried again\n"
"                     later; PATH.onfinish stays until it works\n"
"  --on-finish-jobs N  commands at once (default 2, at most %d)\n"
"  --on-finish-timeout S  a command running S seconds is killed, and fails\n"
"                     (default 600)\n"
"  --on-finish-retry S  wait S seconds before trying again, doubling up to\n"
"                     %d (default 10)\n"
"  --on-finish-attempts N  tries in all before giving up (default 8)\n"
"  --no-header-cache  keep no header sections by content hash: agents send\n"
"                     all of them every time (protocol version 3 only)\n"
"  -u USER            after binding, run as USER (when started as root)\n"
"  --group GROUP      GROUP may read the recordings: directories 0750 and\n"
"                     files 0640 of that group (default: 0700 and 0600,\n"
"                     the user's own)\n"
"  --control PATH     serve tdctl on the Unix socket PATH (mode 0660, the\n"
"                     -u user's; /run/tdlisten/control is tdctl's default):\n"
"                     start and stop recordings of tdagent --standby agents\n"
"  --http [ADDR:]PORT  serve a status page (/), /status (JSON) and /metrics\n"
"                     (Prometheus) on ADDR (default 127.0.0.1; not loopback:\n"
"                     over TLS, client certificates from --ca only)\n"
"  -D                 run in the background (logs to syslog unless -l)\n"
"  -l LOGFILE         append the log to LOGFILE\n"
"  -q                 log only warnings\n"
"  -v                 log more\n", TD_ONFINISH_MAX_JOBS,
	    TD_ONFINISH_RETRY_MAX);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tdlisten: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'tdlisten --help'.\n");
	exit(2);
}

static void
tdlisten_parse(int argc, char **argv, struct listener_config *c)
{
	bool codec_set = false;
	char msg[256];
	char *end;
	long n;
	int ch;

	memset(c, 0, sizeof *c);
	c->dir = ".";
	c->file_version = 7;
	c->codec = TD_CODEC_ZSTD;
	c->max_sessions = 1024;
	c->handshake_timeout = 10;
	/*
	 * A handshake takes a few ms of CPU: 64 at once keep up with a
	 * fleet reconnecting together (the rest wait in the listen queue),
	 * 16 per address let 4 addresses share them before the busiest one
	 * gives way to a newcomer.
	 */
	c->max_handshakes = 64;
	c->max_handshakes_addr = 16;
	/*
	 * A round holds the agent's ring readers for a few ms: at full
	 * event rates that costs events, so rounds are sparse by default
	 * (interpolation between them absorbs linear drift).
	 */
	c->tsync_interval = 1000;
	c->resume_wait = 600;
	c->idle_timeout = 60;
	c->max_per_identity = 64;
	c->max_standby_per_identity = TD_MAX_STANDBY_PER_IDENTITY;
	while ((ch = getopt_long(argc, argv, "p:d:Dl:qu:v", tdlisten_longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'p':
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 65535)
				usage_error("invalid port '%s'", optarg);
			c->port = optarg;
			break;
		case 'd':
			c->dir = optarg;
			break;
		case 'D':
			c->daemonize = true;
			break;
		case 'l':
			c->logfile = optarg;
			break;
		case 'q':
			c->verbosity = -1;
			break;
		case 'u':
			c->user = optarg;
			break;
		case 'v':
			c->verbosity = 1;
			break;
		case OPT_CERT:
			c->cert = optarg;
			break;
		case OPT_KEY:
			c->key = optarg;
			break;
		case OPT_CA:
			c->ca = optarg;
			break;
		case OPT_CRL:
			c->crl = optarg;
			break;
		case OPT_INSECURE:
			c->insecure = true;
			break;
		case OPT_BIND:
			c->bind = optarg;
			break;
		case OPT_UNIX:
			c->unix_path = optarg;
			break;
		case OPT_VSOCK:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 0x7fffffff)
				usage_error("invalid vsock port '%s'", optarg);
			c->vsock_port = (uint32_t)n;
			break;
		case OPT_MAX_SESSIONS:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 1000000)
				usage_error("invalid session count '%s'",
				    optarg);
			c->max_sessions = (int)n;
			break;
		case OPT_TSYNC_INTERVAL:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < -1 || n > 3600000)
				usage_error("invalid time-sync interval '%s' "
				    "(ms, -1 to 3600000)", optarg);
			c->tsync_interval = n == -1 ? TD_TSYNC_OFF :
			    (uint32_t)n;
			break;
		case OPT_RESUME_WAIT:
		case OPT_IDLE_TIMEOUT:
		case OPT_HANDSHAKE_TIMEOUT:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 0 || n > 86400 * 7 ||
			    (ch == OPT_HANDSHAKE_TIMEOUT && (n < 1 || n > 3600)))
				usage_error("invalid number of seconds '%s'",
				    optarg);
			if (ch == OPT_RESUME_WAIT)
				c->resume_wait = (int)n;
			else if (ch == OPT_IDLE_TIMEOUT)
				c->idle_timeout = (int)n;
			else
				c->handshake_timeout = (int)n;
			break;
		case OPT_MAX_HANDSHAKES:
		case OPT_MAX_HANDSHAKES_ADDR:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > TD_MAX_HANDSHAKES)
				usage_error("invalid count '%s' (1 to %d)",
				    optarg, TD_MAX_HANDSHAKES);
			if (ch == OPT_MAX_HANDSHAKES)
				c->max_handshakes = (int)n;
			else
				c->max_handshakes_addr = (int)n;
			break;
		case OPT_MAX_PER_IDENTITY:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 1000000)
				usage_error("invalid count '%s'", optarg);
			c->max_per_identity = (int)n;
			break;
		case OPT_MAX_STANDBY_PER_IDENTITY:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 1000000)
				usage_error("invalid count '%s'", optarg);
			c->max_standby_per_identity = (int)n;
			break;
		case OPT_GROUP:
			c->group = optarg;
			break;
		case OPT_UFTRACE_PORT:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 65535)
				usage_error("invalid port '%s'", optarg);
			c->uftrace_port = optarg;
			break;
		case OPT_UFTRACE_BIND:
			c->uftrace_bind = optarg;
			break;
		case OPT_TRACECMD_PORT:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 65535)
				usage_error("invalid port '%s'", optarg);
			c->tracecmd_port = optarg;
			break;
		case OPT_TRACECMD_BIND:
			c->tracecmd_bind = optarg;
			break;
		case OPT_TRACECMD_DATA_PORTS: {
			long hi;

			n = strtol(optarg, &end, 10);
			if (*end != '-' || n < 1 || n > 65535)
				usage_error("invalid port range '%s' (A-B)",
				    optarg);
			hi = strtol(end + 1, &end, 10);
			if (*end != '\0' || hi < n || hi > 65535)
				usage_error("invalid port range '%s' (A-B)",
				    optarg);
			c->tracecmd_lo = (uint16_t)n;
			c->tracecmd_hi = (uint16_t)hi;
			break;
		}
		case OPT_CONTROL:
			c->control = optarg;
			break;
		case OPT_HTTP:
			c->http = optarg;
			break;
		case OPT_GUEST:
			if (guests_allow(optarg) == -1)
				usage_error("--guest: HOST:GUEST, two "
				    "identities (up to %d pairs), not '%s'",
				    TD_MAX_GUEST_ALLOW, optarg);
			break;
		case OPT_ON_FINISH:
			if (*optarg == '\0')
				usage_error("--on-finish needs a command");
			tdlisten_of.cmd = optarg;
			break;
		case OPT_ON_FINISH_JOBS:
		case OPT_ON_FINISH_ATTEMPTS:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > (ch ==
			    OPT_ON_FINISH_JOBS ? TD_ONFINISH_MAX_JOBS : 1000))
				usage_error("invalid count '%s' (1 to %d)",
				    optarg, ch == OPT_ON_FINISH_JOBS ?
				    TD_ONFINISH_MAX_JOBS : 1000);
			if (ch == OPT_ON_FINISH_JOBS)
				tdlisten_of.jobs = (int)n;
			else
				tdlisten_of.attempts = (int)n;
			break;
		case OPT_ON_FINISH_TIMEOUT:
		case OPT_ON_FINISH_RETRY:
			n = strtol(optarg, &end, 10);
			if (*end != '\0' || n < 1 || n > 86400 * 7)
				usage_error("invalid number of seconds '%s'",
				    optarg);
			if (ch == OPT_ON_FINISH_TIMEOUT)
				tdlisten_of.timeout = (int)n;
			else
				tdlisten_of.retry = (int)n;
			break;
		case OPT_NO_HEADER_CACHE:
			c->no_hcache = true;
			break;
		case OPT_NO_UDP_PROBES:
			c->no_udp_probes = true;
			break;
		case OPT_ROTATE:
			if (rotate_parse(optarg, &c->rotate_bytes,
			    &c->rotate_secs, msg, sizeof msg) == -1)
				usage_error("%s", msg);
			break;
		case OPT_KEEP:
			if (rotate_parse_keep(optarg, &c->keep_n,
			    &c->keep_bytes, msg, sizeof msg) == -1)
				usage_error("%s", msg);
			break;
		case OPT_QUOTA:
			if (td_parse_size(optarg, &c->quota) == -1)
				usage_error("invalid size '%s' (e.g. 500M, 20G)",
				    optarg);
			break;
		case OPT_FILE_VERSION:
			if (strcmp(optarg, "6") == 0)
				c->file_version = 6;
			else if (strcmp(optarg, "7") == 0)
				c->file_version = 7;
			else
				usage_error("invalid file version '%s' (6 or 7)",
				    optarg);
			break;
		case OPT_COMPRESSION:
			if (td_codec_parse(optarg, &c->codec) == -1)
				usage_error("unknown compression '%s' (zstd, "
				    "zlib or none)", optarg);
			codec_set = true;
			break;
		case OPT_HELP:
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("tdlisten (tracedock) %s\n", PACKAGE_VERSION);
			exit(0);
		default:
			fprintf(stderr, "Try 'tdlisten --help'.\n");
			exit(2);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (c->uftrace_bind != NULL && c->uftrace_port == NULL)
		usage_error("--uftrace-bind needs --uftrace-port");
	if (tdlisten_of.cmd == NULL && (tdlisten_of.jobs != 2 ||
	    tdlisten_of.timeout != 600 || tdlisten_of.retry != 10 ||
	    tdlisten_of.attempts != 8))
		usage_error("the --on-finish-* options need --on-finish");
	if ((c->keep_n > 0 || c->keep_bytes > 0) && c->rotate_bytes == 0 &&
	    c->rotate_secs == 0)
		usage_error("--keep needs --rotate");
	if (c->port == NULL)
		c->port = "4000";
	if (c->tracecmd_bind == NULL)
		c->tracecmd_bind = "127.0.0.1";
	if (c->tracecmd_lo == 0) {
		/* trace-cmd listen's own range (START/MAX_PORT_SEARCH) */
		c->tracecmd_lo = 1500;
		c->tracecmd_hi = 6000;
	}
	if (c->file_version == 6) {
		if (codec_set && c->codec != TD_CODEC_NONE)
			usage_error("version 6 files cannot be compressed");
		c->codec = TD_CODEC_NONE;
	}
	if (!c->insecure && (c->cert == NULL || c->key == NULL ||
	    c->ca == NULL))
		usage_error("TLS needs --cert, --key and --ca (tdcert init and "
		    "tdcert issue make them), or --insecure on both sides");
	if (c->insecure && (c->cert || c->key || c->ca))
		usage_error("--insecure and certificates do not go together");
	c->gid = (gid_t)-1;
	c->dir_mode = 0700;
	c->file_mode = 0600;
	if (c->group != NULL) {
		struct group *gr = getgrnam(c->group);

		n = strtol(c->group, &end, 10);
		if (gr != NULL)
			c->gid = gr->gr_gid;
		else if (*end == '\0' && n >= 0 && end != c->group)
			c->gid = (gid_t)n;
		else
			usage_error("unknown group '%s'", c->group);
		/* set-group-ID: what is made inside gets the group */
		c->dir_mode = 02750;
		c->file_mode = 0640;
	}
	tdlisten_of.file_mode = c->file_mode;
}

static void
tdlisten_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct event_base *base = arg;

	if (sig == SIGHUP) {
		char msg[1200];

		reload_run(tdlisten_cfg, "SIGHUP", msg, sizeof msg);
		return;
	}
	notify_send("STOPPING=1");
	log_info("signal %d: shutting down (%d sessions open, %d trace-cmd "
	    "clients)", (int)sig, agentconn_sessions(), tracecmd_clients());
	/* no command starts now: files done from here on wait on disk */
	if (tdlisten_cfg->onfinish != NULL)
		onfinish_stop(tdlisten_cfg->onfinish);
	server_shutdown();
	uftrace_shutdown();
	event_del(tdlisten_tick_ev);
	tracecmd_shutdown();
	agentconn_shutdown_all();
	recording_leave_all();
	{
		/* a second for the agents' ERRORs to go out */
		struct timeval tv = { 1, 0 };

		event_base_loopexit(base,
		    agentconn_sessions() > 0 ? &tv : NULL);
	}
}

/*
 * Every TDLISTEN_TICK_MS: every streaming session checkpoints and
 * acknowledges what arrived since its last, and recordings whose agent did
 * not come back within --resume-wait are ended.
 */
static void
tdlisten_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	agentconn_tick();
	recording_expire();
	memtrim_tick();
}

/*
 * Every session holds a socket, its .part file, the .part's lock and one
 * spool per CPU of its agent: a thousand 2-CPU agents need 5000
 * descriptors, and the soft limit is often 1024.  Take the hard limit
 * and say when even that is short of --max-sessions (accepting then
 * pauses when it runs out).
 */
static void
tdlisten_raise_nofile(const struct listener_config *c)
{
	struct budget_caps caps = { TD_SESSION_MEM, TD_IDENTITY_MEM,
	    TD_LISTENER_MEM, 1024, TD_FD_RESERVE, 0 };
	struct rlimit rl;
	rlim_t want = (rlim_t)c->max_sessions * 5 + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	caps.fds = rl.rlim_cur > INT_MAX ? INT_MAX : (int)rl.rlim_cur;
	/* no identity reserves more than a quarter of what recordings get */
	caps.identity_fds = (caps.fds - caps.fd_reserve) / TD_FD_SHARE;
	budget_init(&caps);
	if (rl.rlim_cur < want)
		log_warnx("open files limit %llu: %d sessions of 2-CPU agents "
		    "need about %llu (ulimit -n, LimitNOFILE=)",
		    (unsigned long long)rl.rlim_cur, c->max_sessions,
		    (unsigned long long)want);
	else
		log_debug("open files limit %llu", (unsigned long long)
		    rl.rlim_cur);
}

/*
 * -u USER, checked before anything is bound or made: a wrong user fails
 * at once, and says so even when the port is taken.
 */
static void
tdlisten_check_user(const struct listener_config *c)
{
	if (c->user == NULL)
		return;
	if (geteuid() != 0)
		fatalx("-u needs tdlisten to start as root");
	if (getpwnam(c->user) == NULL)
		fatalx("unknown user '%s'", c->user);
}

/*
 * tdlisten needs no privilege once its port is bound and its key read: as
 * root it becomes USER (-u), and says so loudly when it stays root.
 */
/* tdctl reload: as SIGHUP. */
static int
tdlisten_reload_cb(char *msg, size_t len)
{
	return reload_run(tdlisten_cfg, "tdctl reload", msg, len);
}

/* A file in place: a standby agent's FINISHED names it; on-finish runs. */
static void
tdlisten_done_cb(const struct output_done *d, void *arg)
{
	standbytab_file(d->identity, d->name, d->path, d->complete);
	if (arg != NULL)
		onfinish_done_cb(d, arg);
}

static void
tdlisten_drop_privileges(struct listener_config *c)
{
	struct passwd *pw;
	gid_t groups[2];

	if (geteuid() != 0)
		return;
	if (c->user == NULL) {
		log_warnx("running as root: -u USER drops privileges after "
		    "binding");
		return;
	}
	if ((pw = getpwnam(c->user)) == NULL)
		fatalx("unknown user '%s'", c->user);
	groups[0] = pw->pw_gid;
	groups[1] = c->gid;
	/* in the --group, to give it what it makes */
	if (setgroups(c->gid != (gid_t)-1 ? 2 : 1, groups) == -1 ||
	    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) == -1 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) == -1)
		fatal("cannot become user '%s'", c->user);
	if (access(c->dir, W_OK | X_OK) == -1)
		fatalx("user '%s' cannot write to '%s' (chown it)", c->user,
		    c->dir);
	log_info("running as user '%s'", c->user);
}

/* Whether this process may give files to gid. */
static bool
tdlisten_in_group(gid_t gid)
{
	gid_t g[NGROUPS_MAX];
	int i, n;

	if (geteuid() == 0 || getegid() == gid)
		return true;
	n = getgroups(NGROUPS_MAX, g);
	for (i = 0; i < n; i++)
		if (g[i] == gid)
			return true;
	return false;
}

/*
 * The output directory: made with the private mode (or the --group's) when
 * it is not there; one that is there keeps its own mode (it may be a
 * shared directory such as the default "."), with a warning when other
 * users may enter it: the identities' directories below are private anyway.
 */
static void
tdlisten_output_dir(struct listener_config *c)
{
	struct stat st;

	if (c->group != NULL && !tdlisten_in_group(c->gid))
		fatalx("--group '%s': tdlisten is not in that group",
		    c->group);
	if (stat(c->dir, &st) == -1) {
		if (mkdir(c->dir, c->dir_mode) == -1)
			fatal("cannot create output directory '%s'", c->dir);
		if (c->gid != (gid_t)-1 && (chown(c->dir, (uid_t)-1,
		    c->gid) == -1 || chmod(c->dir, c->dir_mode) == -1))
			fatal("cannot give '%s' to group '%s'", c->dir,
			    c->group);
	} else if (!S_ISDIR(st.st_mode))
		fatalx("output directory '%s' is not a directory", c->dir);
	else if (st.st_mode & S_IRWXO)
		log_warnx("output directory '%s' is open to other users "
		    "(mode %04o); the recordings below it are not",
		    c->dir, (unsigned)(st.st_mode & 07777));
	else if (c->gid != (gid_t)-1 && (st.st_gid != c->gid ||
	    !(st.st_mode & S_IXGRP)))
		log_warnx("output directory '%s': group '%s' cannot enter it "
		    "(chgrp %s, chmod g+rx)", c->dir, c->group, c->group);
	if (access(c->dir, W_OK | X_OK) == -1)
		fatal("cannot write to output directory '%s'", c->dir);
}

int
main(int argc, char **argv)
{
	struct listener_config cfg;
	struct event_base *base;
	struct event *sigs[3];
	SSL_CTX *ctx = NULL;
	char err[1024];
	int i, signos[3] = { SIGINT, SIGTERM, SIGHUP };

	tdlisten_parse(argc, argv, &cfg);
	/* what tdlisten makes, the log included, is private or the group's */
	umask(cfg.group != NULL ? 027 : 077);
	signal(SIGPIPE, SIG_IGN);
	/* syslog once detached (-D): a start-up error goes to stderr,
	   where whoever started it sees it (there may be no /dev/log) */
	log_init("tdlisten", cfg.verbosity, 0);
	crash_install("tdlisten");
	if (cfg.logfile != NULL) {
		if (freopen(cfg.logfile, "a", stderr) == NULL)
			fatal("cannot open log file '%s'", cfg.logfile);
		setvbuf(stderr, NULL, _IOLBF, 0);
		log_set_timestamps(1);
	}
	tdlisten_check_user(&cfg);
	tdlisten_output_dir(&cfg);
	if (!cfg.insecure) {
		ctx = td_tls_server_ctx(cfg.cert, cfg.key, cfg.ca, cfg.crl,
		    err, sizeof err);
		if (ctx == NULL)
			fatalx("%s", err);
	} else
		log_warnx("--insecure: agents are neither encrypted nor "
		    "authenticated");
	tdlisten_raise_nofile(&cfg);
	/* one compression context for all sessions: the loop is one thread */
	if (cfg.codec != TD_CODEC_NONE)
		cfg.codec_ctx = td_codec_new(cfg.codec, 0);
	if (cfg.codec == TD_CODEC_ZLIB &&
	    td_tclocal_zlib_warning(err, sizeof err) == 1)
		log_warnx("%s", err);
	if ((base = event_base_new()) == NULL)
		fatalx("cannot create the event loop");
	log_info("tracedock %s, libevent %s (%s), %s", PACKAGE_VERSION,
	    event_get_version(), event_base_get_method(base),
	    td_tls_version());
	/* before the first "listening" line: a supervisor may stop it then */
	for (i = 0; i < 3; i++) {
		sigs[i] = evsignal_new(base, signos[i], tdlisten_signal_cb,
		    base);
		evsignal_add(sigs[i], NULL);
	}
	client_init(base, &cfg);
	recording_set_base(base);
	recording_set_policy(&rotate_policy);
	agentconn_init(base, &cfg, ctx);
	if (cfg.http != NULL && httpd_start(base, &cfg, ctx != NULL, err,
	    sizeof err) == -1)
		fatalx("--http: %s", err);
	if (server_start(base, &cfg, ctx != NULL, agentconn_accept, NULL) == -1)
		fatalx("cannot listen on port %s%s%s%s", cfg.port,
		    cfg.unix_path ? " and " : "", cfg.unix_path ?
		    cfg.unix_path : "", cfg.vsock_port ? " and vsock" : "");
	if (cfg.uftrace_port != NULL && uftrace_start(base, &cfg,
	    cfg.uftrace_port, cfg.uftrace_bind) == -1)
		fatalx("cannot listen for uftrace on port %s",
		    cfg.uftrace_port);
	if (cfg.tracecmd_port != NULL && tracecmd_start(base, &cfg) == -1)
		fatalx("cannot listen for trace-cmd clients");
	if (cfg.control != NULL) {
		uid_t uid = (uid_t)-1;
		gid_t gid = cfg.gid;
		struct passwd *pw;

		/* the -u user's, and its group's or the --group's */
		if (cfg.user != NULL && geteuid() == 0 &&
		    (pw = getpwnam(cfg.user)) != NULL) {
			uid = pw->pw_uid;
			if (gid == (gid_t)-1)
				gid = pw->pw_gid;
		}
		if (control_start(base, cfg.control, uid, gid, err,
		    sizeof err) == -1)
			fatalx("--control: %s", err);
		control_set_reload(tdlisten_reload_cb);
	}
	tdlisten_cfg = &cfg;
	tdlisten_drop_privileges(&cfg);
	if (cfg.daemonize && daemon(1, cfg.logfile != NULL) == -1)
		fatal("cannot daemonize");
	if (cfg.daemonize && cfg.logfile == NULL)
		log_init("tdlisten", cfg.verbosity, 1);
	/* after -u and daemon(): the commands are this process's children */
	if (tdlisten_of.cmd != NULL) {
		cfg.onfinish = onfinish_new(base, &tdlisten_of, err,
		    sizeof err);
		if (cfg.onfinish == NULL)
			fatalx("--on-finish: %s", err);
		uftrace_set_done(onfinish_done_cb, cfg.onfinish);
		log_info("on-finish: %d at once, timeout %d s, %d attempts, "
		    "the first again after %d s", tdlisten_of.jobs,
		    tdlisten_of.timeout, tdlisten_of.attempts,
		    tdlisten_of.retry);
		onfinish_recover(cfg.onfinish, cfg.dir);
	}
	recording_set_done(tdlisten_done_cb, cfg.onfinish);
	finished_load(cfg.dir);
	history_start(cfg.dir);
	if (!cfg.no_hcache)
		cfg.hcache = hcache_new(cfg.dir);
	recording_recover_all(&cfg);
	{
		struct timeval tv = { 0, TDLISTEN_TICK_MS * 1000 };

		tdlisten_tick_ev = event_new(base, -1, EV_PERSIST,
		    tdlisten_tick_cb, NULL);
		event_add(tdlisten_tick_ev, &tv);
	}
	/* systemd (Type=notify): up, listening, recordings recovered */
	notify_send("READY=1\nSTATUS=listening");
	event_base_dispatch(base);
	tracecmd_shutdown();
	control_free();
	httpd_free();
	agentconn_free_all();
	uftrace_shutdown();
	recording_leave_all();
	onfinish_free(cfg.onfinish);
	cfg.onfinish = NULL;
	event_free(tdlisten_tick_ev);
	admit_free();
	finished_free();
	history_free();
	if (cfg.hcache != NULL) {
		uint64_t st[4];

		hcache_stats(cfg.hcache, st);
		log_info("header cache: %" PRIu64 " sections offered were "
		    "there, %" PRIu64 " not, %" PRIu64 " kept, %" PRIu64
		    " damaged", st[0], st[1], st[2], st[3]);
	}
	hcache_free(cfg.hcache);
	for (i = 0; i < 3; i++)
		event_free(sigs[i]);
	event_base_free(base);
	agentconn_set_ctx(NULL);
	td_codec_free(cfg.codec_ctx);
	log_info("stopped");
	return 0;
}
