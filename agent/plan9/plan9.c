/*
 * plan9.c: tdagent --import-plan9 (see plan9.h): Plan 9 trace records in,
 * a recording out.
 *
 * The import is a producer of pages without a ring buffer: records are
 * read (plan9read.c), put back in time order within a window, encoded as
 * events of an event system "plan9" (func_entry, func_exit) and packed
 * into pages of the kernel's layout (shared/pagebuild.c), which go to the
 * recording's one sink: the trace.dat writer, the network stream, or both.
 * The header sections are what a 64-bit Linux kernel would give for such
 * events; --symbols becomes the kallsyms section, the tasks seen become
 * CMDLINES ("plan9-PID").  Everything is on CPU 0: /dev/trace does not say
 * which processor an event ran on.
 *
 * Time: the events keep Plan 9's cycle counter as their time, in a trace
 * clock named "plan9-cycles".  With --cycles-per-sec HZ a TSC2NSEC option
 * holds the conversion to nanoseconds (mult and shift, as trace-cmd
 * record stores one for x86-tsc), so trace-cmd report shows seconds and
 * --raw-ts still shows the counter as Plan 9 wrote it; without it
 * trace-cmd shows the counter.
 *
 * One loop, one thread, poll(): the input, a signalfd, and with -h the
 * uplink's descriptor (uplink.h: the connection, or the reconnection
 * thread's eventfd).  No ring can overflow here, so the import gives the
 * uplink no pause: when the stream's memory and spool are full the input
 * waits for the listener instead of the network being given up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "buf.h"
#include "log.h"
#include "meta.h"
#include "pagebuild.h"
#include "plan9.h"
#include "plan9read.h"
#include "tdfile.h"
#include "tdlimits.h"
#include "tdproto.h"
#include "uplink.h"
#include "xmalloc.h"
#include "banned.h"

/* The pages of a 64-bit kernel: 4 KiB, an 8-byte commit field. */
#define PLAN9_PAGE_SIZE		4096
#define PLAN9_COMMIT_SIZE	8
#define PLAN9_LONG_SIZE		8
#define PLAN9_CLOCK		"plan9-cycles"
/* Event ids of plan9:func_entry and plan9:func_exit. */
#define PLAN9_ID_ENTRY		1000
#define PLAN9_ID_EXIT		1001
/* Bytes of the two events: the common fields, then their own. */
#define PLAN9_ENTRY_LEN		56
#define PLAN9_EXIT_LEN		32
/* Skipped records shown one by one; the rest are counted. */
#define PLAN9_WARN_MAX		10
/* Input read at once. */
#define PLAN9_READ_SIZE		65536
/* An idle connection gets a KEEPALIVE when due, checked this often. */
#define PLAN9_TICK_MS		1000

static const char plan9_header_page[] =
    "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

static const char plan9_header_event[] =
    "# compressed entry header\n"
    "\ttype_len    :    5 bits\n"
    "\ttime_delta  :   27 bits\n"
    "\tarray       :   32 bits\n"
    "\n"
    "\tpadding     : type == 29\n"
    "\ttime_extend : type == 30\n"
    "\ttime_stamp : type == 31\n"
    "\tdata max type_len  == 28\n";

#define PLAN9_COMMON \
    "format:\n" \
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" \
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" \
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\t" \
    "signed:0;\n" \
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n" \
    "\n" \
    "\tfield:u64 pc;\toffset:8;\tsize:8;\tsigned:0;\n" \
    "\tfield:s64 pid;\toffset:16;\tsize:8;\tsigned:1;\n"

/*
 * The pc as a function name when kallsyms knows it (the number
 * otherwise): %ps, the name, for an entry (its pc is the function's first
 * instruction); %pS, name+offset, for an exit (where it returns from).
 */
static const char plan9_format_entry[] =
    "name: func_entry\n"
    "ID: 1000\n"
    PLAN9_COMMON
    "\tfield:u64 arg1;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 arg2;\toffset:32;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 arg3;\toffset:40;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 arg4;\toffset:48;\tsize:8;\tsigned:0;\n"
    "\n"
    "print fmt: \"%ps pid=%lld arg1=0x%llx arg2=0x%llx arg3=0x%llx "
    "arg4=0x%llx\", (void *)REC->pc, REC->pid, REC->arg1, REC->arg2, "
    "REC->arg3, REC->arg4\n";

static const char plan9_format_exit[] =
    "name: func_exit\n"
    "ID: 1001\n"
    PLAN9_COMMON
    "\tfield:u64 ret;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\n"
    "print fmt: \"%pS pid=%lld ret=0x%llx\", (void *)REC->pc, REC->pid, "
    "REC->ret\n";

/* One import, from the open input to the finished recording. */
struct plan9 {
	const struct agent_opts	*o;
	char			*what;		/* the input, for messages */
	int			 fd;
	int			 sigfd;
	bool			 eof;
	struct td_file		*file;
	struct uplink		*up;		/* -h, or NULL */
	struct meta_tee		*sinks;
	struct meta_sink	 sink;		/* the file, the network */
	struct td_pagebuild	*pb;
	struct plan9_input	*in;
	struct plan9_reorder	*order;
	/* the tasks seen: a set of pids (0: a free slot) */
	uint32_t		*tasks;
	uint32_t		 tasks_cap;
	uint32_t		 ntasks;
	uint64_t		 tasks_over;	/* past TD_PLAN9_MAX_TASKS */
	uint64_t		 trace_id;
	uint64_t		 pages;
	uint64_t		 entries;
	uint64_t		 exits;
	uint64_t		 bad;		/* skipped records */
	uint64_t		 unordered;	/* read after a later one */
	uint64_t		 late;		/* past the window: raised */
	uint64_t		 max_in;	/* the latest time read */
	uint64_t		 last_out;	/* the time of the last event */
	bool			 any_out;
	int			 stop_sig;
	char			 err[2048];
};

static void
plan9_put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof v);
}

static void
plan9_put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof v);
}

static void
plan9_put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof v);
}

/*
 * The task an event belongs to: its pid, or 0 (which trace-cmd shows as
 * <idle>) for no process (the device writes -1 in interrupt context) and
 * anything else that is not a pid.
 */
static uint32_t
plan9_task(uint64_t pid)
{
	return pid >= 1 && pid <= INT32_MAX ? (uint32_t)pid : 0;
}

/* Remember a task for CMDLINES (an open-addressing set). */
static void
plan9_task_add(struct plan9 *p, uint32_t pid)
{
	uint32_t i, *old, old_cap;

	if (pid == 0)
		return;
	if (p->tasks_cap > 0) {
		for (i = pid * 2654435761u & (p->tasks_cap - 1); p->tasks[i];
		    i = (i + 1) & (p->tasks_cap - 1))
			if (p->tasks[i] == pid)
				return;
	}
	if (p->ntasks == TD_PLAN9_MAX_TASKS) {
		p->tasks_over++;
		return;
	}
	if ((p->ntasks + 1) * 2 > p->tasks_cap) {
		old = p->tasks;
		old_cap = p->tasks_cap;
		p->tasks_cap = old_cap ? old_cap * 2 : 1024;
		p->tasks = xcalloc(p->tasks_cap, sizeof *p->tasks);
		p->ntasks = 0;
		for (i = 0; i < old_cap; i++)
			if (old[i] != 0)
				plan9_task_add(p, old[i]);
		free(old);
	}
	for (i = pid * 2654435761u & (p->tasks_cap - 1); p->tasks[i];
	    i = (i + 1) & (p->tasks_cap - 1))
		;
	p->tasks[i] = pid;
	p->ntasks++;
}

/* The page being built goes to the sink. */
static int
plan9_page_out(struct plan9 *p)
{
	const void *page = td_pagebuild_take(p->pb);

	if (page == NULL)
		return 0;
	if (p->sink.page(p->sink.arg, 0, page, PLAN9_PAGE_SIZE) == -1) {
		snprintf(p->err, sizeof p->err, "%s: %s",
		    meta_tee_what(p->sinks), strerror(errno));
		return -1;
	}
	p->pages++;
	return 0;
}

/* One record in time order, as an event in the page being built. */
static int
plan9_event(struct plan9 *p, struct plan9_rec *r)
{
	uint8_t ev[PLAN9_ENTRY_LEN];
	size_t len;
	uint32_t task;
	int i;

	if (p->o->ktzero != 0 && r->pc < p->o->ktzero)
		r->pc += p->o->ktzero;
	if (p->any_out && r->ts < p->last_out) {
		/* later than the window: it cannot go back in time */
		p->late++;
		r->ts = p->last_out;
	}
	task = plan9_task(r->pid);
	memset(ev, 0, sizeof ev);
	plan9_put16(ev, r->exit ? PLAN9_ID_EXIT : PLAN9_ID_ENTRY);
	plan9_put32(ev + 4, task);
	plan9_put64(ev + 8, r->pc);
	plan9_put64(ev + 16, r->pid);
	if (r->exit) {
		plan9_put64(ev + 24, r->arg[0]);
		len = PLAN9_EXIT_LEN;
		p->exits++;
	} else {
		for (i = 0; i < 4; i++)
			plan9_put64(ev + 24 + 8 * i, r->arg[i]);
		len = PLAN9_ENTRY_LEN;
		p->entries++;
	}
	if (td_pagebuild_add(p->pb, r->ts, ev, len) == -1) {
		if (errno != ENOSPC || plan9_page_out(p) == -1)
			goto fail;
		if (td_pagebuild_add(p->pb, r->ts, ev, len) == -1)
			goto fail;
	}
	p->last_out = r->ts;
	p->any_out = true;
	plan9_task_add(p, task);
	return 0;
fail:
	if (p->err[0] == '\0')
		snprintf(p->err, sizeof p->err, "cannot build a page: %s",
		    strerror(errno));
	return -1;
}

/* A record read: into the window, and the earliest out of it. */
static int
plan9_record_cb(void *arg, const struct plan9_rec *r)
{
	struct plan9 *p = arg;
	struct plan9_rec out;

	if (r->ts < p->max_in)
		p->unordered++;
	else
		p->max_in = r->ts;
	if (plan9_reorder_push(p->order, r, &out) == 1)
		return plan9_event(p, &out);
	return 0;
}

/* A record skipped: the first few shown with their lines, all counted. */
static void
plan9_bad_cb(void *arg, uint64_t first, uint64_t last, const char *why)
{
	struct plan9 *p = arg;

	if (++p->bad > PLAN9_WARN_MAX) {
		if (p->bad == PLAN9_WARN_MAX + 1)
			log_warnx("%s: further malformed lines are counted, "
			    "not shown", p->what);
		return;
	}
	if (first == last)
		log_warnx("%s: line %" PRIu64 ": %s: skipped", p->what, first,
		    why);
	else
		log_warnx("%s: lines %" PRIu64 "-%" PRIu64 ": %s: skipped",
		    p->what, first, last, why);
}

static int
plan9_put(struct plan9 *p, const void *data, size_t n)
{
	return p->sink.write(p->sink.arg, data, n);
}

static int
plan9_put_u32(struct plan9 *p, uint32_t v)
{
	return plan9_put(p, &v, sizeof v);
}

static int
plan9_put_u64(struct plan9 *p, uint64_t v)
{
	return plan9_put(p, &v, sizeof v);
}

/* A section held in memory: u32 or u64 size (wide), then the text. */
static int
plan9_section(struct plan9 *p, enum td_opt id, const void *text, size_t n,
    bool wide)
{
	if (p->sink.begin(p->sink.arg, id) == -1 ||
	    (wide ? plan9_put_u64(p, n) : plan9_put_u32(p, (uint32_t)n)) ==
	    -1 || (n > 0 && plan9_put(p, text, n) == -1) ||
	    p->sink.end(p->sink.arg) == -1)
		return -1;
	return 0;
}

/*
 * KALLSYMS from --symbols: Plan 9's `nm -n` of the kernel, its functions,
 * data and bss as /proc/kallsyms lines.  Lines of another shape are
 * skipped, the first few shown.
 */
static int
plan9_symbols(struct plan9 *p, struct td_buf *ks)
{
	struct td_buf nm;
	const char *s, *nl;
	size_t left;
	uint64_t line = 0, bad = 0, kept = 0;
	int ret = -1, r;

	td_buf_init(&nm, TD_MAX_SECTION_SIZE);
	if (td_buf_read_file(&nm, p->o->symbols) == -1) {
		snprintf(p->err, sizeof p->err, "cannot read '%s': %s",
		    p->o->symbols, errno == ENOBUFS ? "larger than 256 MiB" :
		    strerror(errno));
		goto out;
	}
	s = (const char *)nm.data;
	left = nm.len;
	while (left > 0) {
		nl = memchr(s, '\n', left);
		line++;
		r = plan9_symbol_line(s, nl ? (size_t)(nl - s) : left, ks);
		if (r == -1 && errno == ENOBUFS) {
			snprintf(p->err, sizeof p->err, "'%s': more symbols "
			    "than kallsyms holds (256 MiB)", p->o->symbols);
			goto out;
		}
		if (r == -1 && ++bad <= PLAN9_WARN_MAX)
			log_warnx("'%s': line %" PRIu64 ": not ADDR TYPE NAME: "
			    "skipped", p->o->symbols, line);
		if (r == 1)
			kept++;
		if (nl == NULL)
			break;
		left -= (size_t)(nl - s) + 1;
		s = nl + 1;
	}
	if (bad > 0)
		log_warnx("'%s': %" PRIu64 " lines skipped", p->o->symbols,
		    bad);
	if (kept == 0)
		log_warnx("'%s': no function symbols (T, t, L or l): pcs "
		    "stay numbers", p->o->symbols);
	else
		log_debug("'%s': %" PRIu64 " functions", p->o->symbols, kept);
	ret = 0;
out:
	td_buf_free(&nm);
	return ret;
}

/*
 * The header sections, made up: a 64-bit kernel's page and event headers,
 * no ftrace events, the plan9 system's two formats, kallsyms from
 * --symbols (else empty), no printk formats.
 */
static int
plan9_headers(struct plan9 *p)
{
	static const char *const fmt[] = { plan9_format_entry,
	    plan9_format_exit };
	struct td_buf ks;
	int i, ret = -1;

	td_buf_init(&ks, TD_MAX_SECTION_SIZE - 4);
	if (p->o->symbols != NULL && plan9_symbols(p, &ks) == -1)
		goto out;
	if (p->sink.begin(p->sink.arg, TD_OPT_HEADER_INFO) == -1 ||
	    plan9_put(p, "header_page", sizeof "header_page") == -1 ||
	    plan9_put_u64(p, sizeof plan9_header_page - 1) == -1 ||
	    plan9_put(p, plan9_header_page, sizeof plan9_header_page - 1) ==
	    -1 || plan9_put(p, "header_event", sizeof "header_event") == -1 ||
	    plan9_put_u64(p, sizeof plan9_header_event - 1) == -1 ||
	    plan9_put(p, plan9_header_event, sizeof plan9_header_event - 1) ==
	    -1 || p->sink.end(p->sink.arg) == -1)
		goto sink;
	if (plan9_section(p, TD_OPT_FTRACE_EVENTS, NULL, 0, false) == -1)
		goto sink;
	if (p->sink.begin(p->sink.arg, TD_OPT_EVENT_FORMATS) == -1 ||
	    plan9_put_u32(p, 1) == -1 ||
	    plan9_put(p, "plan9", sizeof "plan9") == -1 ||
	    plan9_put_u32(p, 2) == -1)
		goto sink;
	for (i = 0; i < 2; i++)
		if (plan9_put_u64(p, strlen(fmt[i])) == -1 ||
		    plan9_put(p, fmt[i], strlen(fmt[i])) == -1)
			goto sink;
	if (p->sink.end(p->sink.arg) == -1 ||
	    plan9_section(p, TD_OPT_KALLSYMS, ks.data, ks.len, false) == -1 ||
	    plan9_section(p, TD_OPT_PRINTK, NULL, 0, false) == -1)
		goto sink;
	ret = 0;
	goto out;
sink:
	snprintf(p->err, sizeof p->err, "cannot write the header sections: "
	    "%s: %s", meta_tee_what(p->sinks), strerror(errno));
out:
	td_buf_free(&ks);
	return ret;
}

static int
plan9_u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * mult and shift with ns = cycles * mult >> shift for a counter of hz, as
 * TSC2NSEC holds them: the largest shift (at most 32, which trace-cmd's
 * 64-bit arithmetic allows) whose mult fits 31 bits (trace-cmd 3.1.6
 * keeps it in an int: 2^31 comes out negative, times a year before 0).
 */
static void
plan9_tsc2nsec(uint64_t hz, uint32_t *mult, uint32_t *shift)
{
	unsigned __int128 m;
	int s;

	for (s = 32; s > 0; s--) {
		m = (((unsigned __int128)1000000000 << s) + hz / 2) / hz;
		if (m <= INT32_MAX)
			break;
	}
	m = (((unsigned __int128)1000000000 << s) + hz / 2) / hz;
	*mult = (uint32_t)m;
	*shift = (uint32_t)s;
}

/* CMDLINES and the options, at the end (the tasks are known then). */
static int
plan9_tail(struct plan9 *p)
{
	struct { uint32_t mult, shift; uint64_t offset; } t2n;
	static const char clock[] = "[" PLAN9_CLOCK "]\n";
	static const char version[] = "tracedock " PACKAGE_VERSION;
	struct td_buf cl;
	uint32_t *pids, i, n = 0;
	int ret = -1;

	pids = xcalloc(p->ntasks + 1, sizeof *pids);
	for (i = 0; i < p->tasks_cap; i++)
		if (p->tasks[i] != 0)
			pids[n++] = p->tasks[i];
	qsort(pids, n, sizeof *pids, plan9_u32_cmp);
	td_buf_init(&cl, TD_MAX_SECTION_SIZE);
	for (i = 0; i < n; i++)
		if (td_buf_printf(&cl, "%u plan9\n", pids[i]) == -1)
			goto sink;
	if (plan9_section(p, TD_OPT_CMDLINES, cl.data, cl.len, true) == -1)
		goto sink;
	if (p->o->cycles_per_sec != 0) {
		memset(&t2n, 0, sizeof t2n);
		plan9_tsc2nsec(p->o->cycles_per_sec, &t2n.mult, &t2n.shift);
		log_debug("%" PRIu64 " cycles a second: ns = cycles * %u >> %u",
		    p->o->cycles_per_sec, t2n.mult, t2n.shift);
		if (p->sink.option(p->sink.arg, TD_OPT_TSC2NSEC, &t2n,
		    sizeof t2n) == -1)
			goto sink;
	}
	if (p->sink.option(p->sink.arg, TD_OPT_TRACECLOCK, clock,
	    sizeof clock) == -1 ||
	    p->sink.option(p->sink.arg, TD_OPT_VERSION, version,
	    sizeof version) == -1 ||
	    p->sink.option(p->sink.arg, TD_OPT_TRACEID, &p->trace_id,
	    sizeof p->trace_id) == -1)
		goto sink;
	if (p->tasks_over > 0)
		log_warnx("more than %u tasks: %" PRIu64 " events of tasks "
		    "beyond them show no name", TD_PLAN9_MAX_TASKS,
		    p->tasks_over);
	ret = 0;
	goto out;
sink:
	snprintf(p->err, sizeof p->err, "cannot write the command lines and "
	    "options: %s: %s", meta_tee_what(p->sinks), strerror(errno));
out:
	td_buf_free(&cl);
	free(pids);
	return ret;
}

/*
 * The network's turn after each round of the loop (with the revents of the
 * uplink's descriptor, whether the loop was idle): the pages framed, then
 * the uplink's (uplink_polled()).
 */
static int
plan9_net(struct plan9 *p, short revents, bool idle)
{
	if (uplink_net(p->up) == NULL)
		return 0;
	if (p->sink.batch_end(p->sink.arg) == -1) {
		snprintf(p->err, sizeof p->err, "cannot frame the pages");
		return -1;
	}
	return uplink_polled(p->up, revents, idle);
}

/* Read the input to its end (or a signal), feeding the network. */
static int
plan9_loop(struct plan9 *p)
{
	struct signalfd_siginfo si;
	struct pollfd fds[3];
	char *buf;
	ssize_t n;
	int nfds, ret = -1, r, net_i;

	buf = xmalloc(PLAN9_READ_SIZE);
	while (!p->eof && p->stop_sig == 0) {
		nfds = 0;
		fds[nfds].fd = p->fd;
		fds[nfds++].events = POLLIN;
		fds[nfds].fd = p->sigfd;
		fds[nfds++].events = POLLIN;
		net_i = -1;
		if (uplink_pollfd(p->up, &fds[nfds]))
			net_i = nfds++;
		for (r = 0; r < nfds; r++)
			fds[r].revents = 0;
		r = poll(fds, nfds, PLAN9_TICK_MS);
		if (r == -1 && errno != EINTR) {
			snprintf(p->err, sizeof p->err, "poll: %s",
			    strerror(errno));
			goto out;
		}
		if (fds[1].revents & POLLIN) {
			while (read(p->sigfd, &si, sizeof si) == sizeof si)
				p->stop_sig = (int)si.ssi_signo;
			log_debug("signal %d: stopping", p->stop_sig);
		}
		if (p->stop_sig == 0 && fds[0].revents != 0) {
			n = read(p->fd, buf, PLAN9_READ_SIZE);
			if (n == -1 && errno != EINTR && errno != EAGAIN) {
				snprintf(p->err, sizeof p->err, "cannot read "
				    "%s: %s", p->what, strerror(errno));
				goto out;
			}
			if (n == 0)
				p->eof = true;
			else if (n > 0 && plan9_input_feed(p->in, buf,
			    (size_t)n) == -1)
				goto out;
		}
		if (plan9_net(p, net_i >= 0 ? fds[net_i].revents : 0,
		    r == 0) == -1)
			goto out;
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

/* The rest of the window, the last page, the tail, the file, the END. */
static int
plan9_finish(struct plan9 *p)
{
	struct plan9_rec r;

	if (plan9_input_end(p->in) == -1)
		return -1;
	while (plan9_reorder_pop(p->order, &r))
		if (plan9_event(p, &r) == -1)
			return -1;
	if (plan9_page_out(p) == -1 || plan9_tail(p) == -1)
		return -1;
	if (p->file != NULL && td_file_finish(p->file) == -1) {
		snprintf(p->err, sizeof p->err, "cannot write '%s': %s",
		    p->o->output, strerror(errno));
		return -1;
	}
	if (uplink_finish(p->up) == -1)
		return -1;
	return 0;
}

/* The pages sent, for the END (uplink_ops: all on CPU 0). */
static uint64_t
plan9_pages_cb(void *arg, int cpu)
{
	struct plan9 *p = arg;

	return cpu == 0 ? p->pages : 0;
}

/* The input, the signals, the outputs and the header sections. */
static int
plan9_setup(struct plan9 *p)
{
	static const struct uplink_ops ops = { .pages = plan9_pages_cb };
	struct td_file_params fp;
	struct uplink_params up;
	struct meta_sink s;
	struct plan9_input_cb cb;
	sigset_t set;
	char label[4200];

	if (strcmp(p->o->import_plan9, "-") == 0) {
		p->fd = STDIN_FILENO;
		p->what = xstrdup("standard input");
	} else {
		xasprintf(&p->what, "'%s'", p->o->import_plan9);
		p->fd = open(p->o->import_plan9, O_RDONLY | O_CLOEXEC);
		if (p->fd == -1) {
			snprintf(p->err, sizeof p->err, "cannot open %s: %s",
			    p->what, strerror(errno));
			return -1;
		}
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	p->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (p->sigfd == -1) {
		snprintf(p->err, sizeof p->err, "signalfd: %s",
		    strerror(errno));
		return -1;
	}
	memset(&cb, 0, sizeof cb);
	cb.record_cb = plan9_record_cb;
	cb.bad_cb = plan9_bad_cb;
	cb.arg = p;
	p->in = plan9_input_new(&cb);
	p->order = plan9_reorder_new(TD_PLAN9_REORDER);
	p->pb = td_pagebuild_new(PLAN9_PAGE_SIZE, PLAN9_COMMIT_SIZE);
	p->sinks = meta_tee_new();
	meta_sink_tee(&p->sink, p->sinks);
	if (getrandom(&p->trace_id, sizeof p->trace_id, 0) !=
	    sizeof p->trace_id)
		p->trace_id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (p->o->output != NULL) {
		memset(&fp, 0, sizeof fp);
		fp.version = p->o->file_version;
		fp.codec = p->o->codec;
		fp.page_size = PLAN9_PAGE_SIZE;
		fp.long_size = PLAN9_LONG_SIZE;
		fp.ncpus = 1;
		fp.clock = PLAN9_CLOCK;
		if ((p->file = td_file_create(p->o->output, &fp)) == NULL) {
			snprintf(p->err, sizeof p->err, "cannot create '%s': "
			    "%s", p->o->output, strerror(errno));
			return -1;
		}
		meta_sink_file(&s, p->file);
		snprintf(label, sizeof label, "cannot write '%s'",
		    p->o->output);
		meta_tee_add(p->sinks, &s, label);
	}
	if (p->o->host != NULL) {
		memset(&up, 0, sizeof up);
		up.o = p->o;
		up.what = "import";
		up.ncpus = 1;
		up.page_size = PLAN9_PAGE_SIZE;
		up.long_size = PLAN9_LONG_SIZE;
		up.commit_size = PLAN9_COMMIT_SIZE;
		up.trace_id = p->trace_id;
		up.clock = PLAN9_CLOCK;
		up.sinks = p->sinks;
		up.local = p->file != NULL;
		up.ops = &ops;
		up.arg = p;
		up.err = p->err;
		up.errlen = sizeof p->err;
		if ((p->up = uplink_new(&up)) == NULL)
			return -1;
	}
	/* into the file, and the stream's queue until it connects */
	if (plan9_headers(p) == -1)
		return -1;
	if (uplink_start(p->up) == -1)
		return -1;
	return 0;
}

static void
plan9_free(struct plan9 *p)
{
	if (p->file != NULL)
		td_file_free(p->file);
	uplink_free(p->up);
	meta_tee_free(p->sinks);
	td_pagebuild_free(p->pb);
	plan9_reorder_free(p->order);
	plan9_input_free(p->in);
	free(p->tasks);
	free(p->what);
	if (p->fd > STDIN_FILENO)
		close(p->fd);
	if (p->sigfd != -1)
		close(p->sigfd);
}

/* What was imported, and what was not. */
static void
plan9_summary(struct plan9 *p)
{
	uint64_t skipped = plan9_input_skipped(p->in);

	log_info("%s: %" PRIu64 " events (%" PRIu64 " entries, %" PRIu64
	    " exits) of %u tasks from %" PRIu64 " lines%s%s%s", p->what,
	    p->entries + p->exits, p->entries, p->exits, p->ntasks,
	    plan9_input_lines(p->in), p->o->output ? " into '" : "",
	    p->o->output ? p->o->output : "", p->o->output ? "'" : "");
	if (skipped > 0)
		log_warnx("%s: %" PRIu64 " malformed records skipped "
		    "(%" PRIu64 " lines)", p->what, p->bad, skipped);
	if (p->unordered > 0)
		log_info("%s: %" PRIu64 " records out of time order, sorted",
		    p->what, p->unordered);
	if (p->late > 0)
		log_warnx("%s: %" PRIu64 " records more than %u places out of "
		    "time order, written at the time of the event before them",
		    p->what, p->late, TD_PLAN9_REORDER);
}

/* Import a Plan 9 trace; tdagent's exit status. */
int
plan9_import(const struct agent_opts *o)
{
	struct plan9 p;
	int ret = 1;

	memset(&p, 0, sizeof p);
	p.o = o;
	p.fd = p.sigfd = -1;
	if (plan9_setup(&p) == -1 || plan9_loop(&p) == -1 ||
	    plan9_finish(&p) == -1) {
		log_warnx("%s", p.err);
		if (p.file != NULL)
			td_file_abort(p.file);
		goto out;
	}
	plan9_summary(&p);
	ret = 0;
	if (p.stop_sig != 0 && p.stop_sig != SIGINT && p.stop_sig != SIGTERM)
		ret = 128 + p.stop_sig;
out:
	plan9_free(&p);
	return ret;
}
