/* fmt_scan.h -- private to fmt_parse.c and to numarray.c's array scan:
 * the common path of parsing a JSON number's text to the double, inline
 * (fmt__parse_double_hot), so that an array of a million numbers does not
 * pay a call per number; fmt_parse_double is the same function out of
 * line. Its home is still fmt_parse.c's (the general scan, Eisel-Lemire
 * and the exact path, reached through fmt__parse_double_rest / _long, are
 * there); this header only holds the part a caller inlines: the scan of a
 * text of at most 19 digits and Clinger's fast path. */
#ifndef NORMD_FMT_SCAN_H
#define NORMD_FMT_SCAN_H

#include <float.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FMT__SCAN_HOT static inline __attribute__((always_inline))

#define FMT__W_DIGITS 19 /* significant digits that always fit a uint64_t */
/* Exponents stop growing here: a text would need 10^15 digits to bring
 * such a number back into range. */
#define FMT__EXP_CAP 1000000000000000

/* A JSON number's text as w * 10^q (up to the dropped digits). */
typedef struct {
  uint64_t w;    /* the first FMT__W_DIGITS significant digits, or all of them */
  int64_t q;     /* the exponent of w's last digit */
  int neg;       /* a leading '-' */
  int truncated; /* a non-zero digit after the first FMT__W_DIGITS was dropped:
                  * the value lies strictly between w and w + 1 (x 10^q) */
} fmt__scan_t;

static int fmt__is_digit(char c) { return (unsigned char)(c - '0') < 10; }

/* Up to eight digits at once (SWAR): the 8 bytes at p as a little-endian
 * word (the first byte lowest), how many of them lead as ASCII digits, and
 * the value of those. */
#define FMT__BYTES_OF(b) (0x0101010101010101ull * (b))
static uint64_t fmt__load8(const char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

/* A word whose byte is non-zero from the first non-digit byte of v on
 * (bytes after that one may be either). With x = v ^ '0' per byte, a
 * digit byte is x in 0..9: x + 0x76 sets the top bit of exactly the bytes
 * x in 10..0x7f, and x's own top bit marks the rest. Only a byte x >=
 * 0x8a carries into the next, which then comes after the first non-digit.
 * (Five operations; the test by "high nibble 3, and 3 after adding 6"
 * took seven.) */
FMT__SCAN_HOT uint64_t fmt__nondigits8(uint64_t v) {
  uint64_t x = v ^ FMT__BYTES_OF('0');
  return (x | (x + FMT__BYTES_OF(0x76))) & FMT__BYTES_OF(0x80);
}

/* How many bytes of v lead as ASCII digits (0..8). */
FMT__SCAN_HOT int fmt__leading_digits8(uint64_t v) {
  uint64_t bad = fmt__nondigits8(v);
  return bad ? __builtin_ctzll(bad) / 8 : 8;
}

/* The value of the first n (0..8) digit bytes of v. */
FMT__SCAN_HOT uint32_t fmt__leading_value8(uint64_t v, int n) {
  /* Digits to values (the same xor as fmt__nondigits8's), then those n
   * to the top: the bytes shifted in below them are leading zeros (two
   * shifts: n = 0 shifts by 64). */
  v = (v ^ FMT__BYTES_OF('0')) << (4 * (8 - n)) << (4 * (8 - n));
  /* byte 2j becomes 10 * d(2j) + d(2j+1) (< 100: no carry) */
  v = v * 10 + (v >> 8);
  /* the four pairs p0..p3 sit in bytes 0, 2, 4, 6; multiplying p0 and p2
   * (bytes 0, 4) by 100 + 10^6 * 2^32 and p1 and p3 by 1 + 10^4 * 2^32
   * adds up p0 * 10^6 + p1 * 10^4 + p2 * 100 + p3 in the upper half. */
  uint64_t p02 = v & 0x000000FF000000FFull;
  uint64_t p13 = (v >> 16) & 0x000000FF000000FFull;
  return (uint32_t)((p02 * (100 + (1000000ull << 32)) +
                     p13 * (1 + (10000ull << 32))) >>
                    32);
}

static const uint32_t fmt__pow10_u32[9] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};


/* The exponent part at p ("e" or "E", a sign, digits) added to *q: past
 * it, or p when there is none (a lone "e" is not part of the number). */
FMT__SCAN_HOT const char *fmt__scan_exponent(const char *p, const char *end, int64_t *q) {
  if (end - p < 2 || (*p | 0x20) != 'e') return p; /* 'e' or 'E' */
  const char *e = p + 1;
  int exp_neg = 0;
  if (*e == '+' || *e == '-') exp_neg = *e++ == '-';
  if (e == end || !fmt__is_digit(*e)) return p;
  int64_t x = 0;
  for (; e < end && fmt__is_digit(*e); e++)
    if (x < FMT__EXP_CAP) x = x * 10 + (*e - '0');
  *q += exp_neg ? -x : x;
  return e;
}

/* The length of the longest prefix of s[0, len) in JSON number syntax (0 if
 * none), and its w, q, sign.
 *
 * Shaped like fast_float's parse_number_string (fast_float,
 * include/fast_float/ascii_number.h; Lemire, "Number Parsing at a Gigabyte
 * per Second", 2021, section 5), for the common text of at most FMT__W_DIGITS
 * digits: the integer part a byte at a time (it is short in tensor data),
 * the fraction eight bytes at once (fmt__leading_digits8: its run of digits
 * ends in the first word for most texts), then the exponent; w simply takes every digit, leading
 * zeros included (they add nothing to it), with no count per digit. A text
 * with more digits (leading zeros counted) than fit w returns FMT__SCAN_LONG,
 * for scan_number_long, which drops the zeros and the digits past FMT__W_DIGITS
 * (scan_any does both). */
#define FMT__SCAN_LONG ((size_t)-1)
FMT__SCAN_HOT size_t fmt__scan_number(const char *s, size_t len, fmt__scan_t *out) {
  const char *p = s, *end = s + len;
  int neg = p < end && *p == '-';
  p += neg;
  const char *int_start = p;
  if (p == end || !fmt__is_digit(*p)) return 0;
  uint64_t w = (uint64_t)(*p++ - '0');
  while (p < end && fmt__is_digit(*p)) w = w * 10 + (uint64_t)(*p++ - '0');
  if (p - int_start > 1 && *int_start == '0') { /* "01" is "0", then "1" */
    p = int_start + 1;
    w = 0;
  }
  int64_t nd = p - int_start, q = 0;
  if (end - p >= 2 && *p == '.' && fmt__is_digit(p[1])) {
    const char *frac_start = ++p;
    int n = 8;
    while (n == 8 && end - p >= 8) { /* w wraps past FMT__W_DIGITS: then unused */
      uint64_t v = fmt__load8(p);
      n = fmt__leading_digits8(v);
      w = w * fmt__pow10_u32[n] + fmt__leading_value8(v, n);
      p += n;
    }
    if (n == 8) /* the last bytes of the text */
      while (p < end && fmt__is_digit(*p)) w = w * 10 + (uint64_t)(*p++ - '0');
    q = frac_start - p;
    nd += p - frac_start;
  }
  if (nd > FMT__W_DIGITS) return FMT__SCAN_LONG;
  p = fmt__scan_exponent(p, end, &q);
  *out = (fmt__scan_t){.w = w, .q = q, .neg = neg, .truncated = 0};
  return (size_t)(p - s);
}

/* fmt__scan_number for a text with at least FMT__WINDOW bytes readable
 * from s (they need not belong to the number: inside a long array, the
 * array's own text follows), for the common tensor text: an integer part
 * of 1..7 digits, a fraction (the digits of both at most FMT__W_DIGITS),
 * an exponent of 1..7 digits. Returns 0 for any other text (also one that
 * is not a number, or whose number ends early: "1.", "1e+"), which
 * fmt__scan_number then reads; else what it would return.
 *
 * With the bytes known to be there, nothing is checked against the end,
 * and the integer digits, the '.' and the first fraction digits are read
 * as one word: with a = the 8 bytes at the first digit, b = the 8 after
 * it, and the '.' at byte ni of a, a's bytes below ni and b's from ni on
 * are the first 8 digits without the '.'. Their count is b's, for its
 * bytes ni..7: the bytes of b before those are digits and the '.'
 * (0x2e), none of which carries in fmt__nondigits8. So for "-0.123456,"
 * one digit count and one fmt__leading_value8 give w = 123456 and q = -6.
 * Reads at most 36 bytes from s: the sign, 9 bytes (b), two more words of
 * digits (past 8 + 16 digits the text is too long anyway), an exponent's
 * 'e' and sign and its word. */
#define FMT__WINDOW 40
FMT__SCAN_HOT size_t fmt__scan_window(const char *s, fmt__scan_t *out) {
  int neg = *s == '-';
  const char *p = s + neg;
  uint64_t a = fmt__load8(p), a_bad = fmt__nondigits8(a);
  /* no digit first, or more than 7: the general scan */
  if ((a_bad & 0xFF) != 0 || a_bad == 0) return 0;
  int ni = __builtin_ctzll(a_bad) / 8;
  if (ni > 1 && *p == '0') return 0; /* "01" is "0", then "1" */
  uint64_t w;
  int64_t q = 0;
  const char *d; /* past the digits */
  if (p[ni] == '.') {
    uint64_t b = fmt__load8(p + 1), below = (1ull << (8 * ni)) - 1;
    uint64_t bad = fmt__nondigits8(b) & ~below;
    int n = bad ? __builtin_ctzll(bad) / 8 : 8;
    if (n == ni) return 0; /* "1." and no digit: the number is "1" */
    w = fmt__leading_value8((a & below) | (b & ~below), n);
    d = p + n + 1;
    if (n == 8) { /* the digits go on: up to 16, then up to 24 */
      uint64_t v = fmt__load8(d);
      n = fmt__leading_digits8(v);
      w = w * fmt__pow10_u32[n] + fmt__leading_value8(v, n);
      d += n;
      if (n == 8) {
        v = fmt__load8(d);
        n = fmt__leading_digits8(v);
        w = w * fmt__pow10_u32[n] + fmt__leading_value8(v, n);
        d += n;
        if (n == 8 || d - p - 1 > FMT__W_DIGITS) return 0; /* w wrapped: too long */
      }
    }
    q = p + ni + 1 - d;
  } else {
    w = fmt__leading_value8(a, ni);
    d = p + ni;
  }
  if ((*d | 0x20) == 'e') {
    const char *e = d + 1;
    int exp_neg = *e == '-';
    e += exp_neg | (*e == '+');
    uint64_t v = fmt__load8(e);
    int n = fmt__leading_digits8(v);
    if (n == 0 || n == 8) return 0; /* "1e" is "1"; a long exponent */
    int64_t x = fmt__leading_value8(v, n);
    q += exp_neg ? -x : x;
    d = e + n;
  }
  *out = (fmt__scan_t){.w = w, .q = q, .neg = neg, .truncated = 0};
  return (size_t)(d - s);
}

/* Clinger's fast path: w and 10^q (|q| <= 22: 5^22 < 2^53) are exact
 * doubles, so one multiply or divide rounds once, correctly. Needs double
 * arithmetic in double (not x87 extended) and the default rounding mode. */
#if FLT_EVAL_METHOD == 0
#define FMT__CLINGER_W_MAX (1ull << 53)
#else
#define FMT__CLINGER_W_MAX 0ull /* never */
#endif
FMT__SCAN_HOT int fmt__clinger(const fmt__scan_t *d, double *out) {
  static const double exact_pow10[23] = {
      1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  /* -22 <= q <= 22 as one unsigned compare */
  if (d->truncated || d->w > FMT__CLINGER_W_MAX || (uint64_t)(d->q + 22) > 44) return 0;
  double x = (double)d->w;
  *out = d->q < 0 ? x / exact_pow10[-d->q] : x * exact_pow10[d->q];
  return 1;
}

/* Eisel-Lemire's tables (fmt_parse.c, which explains them): 5^q =
 * fmt__pow5_128[q - FMT__POW10_MIN] * 2^fmt__pow5_128_exp2[...], the
 * significand in [2^127, 2^128), for q in [FMT__POW10_MIN, FMT__POW10_MAX]
 * (beyond those, any w of at most 19 digits rounds to 0 or to infinity);
 * built at first use, after which fmt__parse_tables_done is 1 (set with
 * release). For q in [0, FMT__EXACT_Q_MAX] the upper 64 bits are 5^q
 * exactly (5^27 < 2^64). */
#define FMT__POW10_MIN (-342) /* 10^19 * 10^-343 is below half of 2^-1074 */
#define FMT__POW10_MAX 308    /* 10^309 is above DBL_MAX */
#define FMT__POW10_COUNT (FMT__POW10_MAX - FMT__POW10_MIN + 1)
#define FMT__EXACT_Q_MAX 27
__extension__ extern unsigned __int128 fmt__pow5_128[FMT__POW10_COUNT];
extern int16_t fmt__pow5_128_exp2[FMT__POW10_COUNT];
extern atomic_int fmt__parse_tables_done;
void fmt__parse_tables_ready(void); /* builds them, once */

/* The first step of fmt_parse.c's eisel_lemire for a double, inline: the
 * product g of w (normalized) and the upper half of 5^q's 128-bit form,
 * rounded as its round_product(g, hi, exact, ...) rounds it for binary64,
 * where the result is a normal double: exact (hi = 0) for q in
 * [0, FMT__EXACT_Q_MAX], else with the text's value X in (g - 1,
 * g + 2^64 + 1). The bits (no sign) of the correctly rounded w * 10^q, or 0
 * where round_product would answer otherwise or not at all (the tables not
 * built yet, w = 0, q out of the tables, a subnormal or infinite result,
 * X too near a midpoint): then fmt__parse_double_rest reads the text as
 * before. In round_product's terms, with the round bit at 2^(9 + upper)
 * of g's upper word: below it, `low` and g's lower word are `rest`, and
 * rest + 2^64 + 1 > unit (X may reach the midpoint above) is low's bits
 * all ones. (fmt__parse_double_rest's call costs ~100 instructions per
 * number of a %.17g array, this ~35.) */
FMT__SCAN_HOT uint64_t fmt__eisel_lemire_first64(uint64_t w, int64_t q) {
  if (!atomic_load_explicit(&fmt__parse_tables_done, memory_order_acquire) || w == 0 ||
      (uint64_t)(q - FMT__POW10_MIN) > FMT__POW10_MAX - FMT__POW10_MIN)
    return 0;
  int exact = (uint64_t)q <= FMT__EXACT_Q_MAX;
  int lz = __builtin_clzll(w);
  uint64_t t = (uint64_t)(fmt__pow5_128[q - FMT__POW10_MIN] >> 64);
  __extension__ unsigned __int128 g = (unsigned __int128)(w << lz) * t;
  uint64_t g_hi = (uint64_t)(g >> 64), g_lo = (uint64_t)g;
  int upper = (int)(g_hi >> 63);
  /* the biased exponent of g's leading bit (eisel_lemire's field126) */
  int field = 190 + fmt__pow5_128_exp2[q - FMT__POW10_MIN] + (int)q - lz + 1023 + upper;
  if (field < 1 || field > 2046) return 0;
  int shift = 9 + upper; /* the round bit: 53 bits below the leading one */
  uint64_t kept = g_hi >> shift, below = (1ull << shift) - 1, low = g_hi & below;
  uint64_t m = kept >> 1;
  if (!(kept & 1)) {
    if (!exact && low == below) return 0;
  } else if (low == 0 && g_lo == 0) { /* on the midpoint, or just off it */
    if (!exact) return 0;
    m += m & 1; /* a tie: to even */
  } else {
    m++;
  }
  /* The hidden bit of m adds 1 to the field; a carry out of the
   * significand moves to the next binade, possibly infinity. */
  const uint64_t inf_bits = 2047ull << 52;
  uint64_t bits = ((uint64_t)(field - 1) << 52) + m;
  return bits < inf_bits ? bits : inf_bits;
}

/* -v when neg, by flipping the sign bit: a branch on the sign is
 * mispredicted on about every other number of random data (cachegrind's
 * branch simulation on a %.6f N(0,1) array: 0.98 misses per number with
 * the branch, 0.48 without, the same instructions). */
FMT__SCAN_HOT double fmt__with_sign(double v, int neg) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  b ^= (uint64_t)neg << 63;
  memcpy(&v, &b, sizeof b);
  return v;
}

/* ---- a short number whose end is known, with SSE4.1 ---------------------
 * For the array scan's fast loop (numarray.c's parse_run), which knows
 * where each number ends (at the next ','): the double of the text
 * [end - len, end), 1 <= len <= 16, when that text is
 * -?(0|[1-9][0-9]*)(\.[0-9]+)? with at most 15 digits, the common tensor
 * text; 0 for any other (which fmt__parse_double_hot then reads). Such a
 * text is w * 10^q with w < 10^15 < 2^53 and -15 <= q <= 0, Clinger's
 * exact case: the same one division fmt__clinger does, the same double.
 *
 * The 16 bytes ending at `end` are read at once (the 16 - len before the
 * text must be readable; they are not looked at): the text sits in the
 * top len bytes, bit j of a movemask standing for byte j. With fb the
 * first digit's byte (past a '-') and dp the '.''s (16: none), one pshufb
 * with the index fmt__short_index[dp][fb] moves the digits to the top
 * bytes without the '.' and zeroes the rest: digit k from the end in byte
 * 15 - k. Then pmaddubsw, pmaddwd, packusdw and pmaddwd make two 8-digit
 * halves (simdjson's and Lemire's "parse_eight_digits" steps, on 16). */
#if defined(__x86_64__) && defined(__GNUC__)
#define FMT__SHORT_SIMD 1
#include <immintrin.h>
#define FMT__SCAN_SSE41 static inline __attribute__((always_inline, target("sse4.1")))
extern uint8_t fmt__short_index[17][16][16]; /* built with fmt__pow5_128 */
extern int fmt__short_simd; /* this CPU has SSE4.1 and NORM_SIMD is not base */
FMT__SCAN_SSE41 int fmt__parse_short_sse41(const char *end, size_t len, double *out) {
  /* 10^(digits after a '.' in byte dp): 10^(15 - dp), and 1 for none */
  static const double divisor[17] = {1e15, 1e14, 1e13, 1e12, 1e11, 1e10, 1e9, 1e8, 1e7,
                                     1e6,  1e5,  1e4,  1e3,  1e2,  1e1,  1e0, 1e0};
  __m128i t = _mm_loadu_si128((const __m128i *)(const void *)(end - 16));
  __m128i d = _mm_sub_epi8(t, _mm_set1_epi8('0'));
  unsigned digit = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d));
  unsigned dot = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(t, _mm_set1_epi8('.')));
  unsigned zero = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128()));
  unsigned neg = end[-(ptrdiff_t)len] == '-';
  unsigned fb = 16 - (unsigned)len + neg;   /* len >= 1: fb <= 16 */
  unsigned body = 0xFFFFu << fb & 0xFFFFu;  /* the bytes past the sign */
  unsigned dots = dot & body;
  /* A digit first, every byte a digit or the one '.', which is neither
   * first nor last; no "0" followed by a digit; at most 15 digits. All
   * tested at once: one branch (a chain of them missed ~0.4 times a
   * number of %.6f N(0,1) text in cachegrind's branch simulation). fb = 16 (a lone '-') leaves body 0 and
   * fails the first test, ~digit having bit 16. */
  unsigned first = 1u << fb;
  unsigned zero_then_digit = zero & digit >> 1 & first;
  unsigned bad = (~digit & ~dots & (body | first)) | (dots & (dots - 1)) |
                 (dots & (first | 0x8000u)) | zero_then_digit | (first & (dots == 0));
  if (bad != 0) return 0;
  unsigned dp = (unsigned)__builtin_ctz(dots | 0x10000u);
  __m128i idx = _mm_loadu_si128((const __m128i *)(const void *)fmt__short_index[dp][fb]);
  __m128i digits = _mm_shuffle_epi8(d, idx);
  __m128i pairs = _mm_maddubs_epi16(digits, _mm_setr_epi8(10, 1, 10, 1, 10, 1, 10, 1, 10, 1,
                                                          10, 1, 10, 1, 10, 1));
  __m128i quads = _mm_madd_epi16(pairs, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
  __m128i eights = _mm_madd_epi16(_mm_packus_epi32(quads, quads),
                                  _mm_setr_epi16(10000, 1, 10000, 1, 10000, 1, 10000, 1));
  uint64_t halves = (uint64_t)_mm_cvtsi128_si64(eights);
  uint64_t w = (halves & 0xFFFFFFFFu) * 100000000u + (halves >> 32);
  double v = (double)(int64_t)w / divisor[dp];
  *out = fmt__with_sign(v, (int)neg);
  return 1;
}

/* ---- four short numbers at once, with AVX-512 ---------------------------
 * fmt__parse_short_sse41's answer for four numbers of a run, each the text
 * between two of the five ','s at commas[0..4] (past one space after the
 * first of the two), each 1..15 bytes: the four doubles, or 0 when any of
 * the four is not such a text (then each goes its own way). The same
 * grammar and the same arithmetic (w * 10^q with w < 10^15, one correctly
 * rounded division), so the same doubles; only found four at a time.
 *
 * The 16 bytes before each closing ',' fill one 128-bit lane, right-aligned
 * as in fmt__parse_short_sse41, and the byte classes of all four lanes are
 * four 16-bit fields of one 64-bit mask (bit 16k + j: byte j of lane k),
 * tested together with word arithmetic that never carries out of a field:
 * each field's first byte after its opening ',' (from the gaps between the
 * ','s), past a space and a '-' to the first digit. Every field then holds
 * exactly one first digit, which makes `x - ONES` (the bits below it)
 * borrow-free. The digits are then moved as fmt__short_index moves them
 * (the bytes up to the '.' one byte up, over it; the rest zeroed) and
 * summed with the same multiply-adds, per lane; the divisor is 10^(digits
 * after the '.'), from the '.''s position (vplzcntq). Needs AVX-512 F, BW,
 * DQ, VL, CD. */
#define FMT__SCAN_AVX512                                                      \
  static inline __attribute__((always_inline,                                \
                               target("sse4.1,popcnt,bmi,bmi2,avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd")))
extern int fmt__short4_simd; /* this CPU has those and NORM_SIMD allows avx512 */

#define FMT__FIELDS(x) (0x0001000100010001ull * (x)) /* x in each 16-bit field */

/* Each field's bits at or below its highest set bit. */
FMT__SCAN_HOT uint64_t fmt__fill_down16(uint64_t x) {
  x |= x >> 1 & FMT__FIELDS(0x7FFF);
  x |= x >> 2 & FMT__FIELDS(0x3FFF);
  x |= x >> 4 & FMT__FIELDS(0x0FFF);
  x |= x >> 8 & FMT__FIELDS(0x00FF);
  return x;
}

FMT__SCAN_AVX512 int fmt__parse_short4_avx512(const char *const commas[5], double *out) {
  static const double pow10[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  const uint64_t ones = FMT__FIELDS(1), tops = FMT__FIELDS(0x8000);
  /* Field k's text starts 17 - gap bytes into its lane: 2 <= gap <= 16
   * for 1..15 bytes. */
  uint64_t first = 0;
  for (int k = 0; k < 4; k++) {
    size_t gap = (size_t)(commas[k + 1] - commas[k]);
    if (gap - 2 > 14) return 0;
    first |= 1ull << (16 * k + 17 - gap);
  }
  __m512i t = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)(commas[1] - 16)));
  t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)(const void *)(commas[2] - 16)), 1);
  t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)(const void *)(commas[3] - 16)), 2);
  t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)(const void *)(commas[4] - 16)), 3);
  __m512i d = _mm512_sub_epi8(t, _mm512_set1_epi8('0'));
  uint64_t digit = _mm512_cmple_epu8_mask(d, _mm512_set1_epi8(9));
  uint64_t zero = _mm512_testn_epi8_mask(d, d);
  uint64_t space = _mm512_cmpeq_epi8_mask(t, _mm512_set1_epi8(' '));
  uint64_t dot = _mm512_cmpeq_epi8_mask(t, _mm512_set1_epi8('.'));
  uint64_t minus = _mm512_cmpeq_epi8_mask(t, _mm512_set1_epi8('-'));
  uint64_t text = ~(first - ones); /* from the first byte on */
  uint64_t past_space = first + (first & space);
  uint64_t neg = past_space & minus;
  uint64_t first_digit = past_space + neg;
  uint64_t body = text & ~(first_digit - ones); /* from the first digit on */
  uint64_t dots = dot & text; /* (the bytes before the first digit are no '.') */
  uint64_t guarded = dots | tops; /* a bit in every field: */
  uint64_t lowest_dot = guarded & ~(guarded - ones);
  /* The last byte a digit (so none of the steps above carried out of its
   * field), a digit first, nothing but digits and one '.' after it, no "0"
   * followed by a digit. */
  uint64_t bad = (~digit & tops) | (first_digit & ~digit) | (body & ~(digit | dots)) |
                 (dots & ~lowest_dot) | (zero & first_digit & (digit >> 1) & ~tops);
  if (bad != 0) return 0;
  /* the digits: bytes up to the '.' from one byte lower, then only the
   * digits' bytes kept (from the first, or the one after it where the '.'
   * moved it up) */
  uint64_t up_to_dot = fmt__fill_down16(dots);
  uint64_t has_dot = up_to_dot & ones;
  uint64_t first_kept = first_digit + (first_digit & (has_dot * 0xFFFF));
  uint64_t kept = ~(first_kept - ones);
  __m512i moved = _mm512_mask_blend_epi8(up_to_dot, d, _mm512_bslli_epi128(d, 1));
  __m512i digits = _mm512_maskz_mov_epi8(kept, moved);
  __m512i pairs = _mm512_maddubs_epi16(digits, _mm512_set1_epi16(10 | 1 << 8));
  __m512i quads = _mm512_madd_epi16(pairs, _mm512_set1_epi32(100 | 1 << 16));
  __m512i eights = _mm512_madd_epi16(_mm512_packus_epi32(quads, quads),
                                     _mm512_set1_epi32(10000 | 1 << 16));
  /* per lane, its low word: the first eight digits * 10^8 + the last eight */
  __m512i w = _mm512_add_epi64(_mm512_mul_epu32(eights, _mm512_set1_epi64(100000000)),
                               _mm512_srli_epi64(eights, 32));
  __m256i w4 = _mm512_castsi512_si256(
      _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 0, 2, 4, 6), w));
  /* The digits after a '.' at byte j are 15 - j, which is the low four
   * bits of lzcnt(2^j) = 63 - j as a 64-bit word; without a '.', lzcnt(0)
   * = 64, whose low four bits are 0: the divisor's index either way (the
   * permute reads only those bits). */
  __m512i places = _mm512_lzcnt_epi64(_mm512_zextsi256_si512(
      _mm256_cvtepu16_epi64(_mm_cvtsi64_si128((long long)dots))));
  __m512d divisor = _mm512_permutex2var_pd(_mm512_loadu_pd(pow10), places,
                                           _mm512_loadu_pd(pow10 + 8));
  __m256d v = _mm256_div_pd(_mm256_cvtepi64_pd(w4), _mm512_castpd512_pd256(divisor));
  __mmask8 negative = _mm_cmpneq_epi16_mask(_mm_cvtsi64_si128((long long)neg), _mm_setzero_si128());
  v = _mm256_mask_xor_pd(v, negative, v, _mm256_set1_pd(-0.0));
  _mm256_storeu_pd(out, v);
  return 1;
}
#endif

/* The rest of fmt_parse_double, out of line in fmt_parse.c and reached by
 * tail calls with the scan in registers, so that the inline path keeps
 * nothing across a call (cachegrind: 17 instructions of prologue and
 * epilogue per number otherwise): _rest for w * 10^q past Clinger's path
 * (the n bytes at s, at most FMT__W_DIGITS digits), _long for a text of
 * more digits than that (leading zeros counted). Both return the length. */
size_t fmt__parse_double_rest(const char *s, size_t n, double *out, uint64_t w,
                              int64_t q, int neg);
size_t fmt__parse_double_long(const char *s, size_t len, double *out);

/* fmt_parse_double (fmt.h), inline. */
FMT__SCAN_HOT size_t fmt__parse_double_hot(const char *s, size_t len, double *out) {
  fmt__scan_t d;
  size_t n = len >= FMT__WINDOW ? fmt__scan_window(s, &d) : 0;
  if (n == 0) {
    n = fmt__scan_number(s, len, &d);
    if (n == FMT__SCAN_LONG) return fmt__parse_double_long(s, len, out);
    if (n == 0) return 0;
  }
  double v;
  if (!fmt__clinger(&d, &v)) {
    uint64_t bits = fmt__eisel_lemire_first64(d.w, d.q);
    if (bits == 0) return fmt__parse_double_rest(s, n, out, d.w, d.q, d.neg);
    memcpy(&v, &bits, sizeof v);
  }
  *out = fmt__with_sign(v, d.neg);
  return n;
}

#endif
