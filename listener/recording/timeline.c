/*
 * timeline.c: a finished recording's place on the listener's timeline
 * (see timeline.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "guests.h"
#include "log.h"
#include "recparams.h"
#include "tdlimits.h"
#include "timeline.h"
#include "timesync.h"
#include "banned.h"

int
timeline_write(struct timesync *ts, struct guests *g, struct td_file *f,
    const struct recording_params *p, uint64_t trace_id, const char *label)
{
	struct timesync_report rep;
	struct timesync *kvm = NULL;
	const char *why = NULL;
	uint64_t peer = trace_id;
	uint32_t mult, shift;
	bool paired;
	int ret;

	/*
	 * Paired with a host: TIME_SHIFT names the host file, and KVM's
	 * exact clock replaces the probes where the host gave one
	 */
	paired = guests_host(g, &peer);
	if (paired) {
		timesync_factors(ts, &mult, &shift);
		kvm = guests_kvm(g, mult, shift, &why);
	}
	ret = timesync_options(kvm != NULL ? kvm : ts, f, peer,
	    p->ncpus, p->clock, &rep);
	if (paired && ret != -1)
		log_info("%s: TIME_SHIFT against the host recording %016"
		    PRIx64 ", %s%s%s", label, peer, kvm != NULL ?
		    "on the exact KVM clock" : "by probes", why != NULL ?
		    ": " : "", why != NULL ? why : "");
	timesync_free(kvm);
	if (ret == -1)
		return -1;
	if (rep.unchecked)
		log_info("%s: time sync: no TSC2NSEC from the agent, samples "
		    "not checked against their neighbours", label);
	if (ret == 1) {
		log_warnx("%s: no time sync: the agent sent no usable sample "
		    "(%u dropped); the file keeps the agent's own clock",
		    label, rep.dropped);
		return 0;
	}
	if (rep.wide_only)
		log_warnx("%s: time sync: every sample's bound was past %u ms; "
		    "the tightest is the time shift, +-%" PRIu64 " ns: wide",
		    label, TD_MAX_TSYNC_BOUND / 1000000, rep.bound);
	if (rep.thinned > 0)
		log_info("%s: time sync: %u samples thinned out while "
		    "recording (more than %u)", label, rep.thinned,
		    TD_MAX_TSYNC_SAMPLES);
	if (rep.in_option < rep.kept)
		log_info("%s: time sync: %u of %u samples kept in TIME_SHIFT "
		    "(option size cap)", label, rep.in_option, rep.kept);
	log_info("%s: time sync: %u samples (%u dropped, %u imprecise, %u "
	    "off the line), offset %" PRId64 " %s, drift %.3f ppm, error "
	    "bound +-%" PRIu64 " ns", label, rep.kept, rep.dropped,
	    rep.imprecise, rep.off_line, rep.offset,
	    strcmp(p->clock, "x86-tsc") == 0 ? "cycles" : "ns",
	    rep.drift_ppm, rep.bound);
	return 0;
}
