/*
 * banned.h: functions tracedock must not use; include it last.
 * Each use turns into a compile error naming the function.
 */
#ifndef TD_BANNED_H
#define TD_BANNED_H

#define TD_BANNED(func) sorry_##func##_is_banned_use_snprintf_or_td_buf

#undef strcpy
#define strcpy(x, y) TD_BANNED(strcpy)
#undef strcat
#define strcat(x, y) TD_BANNED(strcat)
#undef sprintf
#define sprintf(...) TD_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) TD_BANNED(vsprintf)
#undef strncpy
#define strncpy(x, y, n) TD_BANNED(strncpy)
#undef gets
#define gets(x) TD_BANNED(gets)

#endif
