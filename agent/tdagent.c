/*
 * tdagent.c: command line of tdagent, the recording side of tracedock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tracefs.h>

#include "agent.h"
#include "collectors.h"
#include "instance.h"
#include "crash.h"
#include "log.h"
#include "plan9.h"
#include "priv.h"
#include "record.h"
#include "standby.h"
#include "size.h"
#include "tclocal.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "banned.h"

/* Events recorded when no -e is given: who runs where, and interrupts. */
static const char *const tdagent_default_events[] = {
	"sched:sched_switch", "sched:sched_wakeup", "sched:sched_process_exec",
	"sched:sched_process_exit", "irq",
};
/* ... and with --guest, where the host has them: its vCPUs' way in and
   out of the guest (KernelShark's KVM plots draw them) */
static const char *const tdagent_guest_events[] = {
	"kvm:kvm_entry", "kvm:kvm_exit",
};

enum {
	OPT_FILE_VERSION = 1000,
	OPT_COMPRESSION,
	OPT_HELP,
	OPT_VERSION,
	OPT_CERT,
	OPT_KEY,
	OPT_CA,
	OPT_NAME,
	OPT_INSECURE,
	OPT_SPOOL,
	OPT_SPOOL_MAX,
	OPT_RECONNECT_WAIT,
	OPT_WIRE_COMPRESSION,
	OPT_SERVER_NAME,
	OPT_GUEST,
	OPT_IMPORT_PLAN9,
	OPT_SYMBOLS,
	OPT_CYCLES,
	OPT_KTZERO,
	OPT_READY_FD,
	OPT_FLIGHT,
	OPT_FLIGHT_SYNC,
};

static void
usage(FILE *fp)
{
	fprintf(fp,
"usage: tdagent -o FILE [-e SYSTEM[:EVENT]]... [-f FILTER] [-F] [-b KB] [-C CLOCK]\n"
"               [-s SECONDS] [-u USER] [--file-version 6|7]\n"
"               [--compression zstd|zlib|none] [-q | -v] [-- COMMAND [ARGS...]]\n"
"       tdagent -h HOST [-p PORT] [--cert FILE --key FILE --ca FILE | --insecure]\n"
"               [--server-name NAME] [--name NAME] [--spool DIR] [--spool-max SIZE] [--reconnect-wait S]\n"
"               [--wire-compression zstd|zlib|none]\n"
"               [--guest NAME:PID | --guest NAME:qmp:SOCKET]...\n"
"               [-o FILE] [recording options] [-- COMMAND...]\n"
"       tdagent --import-plan9 FILE|- [-o FILE] [-h HOST [network options]]\n"
"               [--cycles-per-sec HZ] [--symbols FILE] [--ktzero ADDR]\n"
"               [--file-version 6|7] [--compression C] [-q | -v]\n"
"       tdagent --standby [-h HOST [network options]] [--allow-events LIST]\n"
"               [--max-buffer KB] [--max-duration S] [-c FILE]\n"
"               (recordings started from the collector: tdagent --standby --help)\n"
"       tdagent check-events [-N] [-v] [-t TRACING_DIR]\n"
"       tdagent --help | --version\n"
"\n"
"Record kernel trace events into a trace.dat file through a private ftrace\n"
"instance.  Recording stops when COMMAND exits, after -s SECONDS, or on\n"
"SIGINT, SIGTERM or SIGHUP.\n"
"\n"
"  -o FILE            output trace.dat file\n"
"  -h HOST            stream to tdlisten on HOST (with -o too: both); also\n"
"                     vsock:CID (a VM's host) or serial:PATH (a character\n"
"                     device, e.g. a virtio-serial port); HOST:PORT,\n"
"                     [V6]:PORT, vsock:CID:PORT name a port of their own\n"
"  -h A,B,C           several collectors (at most 8): the first connection\n"
"                     tries them in order, the one that takes the recording\n"
"                     keeps it (every resume goes back to it)\n"
"  -p PORT            tdlisten's port (default 4000; not for serial:)\n"
"  --cert FILE        this agent's certificate (tdcert issue DIR NAME)\n"
"  --key FILE         its private key\n"
"  --ca FILE          the CA that signed the listener's certificate\n"
"  --server-name NAME the name the listener's certificate must have (default:\n"
"                     HOST; required over vsock: and serial:)\n"
"  --name NAME        a suffix for the listener's file name\n"
"  --insecure         plain TCP, no authentication (the listener needs it too)\n"
"  --spool DIR        where data the listener has not acknowledged waits when\n"
"                     4 MiB of memory are not enough (default: /var/tmp)\n"
"  --spool-max SIZE   at most SIZE there (K, M, G suffixes; default 1G; 0: use\n"
"                     memory only); beyond it the ring buffer counts losses\n"
"  --reconnect-wait S after the recording, keep trying to deliver it for S\n"
"                     seconds (default 300); during it, tdagent never gives up\n"
"  --guest NAME:PID   this machine runs the virtual machine NAME (its\n"
"                     certificate's name) in QEMU process PID, started with\n"
"                     -name NAME,debug-threads=on: tell the listener its vCPU\n"
"                     threads, so that it pairs this recording with NAME's\n"
"                     (repeatable); NAME:qmp:SOCKET asks QEMU's monitor instead\n"
"  --wire-compression C  compress pages for a slow link: zstd, zlib or none\n"
"                     (default); the listener stores them as they come when\n"
"                     its files use the same codec\n"
"  -e SYSTEM[:EVENT]  enable an event, a whole system, or \"all\" (repeatable;\n"
"                     default: sched_switch, sched_wakeup, sched_process_exec,\n"
"                     sched_process_exit and irq); a bare EVENT of any system\n"
"                     and globs work too (-e sched_switch -e 'sched:sched_w*')\n"
"  -v -e EVENT        as in trace-cmd: leave EVENT, and the events of every -e\n"
"                     after it, out of what the other -e (or the default)\n"
"                     enable\n"
"  -f FILTER          filter for the -e just before it (kernel filter syntax)\n"
"  -F                 record only COMMAND and the tasks it starts\n"
"  -b KB              ring-buffer size per CPU in KiB (default: 8192, at most\n"
"                     65536 for all CPUs and 1/128 of the memory)\n"
"  -C CLOCK           trace clock: local, global, mono, mono_raw, boot, x86-tsc...\n"
"  -s SECONDS         stop after SECONDS\n"
"  --ready-fd FD      set up and connected, write R to FD and start tracing\n"
"                     when G comes back (how --standby starts its recordings\n"
"                     together)\n"
"  --flight INSTANCE  no tracing of its own: stream what the frozen ftrace\n"
"                     instance INSTANCE holds and end (how --standby sends\n"
"                     an armed ring's snapshot)\n"
"  --flight-sync FD   with --flight: the time-sync samples the armed agent\n"
"                     took over the window, read from FD, sent before the\n"
"                     recording's own\n"
"  -u USER            record as USER (default nobody): only a small parent\n"
"                     keeps root, for the ftrace instance and the command;\n"
"                     -u root: one process, all of it as root; USER may\n"
"                     be UID or UID:GID (no user database needed)\n"
"  --file-version N   7 (default) or 6\n"
"  --compression C    zstd (default for v7), zlib or none; v6 is never compressed\n"
"                     (zlib files: Debian 12's trace-cmd, libtracecmd and\n"
"                     KernelShark, built without zlib, cannot open them)\n"
"  --import-plan9 F   no recording: make the Plan 9 kernel trace in F (what\n"
"                     /dev/trace gave; - for standard input) a trace.dat,\n"
"                     written (-o) or streamed (-h); needs no root\n"
"  --cycles-per-sec HZ  Plan 9's cycle counter runs at HZ (K, M, G suffixes):\n"
"                     the file converts it to seconds (TSC2NSEC)\n"
"  --symbols FILE     Plan 9's nm -n of the kernel: function names for pcs\n"
"  --ktzero ADDR      the kernel's KTZERO (hex): a pc below it is an offset\n"
"  -q                 print nothing but errors\n"
"  -v                 say more (unless right before -e: see above)\n"
"  --help             show this help\n"
"  --version          show the version\n");
}

static const struct option tdagent_longopts[] = {
	{ "file-version", required_argument, NULL, OPT_FILE_VERSION },
	{ "compression", required_argument, NULL, OPT_COMPRESSION },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "cert", required_argument, NULL, OPT_CERT },
	{ "key", required_argument, NULL, OPT_KEY },
	{ "ca", required_argument, NULL, OPT_CA },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
	{ "spool", required_argument, NULL, OPT_SPOOL },
	{ "spool-max", required_argument, NULL, OPT_SPOOL_MAX },
	{ "reconnect-wait", required_argument, NULL, OPT_RECONNECT_WAIT },
	{ "wire-compression", required_argument, NULL, OPT_WIRE_COMPRESSION },
	{ "server-name", required_argument, NULL, OPT_SERVER_NAME },
	{ "guest", required_argument, NULL, OPT_GUEST },
	{ "import-plan9", required_argument, NULL, OPT_IMPORT_PLAN9 },
	{ "symbols", required_argument, NULL, OPT_SYMBOLS },
	{ "cycles-per-sec", required_argument, NULL, OPT_CYCLES },
	{ "ktzero", required_argument, NULL, OPT_KTZERO },
	{ "ready-fd", required_argument, NULL, OPT_READY_FD },
	{ "flight", required_argument, NULL, OPT_FLIGHT },
	{ "flight-sync", required_argument, NULL, OPT_FLIGHT_SYNC },
	{ NULL, 0, NULL, 0 },
};

static int
tdagent_number(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) ||
	    v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/*
 * A frequency in Hz: an integer, or a number with a K, M or G suffix
 * (powers of ten: 2.4G), from 1 Hz to 10^15.
 */
static int
tdagent_hz(const char *s, uint64_t *out)
{
	static const struct { char c; double m; } sfx[] = {
		{ 'k', 1e3 }, { 'K', 1e3 }, { 'M', 1e6 }, { 'G', 1e9 },
	};
	char *end;
	double v, m = 1;
	size_t i;

	if (s[0] >= '0' && s[0] <= '9' && s[strspn(s, "0123456789")] ==
	    '\0') {
		errno = 0;
		*out = strtoull(s, &end, 10);
		return errno != 0 || *out < 1 || *out > 1000000000000000ULL ?
		    -1 : 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || (s[0] < '0' || s[0] > '9'))
		return -1;
	if (*end != '\0') {
		for (i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
			if (*end == sfx[i].c)
				m = sfx[i].m;
		if (m == 1 || end[1] != '\0')
			return -1;
	}
	v = v * m + 0.5;
	if (!isfinite(v) || v < 1 || v > 1e15)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static void __attribute__((noreturn, format(printf, 1, 2)))
tdagent_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tdagent: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'tdagent --help'.\n");
	exit(2);
}

static void
tdagent_parse(int argc, char **argv, struct agent_opts *o)
{
	bool codec_set = false, port_set = false, net_opt = false;
	bool rec_opt = false, exclude = false, v_before_e = false;
	int prev = 0, verbosity_before_v = 0;
	char *end;
	double v;
	int ch;

	memset(o, 0, sizeof *o);
	o->file_version = 7;
	o->codec = TD_CODEC_ZSTD;
	o->port = "4000";
	o->spool_dir = "/var/tmp";
	o->spool_max = 1024ULL * 1024 * 1024;
	o->reconnect_wait = 300;
	o->user = "nobody";
	o->ready_fd = -1;
	while ((ch = getopt_long(argc, argv, "+o:h:p:e:f:Fb:C:s:u:qv",
	    tdagent_longopts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			o->output = optarg;
			break;
		case 'h':
			o->host = optarg;
			break;
		case 'p':
			if (tdagent_number(optarg, 1, 65535, &v) == -1 ||
			    v != (int)v)
				tdagent_usage_error("invalid port '%s'", optarg);
			o->port = optarg;
			port_set = true;
			break;
		case OPT_CERT:
			o->cert = optarg;
			break;
		case OPT_KEY:
			o->key = optarg;
			break;
		case OPT_CA:
			o->ca = optarg;
			break;
		case OPT_SERVER_NAME:
			o->server_name = optarg;
			break;
		case OPT_INSECURE:
			o->insecure = true;
			break;
		case OPT_SPOOL:
			o->spool_dir = optarg;
			o->spool_given = true;
			net_opt = true;
			break;
		case OPT_SPOOL_MAX:
			if (td_parse_size(optarg, &o->spool_max) == -1)
				tdagent_usage_error("invalid size '%s' (e.g. "
				    "512M, 2G, 0)", optarg);
			net_opt = true;
			break;
		case OPT_RECONNECT_WAIT:
			if (tdagent_number(optarg, 0, 86400 * 7, &v) == -1)
				tdagent_usage_error("invalid number of seconds "
				    "'%s'", optarg);
			o->reconnect_wait = (int)v;
			net_opt = true;
			break;
		case OPT_WIRE_COMPRESSION:
			if (strcmp(optarg, "zstd") == 0)
				o->wire = TD_WIRE_ZSTD;
			else if (strcmp(optarg, "zlib") == 0)
				o->wire = TD_WIRE_ZLIB;
			else if (strcmp(optarg, "none") == 0)
				o->wire = 0;
			else
				tdagent_usage_error("unknown wire compression "
				    "'%s' (zstd, zlib or none)", optarg);
			net_opt = true;
			break;
		case OPT_GUEST: {
			char err[256];

			if (o->nguests == TD_MAX_GUESTS)
				tdagent_usage_error("too many --guest (at most "
				    "%d)", TD_MAX_GUESTS);
			if (guest_spec_parse(optarg, &o->guests[o->nguests],
			    err, sizeof err) == -1)
				tdagent_usage_error("--guest %s: %s", optarg,
				    err);
			o->nguests++;
			net_opt = true;
			break;
		}
		case OPT_NAME:
			if (strlen(optarg) > TD_MAX_NAME_LEN ||
			    optarg[strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")] != '\0')
				tdagent_usage_error("invalid name '%s' (up to "
				    "%d of A-Z a-z 0-9 . _ -)", optarg,
				    TD_MAX_NAME_LEN);
			o->name = optarg;
			break;
		case 'e':
			rec_opt = true;
			if (o->nevents == TD_MAX_EVENT_ARGS)
				tdagent_usage_error("too many -e (at most "
				    "%d)", TD_MAX_EVENT_ARGS);
			/*
			 * trace-cmd's -v -e EVENT: EVENT and every -e after
			 * it are left out; that -v does not say more
			 */
			if (prev == 'v' && !exclude) {
				exclude = true;
				o->verbosity = verbosity_before_v;
			}
			if (o->verbosity == 1 && !exclude)
				v_before_e = true;
			o->events[o->nevents].exclude = exclude;
			o->events[o->nevents++].spec = optarg;
			break;
		case 'f':
			rec_opt = true;
			if (o->nevents == 0)
				tdagent_usage_error("-f '%s' needs an -e "
				    "before it", optarg);
			if (o->events[o->nevents - 1].exclude)
				tdagent_usage_error("-f '%s' after -v -e '%s': "
				    "a filter for events left out", optarg,
				    o->events[o->nevents - 1].spec);
			if (strlen(optarg) > TD_MAX_FILTER_LEN)
				tdagent_usage_error("filter too long: '%.40s'",
				    optarg);
			o->events[o->nevents - 1].filter = optarg;
			break;
		case 'F':
			rec_opt = true;
			o->follow = true;
			break;
		case 'b':
			rec_opt = true;
			if (tdagent_number(optarg, 1, 16 * 1024 * 1024,
			    &v) == -1)
				tdagent_usage_error("invalid buffer size '%s' "
				    "(KiB, 1 to 16777216)", optarg);
			o->buffer_kb = (int)v;
			break;
		case 'C':
			rec_opt = true;
			o->clock = optarg;
			break;
		case 's':
			rec_opt = true;
			if (tdagent_number(optarg, 0.001, 1e9, &v) == -1)
				tdagent_usage_error("invalid duration '%s' "
				    "(seconds)", optarg);
			o->seconds = v;
			break;
		case 'u':
			rec_opt = true;
			o->user = optarg;
			break;
		case 'q':
			o->verbosity = -1;
			break;
		case 'v':
			verbosity_before_v = o->verbosity;
			o->verbosity = 1;
			break;
		case OPT_FILE_VERSION:
			if (strcmp(optarg, "6") == 0)
				o->file_version = 6;
			else if (strcmp(optarg, "7") == 0)
				o->file_version = 7;
			else
				tdagent_usage_error("invalid file version '%s' "
				    "(6 or 7)", optarg);
			break;
		case OPT_COMPRESSION:
			if (td_codec_parse(optarg, &o->codec) == -1)
				tdagent_usage_error("unknown compression '%s' "
				    "(zstd, zlib or none)", optarg);
			codec_set = true;
			break;
		case OPT_IMPORT_PLAN9:
			o->import_plan9 = optarg;
			break;
		case OPT_SYMBOLS:
			o->symbols = optarg;
			break;
		case OPT_CYCLES:
			if (tdagent_hz(optarg, &o->cycles_per_sec) == -1)
				tdagent_usage_error("invalid frequency '%s' "
				    "(Hz: 2400000000, 2.4G, 1M...)", optarg);
			break;
		case OPT_KTZERO:
			errno = 0;
			o->ktzero = strtoull(optarg, &end, 16);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    o->ktzero == 0)
				tdagent_usage_error("invalid address '%s' "
				    "(hex, e.g. ffffffff80110000)", optarg);
			break;
		case OPT_READY_FD:
			errno = 0;
			v = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    v < 3 || v > 1024 || v != (int)v ||
			    fcntl((int)v, F_GETFD) == -1)
				tdagent_usage_error("--ready-fd '%s': not an "
				    "open descriptor", optarg);
			o->ready_fd = (int)v;
			fcntl(o->ready_fd, F_SETFD, FD_CLOEXEC);
			break;
		case OPT_FLIGHT:
			o->flight = optarg;
			break;
		case OPT_FLIGHT_SYNC:
			errno = 0;
			v = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    v < 3 || v > 1024 || v != (int)v ||
			    fcntl((int)v, F_GETFD) == -1)
				tdagent_usage_error("--flight-sync '%s': not an "
				    "open descriptor", optarg);
			tsyncsched_armed_read(o, (int)v);
			break;
		case OPT_HELP:
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("tdagent (tracedock) %s\n", PACKAGE_VERSION);
			exit(0);
		default:
			fprintf(stderr, "Try 'tdagent --help'.\n");
			exit(2);
		}
		prev = ch;
	}
	if (v_before_e)
		fprintf(stderr, "tdagent: -v says more: the -e after it are "
		    "recorded (to leave events out as trace-cmd does, put -v "
		    "right before their -e)\n");
	if (optind < argc) {
		if (strcmp(argv[optind - 1], "--") != 0)
			tdagent_usage_error("unexpected argument '%s' (put a "
			    "command after --)", argv[optind]);
		o->argv = argv + optind;
	}
	if (o->import_plan9 != NULL && (rec_opt || o->argv != NULL))
		tdagent_usage_error("--import-plan9 records nothing: -e, -f, "
		    "-F, -b, -C, -s, -u and a command do not go with it");
	if (o->import_plan9 == NULL && (o->symbols != NULL ||
	    o->cycles_per_sec != 0 || o->ktzero != 0))
		tdagent_usage_error("--symbols, --cycles-per-sec and --ktzero "
		    "go with --import-plan9");
	if (o->narmed_samples > 0 && o->flight == NULL)
		tdagent_usage_error("--flight-sync goes with --flight");
	if (o->flight != NULL && (o->nevents > 0 || o->buffer_kb > 0 ||
	    o->clock != NULL || o->seconds > 0 || o->argv != NULL ||
	    o->nguests > 0))
		tdagent_usage_error("--flight streams an instance as it is: "
		    "-e, -f, -F, -b, -C, -s, --guest and a command do not go "
		    "with it");
	if (o->follow && o->argv == NULL)
		tdagent_usage_error("-F needs a command (-- COMMAND)");
	if (o->output == NULL && o->host == NULL)
		tdagent_usage_error("no output: give -o FILE or -h HOST");
	if (o->host == NULL && (o->cert || o->key || o->ca || o->name ||
	    o->server_name || o->insecure || port_set || net_opt))
		tdagent_usage_error("-p, --cert, --key, --ca, --server-name, "
		    "--name, --insecure, --guest and the spool options go with "
		    "-h HOST");
	if (o->host != NULL && !o->insecure &&
	    (o->cert == NULL || o->key == NULL || o->ca == NULL))
		tdagent_usage_error("TLS needs --cert, --key and --ca (tdcert "
		    "makes them), or --insecure on both sides");
	if (o->insecure && (o->cert || o->key || o->ca || o->server_name))
		tdagent_usage_error("--insecure and certificates do not go "
		    "together");
	if (o->host != NULL) {
		struct collectors *cl;
		char err[512];

		if ((cl = collectors_parse(o->host, o->port, o->server_name,
		    !o->insecure, err, sizeof err)) == NULL)
			tdagent_usage_error("-h %s: %s", o->host, err);
		if (!collectors_ported(cl) && port_set)
			tdagent_usage_error("-p does not go with serial:");
		collectors_free(cl);
	}
	if (o->file_version == 6) {
		if (codec_set && o->codec != TD_CODEC_NONE)
			tdagent_usage_error("version 6 files cannot be "
			    "compressed (drop --compression %s)",
			    td_codec_name(o->codec));
		o->codec = TD_CODEC_NONE;
	}
}

/*
 * Without -b: the instance is tdagent's own, so its ring is sized for a
 * recording rather than left at the kernel's size for a new instance
 * (1.4 MiB per CPU, which a syscall storm fills in 25 ms): see
 * TD_AGENT_RING_KB.  A machine that cannot give the memory keeps the
 * kernel's size (said with -v).
 */
static void
tdagent_default_ring(struct instance *in)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	long long want = TD_AGENT_RING_KB, cap;
	long cur = instance_buffer_kb(in);
	char err[512];

	if (ncpus < 1)
		ncpus = 1;
	cap = TD_AGENT_RING_TOTAL_KB / ncpus;
	if (want > cap)
		want = cap;
	if (pages > 0 && psz > 0) {
		cap = (long long)pages / TD_AGENT_RING_RAM_DIV *
		    (psz / 1024) / ncpus;
		if (want > cap)
			want = cap;
	}
	if (cur <= 0 || want <= cur)
		return;
	if (instance_set_buffer_kb(in, (int)want, err, sizeof err) == -1) {
		log_debug("%s: keeping the kernel's %ld KiB", err, cur);
		/* a failed resize may leave CPUs at different sizes */
		instance_set_buffer_kb(in, (int)cur, err, sizeof err);
		return;
	}
	log_debug("ring buffer %lld KiB per CPU (the kernel's: %ld)", want,
	    cur);
}

/* Set up the instance as the options say; exit status on failure. */
static int
tdagent_configure(struct instance *in, struct agent_opts *o)
{
	char err[4096];
	int i, n;

	for (i = 0, n = 0; i < o->nevents; i++)
		n += !o->events[i].exclude;
	/* the defaults (less what -v -e leaves out), within the -e cap */
	if (n == 0 && o->nevents + (int)(sizeof tdagent_default_events /
	    sizeof *tdagent_default_events + sizeof tdagent_guest_events /
	    sizeof *tdagent_guest_events) > TD_MAX_EVENT_ARGS) {
		log_warnx("too many -e (at most %d)", TD_MAX_EVENT_ARGS);
		return 2;
	}
	if (n == 0) {
		for (i = 0; i < (int)(sizeof tdagent_default_events /
		    sizeof *tdagent_default_events); i++)
			o->events[o->nevents++].spec =
			    tdagent_default_events[i];
		for (i = 0; o->nguests > 0 && i < (int)(sizeof
		    tdagent_guest_events / sizeof *tdagent_guest_events); i++) {
			char sys[16];
			const char *ev = strchr(tdagent_guest_events[i], ':');

			snprintf(sys, sizeof sys, "%.*s",
			    (int)(ev - tdagent_guest_events[i]),
			    tdagent_guest_events[i]);
			if (tracefs_event_file_exists(instance_tracefs(in),
			    sys, ev + 1, "enable"))
				o->events[o->nevents++].spec =
				    tdagent_guest_events[i];
		}
	}
	for (i = 0; i < o->nevents; i++) {
		if (o->events[i].exclude)
			continue;
		if (instance_enable(in, o->events[i].spec, err,
		    sizeof err) == -1) {
			log_warnx("%s", err);
			return 2;
		}
		if (o->events[i].filter != NULL &&
		    instance_filter(in, o->events[i].spec,
		    o->events[i].filter, err, sizeof err) == -1) {
			log_warnx("%s", err);
			return 2;
		}
	}
	/* -v -e: left out after everything else is on, as trace-cmd does */
	for (i = 0; i < o->nevents; i++) {
		if (!o->events[i].exclude)
			continue;
		if (instance_disable(in, o->events[i].spec, err,
		    sizeof err) == -1) {
			log_warnx("%s (after -v: to leave out)", err);
			return 2;
		}
		log_info("leaving out '%s' (-v -e)", o->events[i].spec);
	}
	if (o->clock != NULL &&
	    instance_set_clock(in, o->clock, err, sizeof err) == -1) {
		log_warnx("%s", err);
		return 2;
	}
	if (o->buffer_kb > 0 &&
	    instance_set_buffer_kb(in, o->buffer_kb, err, sizeof err) == -1) {
		log_warnx("%s", err);
		return 1;
	}
	if (o->buffer_kb == 0)
		tdagent_default_ring(in);
	return 0;
}

/* tdagent: parse the command line, make the instance, record. */
int
main(int argc, char **argv)
{
	struct agent_opts o;
	struct instance *in;
	sigset_t set;
	char err[1024];
	int ret;

	if (argc > 1 && strcmp(argv[1], "check-events") == 0)
		return checkevents_main(argc - 1, argv + 1);
	for (ret = 1; ret < argc && strcmp(argv[ret], "--"); ret++)
		if (strcmp(argv[ret], "--standby") == 0) {
			signal(SIGPIPE, SIG_IGN);
			crash_install("tdagent");
			return standby_main(argc, argv);
		}

	/* no signal may leave the instance behind: take them in the loop */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);

	/* a lost listener is an error to report, not a reason to die */
	signal(SIGPIPE, SIG_IGN);
	tdagent_parse(argc, argv, &o);
	log_init("tdagent", o.verbosity, 0);
	crash_install("tdagent");
	log_debug("tracedock %s, libtracefs %s, libtraceevent %s, zstd %s, "
	    "zlib %s", PACKAGE_VERSION, TD_TRACEFS_VERSION,
	    TD_TRACEEVENT_VERSION, td_codec_version(TD_CODEC_ZSTD),
	    td_codec_version(TD_CODEC_ZLIB));
	if (o.insecure)
		log_warnx("--insecure: the recording travels unencrypted to an "
		    "unauthenticated listener");
	if (o.codec == TD_CODEC_ZLIB &&
	    td_tclocal_zlib_warning(err, sizeof err) == 1)
		log_warnx("%s", err);
	if (o.import_plan9 != NULL)
		return plan9_import(&o);
	if (geteuid() != 0)
		fatalx("recording needs root: ftrace instances and per-CPU "
		    "ring buffers are root-only");
	if (priv_user(o.user, &o.uid, &o.gid, err, sizeof err) == -1)
		fatalx("-u: %s", err);
	o.privsep = o.uid != 0;
	if (instance_check_tracefs(err, sizeof err) == -1)
		fatalx("%s", err);
	if (o.flight != NULL) {
		/* the standby agent's armed instance, frozen: borrowed */
		if ((in = instance_adopt(o.flight, err, sizeof err)) == NULL)
			fatalx("%s", err);
		ret = 0;
	} else {
		if ((in = instance_create(NULL, err, sizeof err)) == NULL)
			fatalx("%s", err);
		ret = tdagent_configure(in, &o);
	}
	log_set_fatal_hook(instance_cleanup);
	if (ret == 0)
		ret = record_run(in, &o);
	instance_destroy(in);
	free(o.armed_samples);
	return ret;
}
