/* fmt.h -- exact number text for the wire: the shortest decimal that reads
 * back to the same float32 / float64 bits, and the non-finite spellings
 * shared by every JSON codec ("NaN", "Infinity", "-Infinity"). */
#ifndef NORMD_FMT_H
#define NORMD_FMT_H

#include <stddef.h>

/* Big enough for any output of fmt_float / fmt_double plus a NUL. */
#define FMT_NUMBER_MAX 32

/* Writes the shortest decimal text s (JSON number syntax, e.g. "1.3038095",
 * "1e-05", "-0", "3") such that strtof(s) == f bit for bit, NUL-terminated,
 * into buf (at least FMT_NUMBER_MAX bytes); returns its length. Non-finite
 * values are written as NaN, Infinity or -Infinity without quotes (the
 * caller adds them for JSON). Thread-safe, locale-independent, no malloc. */
int fmt_float(float f, char *buf);
/* The same for doubles: strtod(s) == d bit for bit. */
int fmt_double(double d, char *buf);

/* Parses a non-finite spelling ("NaN", "Infinity", "-Infinity", also
 * "+Infinity"); returns 1 and stores the value, or 0 if s is not one. */
int fmt_parse_nonfinite(const char *s, double *out);

#endif
