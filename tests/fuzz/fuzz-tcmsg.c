/*
 * fuzz-tcmsg.c: libFuzzer target for trace-cmd's v3 framing
 * (proto/tcmsg.c) and the header reader behind it (td_read_open_header(),
 * listener/producers/tcmeta.c's way in).
 *
 * The input is what a trace-cmd record -N client writes on the control
 * connection after the listener's greeting: its first string, the magic,
 * then messages. It is cut as listener/producers/tracecmd.c cuts it, and each
 * whole message is copied into a heap block of exactly its size (ASan sees any
 * read past it) and handed to every unpacker. The payloads of SEND_DATA
 * messages, put together in a memfd, are read as a trace.dat header. Besides
 * "no crash, no leak, no undefined behaviour":
 *
 *   - td_tc_msg_parse() agrees with itself on every prefix of a message
 *     (0 before its header is whole with total 0, then 0 with the same
 *     total);
 *   - a TINIT that unpacks is within the caps (CPUs, a power-of-two page
 *     size), and packs again to a message that unpacks to the same fields
 *     when it had no unknown option;
 *   - a RINIT that unpacks packs again and unpacks to the same ports;
 *   - the reader opens the header or refuses it with an errno, and no
 *     descriptor is left open.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "tcmsg.h"
#include "tdlimits.h"
#include "tdread.h"
#include "fuzz.h"

/* Every unpacker on one whole message m (a heap copy of its bytes). */
static void
one_message(const struct td_tc_msg *m)
{
	static uint16_t ports[TD_MAX_CPUS], again[TD_MAX_CPUS];
	const char *opts[3] = { NULL, NULL, NULL };
	struct td_tc_tinit t, t2;
	struct td_tc_msg g;
	struct td_buf b;
	uint32_t cpus, cpus2, i;
	int k = 0;

	td_buf_init(&b, 2 * TD_TC_MSG_MAX);
	if (td_tc_unpack_tinit(m, &t) == 0) {
		FUZZ_CHECK(m->cmd == TD_TC_TINIT);
		FUZZ_CHECK(t.cpus >= 1 && t.cpus <= TD_MAX_CPUS);
		FUZZ_CHECK(t.page_size >= TD_MIN_PAGE_SIZE &&
		    t.page_size <= TD_MAX_PAGE_SIZE &&
		    (t.page_size & (t.page_size - 1)) == 0);
		if (t.tcp)
			opts[k++] = "tcp";
		if (t.vsock)
			opts[k++] = "vsock";
		if (t.unknown == 0 && td_tc_pack_tinit(&b, t.cpus,
		    t.page_size, opts) == 0) {
			FUZZ_CHECK(td_tc_msg_parse(b.data, b.len, &g) == 1);
			FUZZ_CHECK(td_tc_unpack_tinit(&g, &t2) == 0);
			FUZZ_CHECK(memcmp(&t, &t2, sizeof t) == 0);
		}
	} else
		FUZZ_CHECK(errno == EBADMSG);
	td_buf_reset(&b);
	if (td_tc_unpack_rinit(m, TD_MAX_CPUS, &cpus, ports) == 0) {
		FUZZ_CHECK(m->cmd == TD_TC_RINIT);
		FUZZ_CHECK(cpus >= 1 && cpus <= TD_MAX_CPUS);
		if (td_tc_pack_rinit(&b, cpus, ports) == 0) {
			FUZZ_CHECK(td_tc_msg_parse(b.data, b.len, &g) == 1);
			FUZZ_CHECK(td_tc_unpack_rinit(&g, TD_MAX_CPUS,
			    &cpus2, again) == 0);
			FUZZ_CHECK(cpus2 == cpus);
			for (i = 0; i < cpus; i++)
				FUZZ_CHECK(again[i] == ports[i]);
		}
	}
	td_buf_free(&b);
}

/* The header the SEND_DATA messages made, through the reader. */
static void
read_header(int fd)
{
	struct td_read *r;
	int low = fuzz_lowest_fd();

	r = td_read_open_header(fd);
	if (r != NULL) {
		FUZZ_CHECK(td_read_ncpus(r) >= 1 &&
		    td_read_ncpus(r) <= TD_MAX_CPUS);
		td_read_close(r);
	} else
		FUZZ_CHECK(errno != 0);
	FUZZ_CHECK(fuzz_lowest_fd() == low);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_tc_msg m, p;
	uint32_t cpus;
	size_t used, i, n;
	uint8_t *copy;
	bool v3;
	int r, fd;

	r = td_tc_first(data, size < TD_TC_FIRST_MAX ? size :
	    TD_TC_FIRST_MAX, &v3, &cpus, &used);
	if (r != 1 || !v3)
		return 0;
	data += used;
	size -= used;
	if (size < TD_TC_MAGIC_LEN)
		return 0;
	/* a wrong magic ends it in the listener; go on to reach more */
	(void)td_tc_magic_ok(data);
	data += TD_TC_MAGIC_LEN;
	size -= TD_TC_MAGIC_LEN;
	fd = memfd_create("fuzz-tcmsg", MFD_CLOEXEC);
	FUZZ_CHECK(fd != -1);
	while (size > 0) {
		n = size < TD_TC_MSG_MAX ? size : TD_TC_MSG_MAX;
		r = td_tc_msg_parse(data, n, &m);
		if (r != 1)
			break;
		for (i = 0; i < m.total; i += 1 + i / 4) {
			FUZZ_CHECK(td_tc_msg_parse(data, i, &p) == 0);
			FUZZ_CHECK(p.total == (i < TD_TC_MSG_HEADER ? 0 :
			    m.total));
		}
		copy = malloc(m.total);
		FUZZ_CHECK(copy != NULL);
		memcpy(copy, data, m.total);
		FUZZ_CHECK(td_tc_msg_parse(copy, m.total, &p) == 1);
		one_message(&p);
		if (p.cmd == TD_TC_SEND_DATA && p.len > 0)
			FUZZ_CHECK(write(fd, p.payload, p.len) ==
			    (ssize_t)p.len);
		free(copy);
		data += m.total;
		size -= m.total;
		if (m.cmd == TD_TC_FIN_DATA || m.cmd == TD_TC_CLOSE)
			break;
	}
	read_header(fd);
	close(fd);
	return 0;
}
