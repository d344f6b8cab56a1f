/* run_files.h - what `run` reads from its command line and writes to its dump folder, shared by
 * the engine and the llama.cpp adapter so both speak the same command line. */
#ifndef KITE_RUN_FILES_H
#define KITE_RUN_FILES_H

#include <stddef.h>
#include <stdint.h>

/* A whole decimal number in [lo, hi] at the start of s, digits only (no blank, no sign: strtoll
 * alone would take " 5" and "+5"): 0 with *out set and *rest at the first byte after the digits,
 * else -1. The one reader of numbers for options, token ids and the KITE_* variables. */
int kt_parse_whole(const char *s, const char **rest, long long lo, long long hi, long long *out);

/* "1,2,3" -> a malloc'd array of token ids ([*n]); NULL when empty, malformed (blanks, signs,
 * empty items) or negative. */
int32_t *kt_parse_token_list(const char *text, int *n);

/* Write data to dir/name through a temporary name and a rename, so a reader never sees half a
 * file. 0 on success; -1 with errno set (ENAMETOOLONG when a name would not fit). */
int kt_write_file_atomic(const char *dir, const char *name, const void *data, size_t n);

#endif
