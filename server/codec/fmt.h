/* fmt.h -- exact number text for the wire, both ways: the shortest decimal
 * that reads back to the same float32 / float64 bits, the correctly rounded
 * float64 / float32 / float16 / bfloat16 value of a JSON number's text, and
 * the non-finite spellings shared by every JSON codec ("NaN", "Infinity",
 * "-Infinity"). */
#ifndef NORMD_FMT_H
#define NORMD_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* The room one element of a list below may need: a text, or a quoted
 * non-finite spelling, and the ',' before it. */
#define FMT_ELEMENT_MAX (FMT_NUMBER_MAX + 2)

/* The elements of a JSON array: the texts of v[0..n) (fmt_float's,
 * fmt_double's) separated by ',', non-finite values as the strings
 * "NaN", "Infinity", "-Infinity" (quoted), into out, which has room for
 * n * FMT_ELEMENT_MAX bytes (stores reach past the text, within that);
 * no NUL. Returns the bytes written. Thread-safe, no malloc. */
size_t fmt_float_list(const float *v, size_t n, char *out);
size_t fmt_double_list(const double *v, size_t n, char *out);

/* Parses one JSON number (RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)
 * starting at s, reading at most len bytes (no NUL needed), and returns the
 * length of the longest prefix of s that is a number: "01" -> 1 (the "0"),
 * "1." -> 1, "1e" -> 1, "2e+x" -> 1, "-1.5e3]" -> 6. Returns 0, leaving *out
 * untouched, only when no prefix is a number ("-", "+1", ".5", "abc",
 * "NaN", or len 0). The caller checks that the byte after the number is a
 * delimiter (',', ']', whitespace), which rejects "01" and "1.".
 * The value stored is the correctly rounded one (to nearest, ties to even):
 * bit for bit what strtod (resp. strtof) in the "C" locale returns for that
 * text, including overflow to +-Infinity, underflow to +-0, subnormals and
 * -0 ("-0", "-1e-999"). Any number of digits and any exponent are accepted.
 * Locale-independent, thread-safe, no malloc; errno is left alone. */
size_t fmt_parse_double(const char *s, size_t len, double *out);
/* The same for float32, rounded once from the decimal (not via double). */
size_t fmt_parse_float(const char *s, size_t len, float *out);

/* The same for IEEE binary16 and bfloat16, stored as their bits: rounded
 * once from the decimal (ties to even), including subnormals, overflow to
 * +-Infinity (a text at or above the midpoint past the largest finite value:
 * 65520 for float16) and -0. The double of the text decides unless it is
 * itself a midpoint between two neighbours in the format; then the text is
 * compared with that midpoint exactly (rare: the text is the midpoint, or
 * within half a double's ulp of it). */
size_t fmt_parse_f16(const char *s, size_t len, uint16_t *out);
size_t fmt_parse_bf16(const char *s, size_t len, uint16_t *out);

/* Whether (float)d, for a double d that is the correctly rounded double of
 * some exact value, is also that value correctly rounded to float32 (so
 * rounding twice loses nothing): 1 unless d is a midpoint between two
 * adjacent floats, or in the subnormal float range (zero, infinities and
 * NaN are exact). A midpoint between two normal floats has a 53-bit
 * significand that is a 24-bit one and a half (the last 29 bits are 1 and
 * 28 zeros); any other double in the normal float range lies strictly
 * between the same two midpoints as the exact value it was rounded from.
 * Below the normal floats the midpoints are spaced differently. Inline: the
 * JSON decoder asks it for every float32 element. */
static inline int fmt_float_from_double_exact(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  double mag = d < 0 ? -d : d;
  return (b & ((1ull << 29) - 1)) != 1ull << 28 && !(mag < 0x1p-126 && mag != 0);
}

/* Whether d, the correctly rounded double of some exact value, rounds to
 * the same value in a format of sig_bits significand bits (hidden one
 * included) and normal exponents emin..emax as that exact value does: 1
 * unless d is a midpoint between two neighbours in the format. Every such
 * midpoint is a double (these formats lie far inside double's normal
 * range), and rounding to double is monotone: it keeps the exact value on
 * the same side of each midpoint, and lands on one only from within half
 * a double's ulp. Zero, infinities, NaN, doubles below half the format's
 * smallest subnormal and above its binades are exact. */
static inline int fmt__narrow_exact(double d, int sig_bits, int emin,
                                    int emax) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  int field = (int)(b >> 52 & 0x7ff);
  if (field == 0 || field == 0x7ff) return 1;
  int e = field - 1023;
  if (e > emax) return 1; /* infinity in the format, from either side */
  /* the bits of d's 53-bit significand below the format's last one */
  int drop = 53 - sig_bits + (e < emin ? emin - e : 0);
  if (drop > 53) return 1;
  uint64_t sig = (b & ((1ull << 52) - 1)) | 1ull << 52;
  return (sig & ((1ull << drop) - 1)) != 1ull << (drop - 1);
}
/* The float16 and bfloat16 cases; inline, as fmt_float_from_double_exact. */
static inline int fmt_f16_from_double_exact(double d) {
  return fmt__narrow_exact(d, 11, -14, 15);
}
static inline int fmt_bf16_from_double_exact(double d) {
  return fmt__narrow_exact(d, 8, -126, 127);
}

/* Parses a non-finite spelling ("NaN", "Infinity", "-Infinity", also
 * "+Infinity"); returns 1 and stores the value, or 0 if s is not one. */
int fmt_parse_nonfinite(const char *s, double *out);

#endif
