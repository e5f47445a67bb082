/*
 * output.h: where tdlisten's files go: DIR/<identity>/ with the listener's
 * modes and group, names made from the verified identity (escaped one to
 * one), the disk and --quota room, the incomplete file kept from a
 * broken recording, and the recordings left at start.
 *
 * Functions return 0 or -1 with errno (bool for the predicates) and
 * never log; strings they return are the caller's to free.  struct
 * output_done is what a producer tells the callback it was given when a
 * file is put in place.  Loop thread only.
 */
#ifndef TD_OUTPUT_H
#define TD_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>

struct listener_config;
struct td_file;

/*
 * A file or directory tdlisten put in place (or kept incomplete), as the
 * callback registered for it hears it (recording_set_done(),
 * uftrace_set_done()): every pointer valid for the call only.
 */
struct output_done {
	const char	*path;		/* under DIR, as the log names it */
	bool		 complete;	/* false: kept incomplete */
	const char	*producer;	/* "tdproto", "tracecmd", "uftrace" */
	const char	*identity;	/* its directory under DIR */
	const char	*name;		/* the recording's name, or "" */
};

/*
 * Directory and file name for a new recording (its PATH.part made, with
 * c's modes); caller frees; pieces: the first piece's name under
 * --rotate (rotate.h).  -1 with *err (caller frees) and errno (ENOSPC,
 * EMFILE ...: another try later may work).
 */
int	output_path(const struct listener_config *c, const char *identity,
	    const char *name, bool pieces, char **path, char **err);
/*
 * Make the directory hostdir (c's modes and group), or give one an older
 * tdlisten made the modes of now: 0, or -1 with errno.
 */
int	output_hostdir(const struct listener_config *c, const char *hostdir);
/* Bytes on disk under DIR/identity. */
uint64_t output_usage(const char *dir, const char *identity);
/* Room for need more bytes of identity (disk, --quota); errno if not. */
bool	output_room(const struct listener_config *c, const char *identity,
	    uint64_t need);
/* Keep characters safe in a path component, map the rest to '_'. */
void	output_sanitize(char *s);
/*
 * A broken recording's writer f (of path) finished as NAME.incomplete.dat
 * when it holds a readable trace: 0 and *final (caller frees), or -1
 * (too little: dropped).  Frees nothing of f.
 */
int	output_keep_partial(struct td_file *f, const char *path, char **final);
/* fn(c, identity, state path) for each recording left in c->dir. */
void	output_states(const struct listener_config *c,
	    void (*fn)(const struct listener_config *, const char *,
	    const char *));

#endif
