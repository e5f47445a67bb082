#!/bin/sh
# valgrind.sh PROG [ARGS...]: run PROG under valgrind memcheck the way the
# test suite does.  A memory error, or a definite or indirect leak that
# tests/valgrind.supp does not list, makes it exit 97.  The report goes to
# stderr, or to TD_VG_LOG (a file name; %p stands for the pid).  Programs
# that PROG executes run untraced; children it forks are checked too.
d=$(cd "$(dirname "$0")" && pwd)
exec valgrind --tool=memcheck --leak-check=full \
    --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --error-exitcode=97 \
    --track-fds=no --num-callers=30 --suppressions="$d/valgrind.supp" \
    ${TD_VG_LOG:+--log-file="$TD_VG_LOG"} "$@"
