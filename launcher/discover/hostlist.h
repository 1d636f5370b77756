/* launcher/discover/hostlist.h — SLURM-style host lists: "node[01-04,07],gpu-[1-2]" <-> names.
 *
 * Pure functions, no I/O. SLURM hands a job its nodes in this compressed form
 * (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST) and pdsh takes it after -w; podrun expands it to find
 * the job's hosts in order and compresses a list of names to print one short line.
 *
 * The grammar is SLURM's hostlist_create (src/common/hostlist.c), read for behaviour:
 *   list   = item { sep item }      sep: one or more of ',' ' ' '\t' '\n' '\r' (outside brackets)
 *   item   = piece { piece }        piece: name text, or "[" ranges "]"
 *   ranges = range { "," range }    range: DIGITS or DIGITS "-" DIGITS, low <= high
 * A range keeps the zero padding of its low end: "[08-10]" gives 08 09 10, "[8-10]" gives 8 9 10.
 * Several bracket groups in one item expand left to right with the rightmost varying fastest:
 * "rack[1-2]-n[1-2]" is rack1-n1 rack1-n2 rack2-n1 rack2-n2 (SLURM's order). Duplicates are kept
 * and the order is the order written: node rank follows it.
 * Two choices differ from SLURM, on purpose: text after a closing bracket is allowed
 * ("gpu[0-3]-ib", as pdsh -w takes it; SLURM rejects it), and anything SLURM accepts only by
 * accident is an error that names the piece: a '[' without ']', a stray ']', a space or sign inside
 * brackets (SLURM's strtoul would read "[ 3]" as 3 with width 2).
 *
 * Everything is bounded: an expansion of more than max_names names, a name longer than
 * HOSTLIST_NAME_MAX bytes or a number of more than HOSTLIST_DIGITS_MAX digits is an error found
 * before any name is produced, so a hostile list costs neither memory nor time. */
#ifndef PODRUN_DISCOVER_HOSTLIST_H
#define PODRUN_DISCOVER_HOSTLIST_H

#include <stddef.h>

#define HOSTLIST_NAME_MAX 255      /* bytes in one expanded name (a DNS name is at most 253) */
#define HOSTLIST_NAMES_MAX 65536   /* most names one expansion gives (SLURM's MAX_RANGE) */
#define HOSTLIST_DIGITS_MAX 18     /* digits in one range bound: fits an unsigned long long */

/* An expanded list: count names, in order, each NUL-terminated; they live in one block owned
 * by the struct. */
struct hostlist {
    size_t count;
    char **names;
};

/* Expands `text` into `out` (which the caller frees with hostlist_free, also after an error).
 * max_names bounds the result (0, or more than HOSTLIST_NAMES_MAX: HOSTLIST_NAMES_MAX).
 * `what` names the input in messages ("SLURM_JOB_NODELIST"; NULL: "hostlist"). An empty or
 * all-separator text gives 0 names.
 * Returns 0, or on error a negative errno with one line in err naming the bad piece and the fix:
 * -EINVAL (syntax), -E2BIG (more than max_names), -ENAMETOOLONG (a name over HOSTLIST_NAME_MAX),
 * -ERANGE (a number over HOSTLIST_DIGITS_MAX digits), -ENOMEM. */
int hostlist_expand(const char *text, size_t max_names, const char *what, struct hostlist *out,
                    char *err, size_t errlen);

void hostlist_free(struct hostlist *hl);

/* Writes the names, in the same order, as a short list: runs of one prefix with numeric
 * suffixes become one bracket group of ranges ("n1,n2,n3,n5" -> "n[1-3,5]") where that is
 * shorter than the names themselves, the zero padding of every name kept, nothing sorted or
 * merged across the order (SLURM's "scontrol show hostlist" without "sorted"). The result is
 * never longer than the names joined by ',', and hostlist_expand of it gives back exactly
 * `names`.
 * Returns the length written (out is NUL-terminated), -ENOSPC if it does not fit in cap, or
 * -EINVAL if a name is empty, longer than HOSTLIST_NAME_MAX or holds a byte a list cannot carry
 * (separators, brackets, control bytes). */
int hostlist_compress(const char *const *names, size_t count, char *out, size_t cap);

/* Copies s[0..n) into out (cap >= 4) the way an error line may show untrusted text: cut with
 * "..." where it does not fit, '"', '\\' and bytes outside printable ASCII as \xNN, always
 * NUL-terminated and on one line. Shared by the discover parsers. */
void hostlist_quote(char *out, size_t cap, const char *s, size_t n);

#endif
