/* numarray.c -- numeric arrays of a JSON body parsed without jansson (see
 * numarray.h). One pass over an array's text: numarray_extract checks its
 * syntax and shape and parses each number to the exact double on the way;
 * numarray_fill, once the dtype is known, rounds those doubles into the
 * tensor (going back to the text only where a double cannot stand for the
 * text: a midpoint of float32, float16 or bfloat16). */
#include "numarray.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "blocks.h"
#include "cpool.h"
#include "fmt.h"
#include "fmt_scan.h" /* fmt_parse_double inline: a call per number costs */

/* A placeholder is a string: `mark_len` characters \x01 (each written as
 * the escape \u0001 in the skeleton), then the array's index in decimal.
 * mark_len is one more than the longest run of \u0001 escapes in any of
 * the client's strings, so no client string can pose as a placeholder
 * (JSON has no other spelling of \x01 in a string). The longest
 * placeholder: quotes, the escapes and an index of up to 20 digits. */
#define PLACEHOLDER_MARK '\x01'
static size_t placeholder_max(int mark_len) { return 2 + 6 * (size_t)mark_len + 20; }

/* The keys whose array value is tensor data: "data" of a tensor object,
 * and the tensor fields given as bare arrays. "mean" and "var" (batch
 * norm's names for the running statistics) only as members of the body's
 * own object: /v1/moments/merge's parts hold arrays of those names too,
 * deeper, which decode.c reads from jansson's document. */
static const char *const tensor_keys[] = {"data",         "input",       "grad_output",
                                          "residual",     "weight",      "bias",
                                          "running_mean", "running_var"};
static const char *const top_tensor_keys[] = {"mean", "var"};

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Might c start a number: '-' (0x2d) or a digit (0x30..0x39), one compare
 * (a branch on "digit or '-'" is mispredicted on every other number of
 * signed data); '.' and '/' in between pass too, and fmt_parse_double then
 * refuses them, as the general path would. */
static int number_start(char c) { return (unsigned char)(c - '-') <= '9' - '-'; }

/* Where a run of numbers goes on after the number ending at p: past a ','
 * or a ", " (Python's json.dumps separator) when a number's first
 * character follows; NULL when the run ends there. */
static const char *run_next(const char *p, const char *end) {
  if (end - p < 2 || p[0] != ',') return NULL;
  const char *next = p + 1 + (p[1] == ' ');
  return next < end && number_start(*next) ? next : NULL;
}

/* The bit of each ',' among the 64 bytes at p (byte k: bit k). */
static uint64_t comma_bits64(const char *p) {
  uint64_t bits = 0;
#ifdef __SSE2__
  const __m128i comma = _mm_set1_epi8(',');
  for (int k = 0; k < 4; k++) {
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
    bits |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, comma)) << (16 * k);
  }
#else
  for (int k = 0; k < 64; k++) bits |= (uint64_t)(p[k] == ',') << k;
#endif
  return bits;
}

/* A short number's parser given its end (fmt_scan.h's
 * fmt__parse_short_sse41), or none: a stand-in that takes no text. */
typedef int short_parser_t(const char *end, size_t len, double *out);
static inline __attribute__((always_inline)) int no_short_parser(const char *end, size_t len,
                                                                 double *out) {
  (void)end, (void)len, (void)out;
  return 0;
}

/* How far ahead parse_run_avx512 prefetches the text. There each step's
 * address comes from the step before (the next four ','s are
 * looked for where the last four ended), so a line of text not yet in the
 * cache stalls the loop for the whole trip to memory, which is where the
 * daemon's bodies are (http_body.c writes large ones with streaming
 * stores): perf put 32% of the loop's samples on its 64-byte load, and
 * the daemon's speed did not move with the loop's until the text 2 KiB
 * ahead was prefetched (512x2048 JSON under wrk, 16 connections: 70 -> 80
 * req/s; 512 B ahead 78, 1 KiB 80, 2 KiB 81, 4 KiB 79). parse_run_with's
 * loop, whose loads do not wait on its parsing, gains nothing from it (the
 * same bench under NORM_SIMD=avx2: 54.7 req/s either way). */
enum { PARSE_PREFETCH = 2048 };

/* The general step of a run: the number at *pp parsed into v[*count];
 * 1 when the run goes on (*pp is then the next number's first character),
 * 0 when it ends after this number (*pp past it) or the text at *pp is not
 * a number (*bad; see parse_run_with). */
static inline __attribute__((always_inline)) int run_step(const char **pp, const char *end,
                                                          double *v, size_t *count,
                                                          size_t max, int *bad) {
  size_t n = fmt__parse_double_hot(*pp, (size_t)(end - *pp), &v[*count]);
  if (n == 0 || isinf(v[*count])) {
    *bad = 1;
    return 0;
  }
  ++*count;
  *pp += n;
  const char *next = *count < max ? run_next(*pp, end) : NULL;
  if (next == NULL) return 0;
  *pp = next;
  return 1;
}

/* A run of numbers from *pp, a number's first character (as far as
 * number_start can tell): each parsed into v (at most max of them), the
 * next after a ',' or ", " (run_next); *pp is left past the last one
 * parsed. Returns how many were parsed; *bad is 1 when the text at *pp is
 * not a number (or one past float64's range: jansson refuses the
 * document, and says where, decode_json_root).
 *
 * The same answer as parsing one number after another with run_next
 * between them, which the loop's general step does. With a short_parser,
 * the fast loop before it takes the numbers' ends from the ','s of 64
 * bytes at a time (comma_bits64), and a number of at most 16 bytes between
 * two ','s (with 16 bytes of the run before its end, which short_parser
 * reads at once) goes to short_parser, which knows its length and needs no
 * scan: about 30% less time per number than fmt__parse_double_hot for
 * %.6f and shortest-float32 text (bench/codec_bench). Any other number
 * (one that does not end at the next ',': whitespace before it, the run's
 * last) is parsed by the general step, and the fast loop takes over again
 * after it. Without one (no_short_parser) there is no fast loop: the comma
 * scan alone saves nothing (the general step is bound by its instructions,
 * not by the wait for each number's length). Always inline: short_parser
 * is a constant of each caller, inlined too. */
static inline __attribute__((always_inline)) size_t
parse_run_with(const char **pp, const char *end, double *v, size_t max, int *bad,
               short_parser_t *short_parser) {
  const char *p = *pp, *run = *pp;
  size_t count = 0;
  *bad = 0;
  for (;;) {
    /* room for the 64 bytes of the block and a number's window past it */
    const size_t room = 64 + FMT__WINDOW + 2;
    if (short_parser != no_short_parser && (size_t)(end - p) >= room) {
      const char *block = p;
      uint64_t commas = comma_bits64(block);
      for (;;) {
        while (commas == 0 && (size_t)(end - block) >= 64 + room) {
          block += 64;
          commas = comma_bits64(block);
        }
        if (commas == 0) break;
        const char *comma = block + __builtin_ctzll(commas);
        commas &= commas - 1;
        size_t len = (size_t)(comma - p);
        if (len - 1 >= 16 || comma - run < 16 || !short_parser(comma, len, &v[count])) {
          size_t n = fmt__parse_double_hot(p, (size_t)(end - p), &v[count]);
          if (n == 0 || n != len || isinf(v[count])) break;
        }
        count++;
        const char *next = comma + 1 + (comma[1] == ' ');
        if (count == max || !number_start(*next)) {
          *pp = comma;
          return count;
        }
        p = next;
      }
    }
    /* one number, then the fast loop again */
    if (!run_step(&p, end, v, &count, max, bad)) break;
  }
  *pp = p;
  return count;
}

#ifdef FMT__SHORT_SIMD
static __attribute__((target("sse4.1"))) size_t
parse_run_sse41(const char **pp, const char *end, double *v, size_t max, int *bad) {
  return parse_run_with(pp, end, v, max, bad, fmt__parse_short_sse41);
}

/* parse_run_with's answer, four numbers at a time where it can: the fast
 * loop takes the next four ','s from where it stands (one compare of 64
 * bytes) and fmt__parse_short4_avx512 the four numbers before them. Where
 * that fails (a number of more than 15 bytes, an exponent, whitespace
 * before a ','), those four go one at a time as parse_run_sse41 takes
 * them, and so do the first numbers of a run (whose windows start before
 * it) and the last ones of the text (fewer than four ','s in reach).
 * fmt__parse_short4_avx512 gives the doubles fmt__parse_short_sse41 gives
 * for the texts it takes, so the answer is the same, bit for bit.
 * bench/codec_bench, decode of a 512x2048 %.6f float32 body on one thread
 * (warm cache): 7.4 -> 4.5 ns a number.
 */
static __attribute__((
    target("sse4.1,popcnt,bmi,bmi2,avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512cd"))) size_t
parse_run_avx512(const char **pp, const char *end, double *v, size_t max, int *bad) {
  const char *p = *pp, *run = *pp;
  size_t count = 0;
  *bad = 0;
  for (;;) {
    /* room for the 64 bytes compared and a number's window past them */
    const size_t room = 64 + FMT__WINDOW + 2;
    const char *before = NULL; /* the ',' before p, once known */
    int singles = 0;           /* numbers to take one at a time before four again */
    while ((size_t)(end - p) >= room) {
      __builtin_prefetch(p + PARSE_PREFETCH);
      __m512i bytes = _mm512_loadu_si512((const void *)p);
      uint64_t commas = _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(','));
      if (commas == 0) break;
      const char *comma = p + __builtin_ctzll(commas);
      if (singles == 0 && before != NULL && max - count >= 4 &&
          __builtin_popcountll(commas) >= 4 && comma - run >= 16) {
        const char *five[5] = {before};
        for (int k = 1; k < 5; k++, commas &= commas - 1) five[k] = p + __builtin_ctzll(commas);
        if (!fmt__parse_short4_avx512(five, &v[count])) {
          singles = 4;
          continue;
        }
        count += 4;
        comma = five[4];
      } else {
        size_t len = (size_t)(comma - p);
        if (len - 1 >= 16 || comma - run < 16 || !fmt__parse_short_sse41(comma, len, &v[count])) {
          size_t n = fmt__parse_double_hot(p, (size_t)(end - p), &v[count]);
          if (n == 0 || n != len || isinf(v[count])) break;
        }
        count++;
        singles -= singles > 0;
      }
      const char *next = comma + 1 + (comma[1] == ' ');
      if (count == max || !number_start(*next)) {
        *pp = comma;
        return count;
      }
      before = comma;
      p = next;
    }
    /* one number, then the fast loop again */
    if (!run_step(&p, end, v, &count, max, bad)) break;
  }
  *pp = p;
  return count;
}
#endif

static size_t parse_run(const char **pp, const char *end, double *v, size_t max, int *bad) {
#ifdef FMT__SHORT_SIMD
  fmt__parse_tables_ready(); /* fmt__short_simd and the index with them */
  if (fmt__short4_simd)
    return parse_run_avx512(pp, end, v, max, bad);
  if (fmt__short_simd)
    return parse_run_sse41(pp, end, v, max, bad);
#endif
  return parse_run_with(pp, end, v, max, bad, no_short_parser);
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && is_ws(*p)) p++;
  return p;
}

/* Past the string whose opening quote is at p, or NULL when it does not
 * end before `end`. Raises *run to the longest run of \u0001 escapes (the
 * placeholders' mark) the string holds. */
static const char *skip_string(const char *p, const char *end, int *run) {
  int here = 0;
  for (p++; p < end; p++) {
    if (*p == '"') return p + 1;
    if (*p == '\\') {
      if (end - p >= 6 && memcmp(p, "\\u0001", 6) == 0) {
        if (++here > *run) *run = here;
        p += 5;
        continue;
      }
      p++;
    }
    here = 0;
  }
  return NULL;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The text of the JSON string whose opening quote is at p, its escapes
 * decoded, into out (cap bytes, NUL-terminated): its length, or 0 when it
 * does not end before `end`, does not fit, or holds anything but ASCII
 * (what tensor keys and the non-finite spellings are made of). *after is
 * past the closing quote. Keys and spellings are compared decoded, as
 * jansson will read them: "d\u0061ta" is the key data. */
static size_t short_ascii_string(const char *p, const char *end, char *out,
                                 size_t cap, const char **after) {
  size_t n = 0;
  for (p++; p < end && *p != '"'; p++) {
    char c = *p;
    if (c == '\\') {
      if (++p >= end) return 0;
      switch (*p) {
      case '"': case '\\': case '/': c = *p; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        int code = 0;
        for (int k = 1; k <= 4; k++) {
          int h = p + k < end ? hex_digit(p[k]) : -1;
          if (h < 0) return 0;
          code = code * 16 + h;
        }
        if (code == 0 || code > 0x7f) return 0;
        c = (char)code;
        p += 4;
        break;
      }
      default: return 0;
      }
    } else if ((unsigned char)c >= 0x80) {
      return 0;
    }
    if (n + 1 >= cap) return 0;
    out[n++] = c;
  }
  if (p >= end) return 0;
  out[n] = '\0';
  *after = p + 1;
  return n;
}

/* The length of a quoted non-finite spelling at p ("NaN" with its quotes
 * is 5, "\u004eaN" with its quotes 10; the spellings are
 * fmt_parse_nonfinite's), 0 if p is not one; its value in *v. */
static size_t nonfinite_len(const char *p, const char *end, double *v) {
  char text[16]; /* the longest spelling, "+Infinity", fits */
  const char *after;
  if (short_ascii_string(p, end, text, sizeof text, &after) == 0) return 0;
  return fmt_parse_nonfinite(text, v) ? (size_t)(after - p) : 0;
}

/* The parsed values of all arrays taken so far, one growing buffer. */
typedef struct {
  double *v;
  size_t len, cap;
} values_t;

static int push_value(values_t *vals, double d) {
  if (vals->len == vals->cap) {
    size_t want = vals->cap ? 2 * vals->cap : 1024;
    double *grown = blocks_realloc(vals->v, want * sizeof *grown);
    if (grown == NULL) return -1;
    vals->v = grown;
    vals->cap = want;
  }
  vals->v[vals->len++] = d;
  return 0;
}

typedef enum { SCAN_OK, SCAN_REJECTED, SCAN_OOM } scan_result_t;

/* Checks the array whose '[' is at p: non-empty at every level, only
 * numbers and non-finite spellings as leaves, all leaves at one depth, and
 * every array at one depth of the same length; parses each leaf to the
 * exact double, appended to vals. A number is fmt_parse_double's longest
 * prefix in JSON number syntax, so the grammar is checked by requiring a
 * separator (whitespace, ',' or ']') right after it: "01", "1." or "1e"
 * leave a character no separator accepts. On SCAN_OK, *after is the end of
 * the array's text (past ']') and a describes it. */
static scan_result_t scan_array(const char *p, const char *end, numarray_t *a,
                                values_t *vals, const char **after) {
  int64_t open_count[NORM_MAX_RANK]; /* elements so far, per open level */
  int depth = 0, leaf_depth = 0;
  memset(a, 0, sizeof *a);
  a->text = p;
  a->first = vals->len;
open:
  if (depth == NORM_MAX_RANK) return SCAN_REJECTED;
  open_count[depth++] = 0;
  p = skip_ws(p + 1, end);
  if (p >= end || *p == ']') return SCAN_REJECTED; /* empty: the slow path */
value:
  if (p < end && is_ws(*p)) p = skip_ws(p, end);
  if (p >= end) return SCAN_REJECTED;
  if (*p == '[') {
    open_count[depth - 1]++;
    goto open;
  } else if (*p == '"') {
    double d;
    size_t n = nonfinite_len(p, end, &d);
    if (n == 0) return SCAN_REJECTED;
    p += n;
    if (leaf_depth == 0) leaf_depth = depth;
    else if (leaf_depth != depth) return SCAN_REJECTED;
    open_count[depth - 1]++;
    a->count++;
    if (push_value(vals, d) != 0) return SCAN_OOM;
  } else {
    if (leaf_depth == 0) leaf_depth = depth;
    else if (leaf_depth != depth) return SCAN_REJECTED;
    /* A run of numbers each right after a ',' or ", " (the common rows:
     * "1,2,3", and json.dumps' "1, 2, 3"): parse_run, with the depth
     * checked and the counts added once for the run, and the whitespace
     * skipped only where there is some. */
    size_t run_start = vals->len;
    for (;;) {
      if (vals->len == vals->cap) {
        if (push_value(vals, 0) != 0) return SCAN_OOM; /* grows; 0 is replaced */
        vals->len--;
      }
      int bad;
      vals->len += parse_run(&p, end, vals->v + vals->len, vals->cap - vals->len, &bad);
      if (bad) return SCAN_REJECTED;
      /* stopped for room, or where the run ends */
      const char *next = vals->len == vals->cap ? run_next(p, end) : NULL;
      if (next == NULL) break;
      p = next;
    }
    open_count[depth - 1] += (int64_t)(vals->len - run_start);
    a->count += vals->len - run_start;
  }
after_value:
  if (p < end && is_ws(*p)) p = skip_ws(p, end);
  if (p >= end) return SCAN_REJECTED;
  if (*p == ',') {
    p++;
    goto value;
  }
  if (*p != ']') return SCAN_REJECTED;
  p++;
  depth--;
  if (a->shape[depth] == 0) a->shape[depth] = open_count[depth];
  else if (a->shape[depth] != open_count[depth]) return SCAN_REJECTED; /* ragged */
  if (depth > 0) goto after_value;
  a->rank = leaf_depth;
  a->len = (size_t)(p - a->text);
  *after = p;
  return SCAN_OK;
}

/* ---- one big array on every core ------------------------------------------
 * An array whose text is at least split->min_bytes long is scanned in
 * pieces on the compute pool, each into its own values, then checked and
 * joined; the answer (taken or not, and what is taken) is scan_array's for
 * the same text, bit for bit, whatever the cuts:
 *
 * - Where it ends: survey_array counts '[' and ']' and ignores strings. A
 *   taken array's strings are non-finite spellings, which hold no
 *   bracket, comma or quote, so for an array scan_array takes this is its
 *   end; for one it refuses, any end does, since then some piece refuses.
 * - Where it is cut: at a ',' at or past every piece_bytes. In an array
 *   scan_array takes every ',' is a separator. A cut inside a string
 *   (which scan_array refuses: no spelling holds a comma) leaves the piece
 *   before it a string that does not close: it refuses too.
 * - Each piece reads its text with scan_array's grammar and parsers (a
 *   number or spelling ends before the cut's ',' exactly as before it);
 *   between two leaves it notes the ']' and '[' it crossed. Leaves at one
 *   depth mean as many '[' as ']' in every gap, and fewer than the rank
 *   (else the array would have ended); join_pieces checks that, the gaps
 *   across cuts included, and replays the gaps through scan_array's
 *   per-level counts (rectangular, non-empty) on one thread: one step per
 *   row, not per number.
 * So the numbers are parsed by the same code, and an array refused here is
 * refused by scan_array: it stays in the skeleton, and every error is
 * still the slow path's, naming the same first bad element. */

/* The ']' between one leaf and the next (as many '[' follow them). */
typedef struct {
  size_t leaf; /* the leaf after the gap, counted within its piece */
  int closes;
} gap_t;

typedef struct {
  const char *begin, *end; /* after a cut's ',' (the first: the array's
                              '['), up to the next cut (the last: past the
                              array's final ']') */
  size_t leaves; /* its commas + 1: the leaves it holds if the array is
                    taken (every comma lies between two leaves) */
  double *values; /* room for `leaves`, in the joined values */
  size_t count;
  gap_t *gaps; /* only gaps with brackets: one per row, not per number */
  size_t ngaps, gaps_cap;
  int head_opens;  /* '[' before its first leaf (the first piece: the rank) */
  int tail_closes; /* ']' after its last leaf */
  scan_result_t result;
} piece_t;

static int push_gap(piece_t *pc, size_t leaf, int closes) {
  if (pc->ngaps == pc->gaps_cap) {
    size_t want = pc->gaps_cap ? 2 * pc->gaps_cap : 64;
    gap_t *grown = realloc(pc->gaps, want * sizeof *grown);
    if (grown == NULL) return -1;
    pc->gaps = grown;
    pc->gaps_cap = want;
  }
  pc->gaps[pc->ngaps++] = (gap_t){leaf, closes};
  return 0;
}

/* scan_array's grammar over one piece: its leaves into pc->values (more
 * than pc->leaves of them, or fewer, and the array is not one scan_array
 * takes), its bracketed gaps into pc->gaps. The piece's end stands for
 * the cut's ',' (or, for the last, the end of the array). */
static scan_result_t scan_piece(piece_t *pc) {
  const char *p = pc->begin, *end = pc->end;
  int opens = 0, closes = 0;
value:
  if (p < end && is_ws(*p)) p = skip_ws(p, end);
  if (p >= end) return SCAN_REJECTED;
  if (*p == '[') {
    if (++opens > NORM_MAX_RANK) return SCAN_REJECTED;
    p++;
    goto value;
  }
  if (pc->count == pc->leaves) return SCAN_REJECTED;
  if (pc->count == 0) pc->head_opens = opens;
  else if (opens != closes) return SCAN_REJECTED; /* leaves at two depths */
  else if (closes > 0 && push_gap(pc, pc->count, closes) != 0) return SCAN_OOM;
  opens = closes = 0;
  if (*p == '"') {
    double d;
    size_t n = nonfinite_len(p, end, &d);
    if (n == 0) return SCAN_REJECTED;
    p += n;
    pc->values[pc->count++] = d;
  } else { /* a run of numbers, as scan_array's */
    int bad;
    pc->count += parse_run(&p, end, pc->values + pc->count, pc->leaves - pc->count, &bad);
    if (bad) return SCAN_REJECTED;
  }
after_value:
  if (p < end && is_ws(*p)) p = skip_ws(p, end);
  if (p >= end) {
    pc->tail_closes = closes;
    return pc->count == pc->leaves ? SCAN_OK : SCAN_REJECTED;
  }
  if (*p == ',') {
    p++;
    goto value;
  }
  if (*p != ']' || ++closes > NORM_MAX_RANK) return SCAN_REJECTED;
  p++;
  goto after_value;
}

/* The commas in [p, end): with SSE2 (every x86-64) sixteen bytes at a
 * time, each match subtracting -1 from a byte counter that is summed
 * (psadbw) before it can wrap; elsewhere eight at a time, where a byte of
 * w ^ ','s is zero exactly at a comma and ~(((x & 0x7f..) + 0x7f..) | x)
 * sets the top bit of exactly those bytes (no carry crosses a byte). A
 * plain byte loop would cost a fifth of the parse itself. */
static size_t count_commas(const char *p, const char *end) {
  size_t n = 0;
#ifdef __SSE2__
  const __m128i comma = _mm_set1_epi8(',');
  while (end - p >= 16) {
    __m128i counts = _mm_setzero_si128();
    for (int k = 0; k < 255 && end - p >= 16; k++, p += 16) {
      __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
      counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(bytes, comma));
    }
    __m128i sums = _mm_sad_epu8(counts, _mm_setzero_si128());
    n += (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_extract_epi16(sums, 4);
  }
#else
  const uint64_t low7 = 0x7f7f7f7f7f7f7f7full, ones = 0x0101010101010101ull;
  for (; end - p >= 8; p += 8) {
    uint64_t w;
    memcpy(&w, p, sizeof w);
    uint64_t x = w ^ (ones * ',');
    uint64_t zero = ~(((x & low7) + low7) | x) & ~low7;
    n += (size_t)(((zero >> 7) * ones) >> 56);
  }
#endif
  for (; p < end; p++) n += *p == ',';
  return n;
}

/* Where a long array ends and where its commas are, in one pass over its
 * text before it is cut (the pieces then parse straight into their places
 * in the values, knowing how many leaves come before them): the end is
 * found by counting '[' and ']' only (see above), and the commas are
 * counted on the way, their number noted every SURVEY_BLOCK bytes (as far
 * as count_commas' byte counters reach), so that the commas before any
 * cut take at most a block's recount. (It was three passes: memchr for
 * the ']', again for the '[' before it, and a count per piece.) */
enum { SURVEY_BLOCK = 255 * 16 };
typedef struct {
  const char *text;  /* the array's '[' */
  const char *close; /* past its ']' */
  size_t commas;     /* in [text, close) */
  size_t *prefix;    /* prefix[k]: the commas in the first k blocks */
  size_t blocks;     /* entries of prefix: close lies in the last block */
} survey_t;

/* One block of survey_array: the commas of [b, b + n) added to *commas and
 * its brackets to *depth, up to the ']' that brings it to 0. Returns past
 * that ']', or NULL where the block holds none (*depth is -1 when the
 * brackets nest deeper than scan_array reads). Sixteen bytes at a time
 * while they hold no bracket (one per row), bytewise through those that
 * do. n <= SURVEY_BLOCK: the byte counters cannot wrap. */
static const char *survey_block(const char *b, size_t n, int *depth, size_t *commas) {
  const char *p = b, *end = b + n;
  size_t found = 0;
  while (p < end) {
#ifdef __SSE2__
    const __m128i comma = _mm_set1_epi8(','), open = _mm_set1_epi8('['),
                  close = _mm_set1_epi8(']');
    __m128i counts = _mm_setzero_si128();
    for (; end - p >= 16; p += 16) {
      __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
      __m128i brackets =
          _mm_or_si128(_mm_cmpeq_epi8(bytes, open), _mm_cmpeq_epi8(bytes, close));
      if (_mm_movemask_epi8(brackets) != 0) break;
      counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(bytes, comma));
    }
    __m128i sums = _mm_sad_epu8(counts, _mm_setzero_si128());
    found += (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_extract_epi16(sums, 4);
#endif
    const char *stop = end - p > 16 ? p + 16 : end;
    for (; p < stop; p++) {
      if (*p == ',') {
        found++;
      } else if (*p == '[') {
        if (++*depth > NORM_MAX_RANK) {
          *depth = -1;
          return NULL;
        }
      } else if (*p == ']' && --*depth == 0) {
        *commas += found;
        return p + 1;
      }
    }
  }
  *commas += found;
  return NULL;
}

/* Surveys the array whose '[' is at p: 0, or 1 when no ']' closes it
 * before end (or it nests too deep), -1 when out of memory. */
static int survey_array(const char *p, const char *end, survey_t *s) {
  size_t cap = 0;
  int depth = 0;
  memset(s, 0, sizeof *s);
  s->text = p;
  for (const char *b = p; b < end; b += SURVEY_BLOCK) {
    if (s->blocks == cap) {
      cap = cap ? 2 * cap : 64;
      size_t *grown = realloc(s->prefix, cap * sizeof *grown);
      if (grown == NULL) return -1;
      s->prefix = grown;
    }
    s->prefix[s->blocks++] = s->commas;
    size_t n = (size_t)(end - b) < SURVEY_BLOCK ? (size_t)(end - b) : SURVEY_BLOCK;
    s->close = survey_block(b, n, &depth, &s->commas);
    if (s->close != NULL) return 0;
    if (depth < 0) break;
  }
  return 1;
}

/* The commas in [s->text, at), at a ',' before s->close. */
static size_t survey_commas_before(const survey_t *s, const char *at) {
  size_t k = (size_t)(at - s->text) / SURVEY_BLOCK;
  return s->prefix[k] + count_commas(s->text + k * SURVEY_BLOCK, at);
}

static int scan_pieces(void *arg, size_t begin, size_t end) {
  piece_t *pieces = arg;
  for (size_t i = begin; i < end; i++) pieces[i].result = scan_piece(&pieces[i]);
  return 0;
}

/* One gap of `closes` brackets before leaf `leaf` (of the whole array)
 * through scan_array's counts: the innermost level's elements are leaves
 * since the last gap, each level closed must have the length of the
 * first one closed at its depth. */
static int replay_gap(numarray_t *a, int64_t *count, size_t *last_leaf, size_t leaf,
                      int closes) {
  int rank = a->rank;
  count[rank - 1] += (int64_t)(leaf - *last_leaf);
  *last_leaf = leaf;
  for (int d = rank - 1; d >= rank - closes; d--) {
    if (a->shape[d] == 0) a->shape[d] = count[d];
    else if (a->shape[d] != count[d]) return -1; /* ragged */
    count[d] = 0;
    if (d > 0) count[d - 1]++;
  }
  return 0;
}

/* The pieces' verdict on the whole array: SCAN_OK with a's rank and
 * shape. */
static scan_result_t join_pieces(const piece_t *pieces, size_t n, numarray_t *a) {
  for (size_t i = 0; i < n; i++)
    if (pieces[i].result != SCAN_OK) return pieces[i].result;
  int rank = pieces[0].head_opens;
  int64_t count[NORM_MAX_RANK] = {0};
  size_t last_leaf = 0, leaves = 0;
  a->rank = rank;
  for (size_t i = 0; i < n; i++) {
    const piece_t *pc = &pieces[i];
    if (i > 0) { /* the gap across the cut */
      int closes = pieces[i - 1].tail_closes;
      if (closes != pc->head_opens || closes >= rank) return SCAN_REJECTED;
      if (closes > 0 && replay_gap(a, count, &last_leaf, leaves, closes) != 0)
        return SCAN_REJECTED;
    }
    for (size_t g = 0; g < pc->ngaps; g++)
      if (pc->gaps[g].closes >= rank ||
          replay_gap(a, count, &last_leaf, leaves + pc->gaps[g].leaf,
                     pc->gaps[g].closes) != 0)
        return SCAN_REJECTED;
    leaves += pc->count;
  }
  if (pieces[n - 1].tail_closes != rank ||
      replay_gap(a, count, &last_leaf, leaves, rank) != 0)
    return SCAN_REJECTED;
  return SCAN_OK;
}

/* scan_array's answer for the array at p, found on the pool when its text
 * is long; see above. The survey counts the commas first, so each piece
 * parses straight into its place in vals. */
static scan_result_t scan_array_split(const char *p, const char *end, numarray_t *a,
                                      values_t *vals, const char **after,
                                      const numarray_split_t *split) {
  survey_t s = {0};
  int surveyed = (size_t)(end - p) >= split->min_bytes ? survey_array(p, end, &s) : 1;
  if (surveyed < 0) {
    free(s.prefix);
    return SCAN_OOM;
  }
  const char *close = s.close;
  size_t len = surveyed == 0 ? (size_t)(close - p) : 0;
  cpool_t *pool = split->pool;
  if (len >= split->min_bytes && pool == NULL) pool = cpool_shared();
  size_t threads = (size_t)cpool_threads(pool);
  size_t piece_bytes = split->piece_bytes ? split->piece_bytes
                                          : len / (2 * threads) + 1;
  if (len < split->min_bytes || len < 2 * piece_bytes || threads < 2) {
    free(s.prefix);
    return scan_array(p, end, a, vals, after);
  }

  piece_t *pieces = calloc(len / piece_bytes + 1, sizeof *pieces);
  scan_result_t result = SCAN_OOM;
  size_t n = 0;
  if (pieces == NULL) goto done;
  /* piece i holds the leaves between its cut and the last: the commas
   * before its end less those before the last end (that comma included),
   * plus one */
  for (size_t before_last = 0; n == 0 || pieces[n - 1].end != close; n++) {
    const char *begin = n ? pieces[n - 1].end + 1 : p;
    const char *target = p + (n + 1) * piece_bytes;
    if (target < begin) target = begin; /* the last cut was past it */
    const char *cut = target < close ? memchr(target, ',', (size_t)(close - target)) : NULL;
    size_t before = cut ? survey_commas_before(&s, cut) : s.commas;
    pieces[n].begin = begin;
    pieces[n].end = cut ? cut : close;
    pieces[n].leaves = n ? before - before_last : before + 1;
    before_last = before;
  }
  size_t total = s.commas + 1;
  if (vals->cap - vals->len < total) {
    double *grown = blocks_realloc(vals->v, (vals->len + total) * sizeof *grown);
    if (grown == NULL) goto done;
    vals->v = grown;
    vals->cap = vals->len + total;
  }
  for (size_t i = 0, at = vals->len; i < n; at += pieces[i++].leaves)
    pieces[i].values = vals->v + at;
  cpool_run(pool, n, n, scan_pieces, pieces);
  memset(a, 0, sizeof *a);
  result = join_pieces(pieces, n, a);
  if (result != SCAN_OK) goto done;
  a->text = p;
  a->len = len;
  a->count = total;
  a->first = vals->len;
  vals->len += total;
  *after = close;
done:
  for (size_t i = 0; pieces != NULL && i < n; i++) free(pieces[i].gaps);
  free(pieces);
  free(s.prefix);
  return result;
}

/* Is the JSON string whose opening quote is at s the key of tensor data,
 * in an object at this depth (1: the body's own)? */
static int is_tensor_key(const char *s, const char *end, int depth) {
  char key[16]; /* longer than the longest tensor key */
  const char *after;
  if (short_ascii_string(s, end, key, sizeof key, &after) == 0) return 0;
  for (size_t i = 0; i < sizeof tensor_keys / sizeof tensor_keys[0]; i++)
    if (strcmp(tensor_keys[i], key) == 0) return 1;
  for (size_t i = 0; depth == 1 && i < sizeof top_tensor_keys / sizeof top_tensor_keys[0]; i++)
    if (strcmp(top_tensor_keys[i], key) == 0) return 1;
  return 0;
}

static int push_array(numarrays_t *out, const numarray_t *a, size_t *cap) {
  if (out->count == *cap) {
    size_t want = *cap ? 2 * *cap : 8;
    numarray_t *grown = realloc(out->arrays, want * sizeof *grown);
    if (grown == NULL) return -1;
    out->arrays = grown;
    *cap = want;
  }
  out->arrays[out->count++] = *a;
  return 0;
}

/* Room in out->skeleton for `more` bytes past its length (it grows by
 * doubling). */
static int skeleton_room(numarrays_t *out, size_t *cap, size_t more) {
  if (out->skeleton_len + more <= *cap) return 0;
  size_t want = 2 * (out->skeleton_len + more) + 64;
  char *grown = realloc(out->skeleton, want);
  if (grown == NULL) return -1;
  out->skeleton = grown;
  *cap = want;
  return 0;
}

/* One pass of numarray_extract with placeholders of mark_len marks; the
 * longest run of \u0001 escapes in the body's strings goes to *run. */
static int extract(const char *json, size_t len, int mark_len,
                   const numarray_split_t *split, numarrays_t *out, int *run) {
  memset(out, 0, sizeof *out);
  out->mark_len = mark_len;
  *run = 0;
  const char *p = json, *end = json + len;
  const char *copied = json;            /* the skeleton holds json up to here */
  const char *last = NULL, *key = NULL; /* opening quotes: the last string, the key */
  size_t cap = 0, skeleton_cap = 0;
  int depth = 0;
  values_t vals = {0};
  while (p < end) {
    char c = *p;
    if (c == '"') {
      const char *after = skip_string(p, end, run);
      if (after == NULL) break; /* unterminated: jansson will say so */
      last = p;
      key = NULL;
      p = after;
      continue;
    }
    if (c == ':') {
      key = last;
      last = NULL;
      p++;
      continue;
    }
    if (is_ws(c)) {
      p++;
      continue;
    }
    numarray_t a;
    const char *after = p; /* set by a scan that takes the array */
    scan_result_t scanned = SCAN_REJECTED;
    size_t kept = vals.len;
    if (c == '[' && key != NULL && is_tensor_key(key, end, depth))
      scanned = scan_array_split(p, end, &a, &vals, &after, split);
    if (scanned == SCAN_OOM) goto oom;
    if (scanned == SCAN_OK) {
      /* A placeholder may be longer than the array it replaces ("[1]"). */
      if (skeleton_room(out, &skeleton_cap,
                        (size_t)(p - copied) + placeholder_max(mark_len)) != 0 ||
          push_array(out, &a, &cap) != 0)
        goto oom;
      memcpy(out->skeleton + out->skeleton_len, copied, (size_t)(p - copied));
      out->skeleton_len += (size_t)(p - copied);
      char *w = out->skeleton + out->skeleton_len;
      *w++ = '"';
      for (int m = 0; m < mark_len; m++, w += 6) memcpy(w, "\\u0001", 6);
      w += sprintf(w, "%zu\"", out->count - 1);
      out->skeleton_len = (size_t)(w - out->skeleton);
      if (depth + a.rank > out->depth) out->depth = depth + a.rank;
      copied = p = after;
    } else {
      vals.len = kept; /* drops the values of an array not taken */
      if (c == '[' || c == '{') {
        if (++depth > out->depth) out->depth = depth;
      } else if (c == ']' || c == '}') {
        depth--;
      }
      p++;
    }
    key = last = NULL;
  }
  if (out->skeleton != NULL) {
    if (skeleton_room(out, &skeleton_cap, (size_t)(end - copied) + 1) != 0) goto oom;
    memcpy(out->skeleton + out->skeleton_len, copied, (size_t)(end - copied));
    out->skeleton_len += (size_t)(end - copied);
    out->skeleton[out->skeleton_len] = '\0';
  }
  out->values = vals.v; /* the arrays' values, now that it moves no more */
  for (size_t i = 0; i < out->count; i++)
    out->arrays[i].values = out->values + out->arrays[i].first;
  return 0;
oom:
  blocks_free(vals.v);
  numarray_free(out);
  return -1;
}

int numarray_extract_split(const char *json, size_t len,
                           const numarray_split_t *split, numarrays_t *out) {
  int run;
  if (extract(json, len, 1, split, out, &run) != 0) return -1;
  if (run == 0) return 0;
  /* A client string holds the mark: again with a longer one (rare, so
   * the common body is scanned once). */
  numarray_free(out);
  return extract(json, len, run + 1, split, out, &run);
}

static numarray_split_t default_split = {.min_bytes = NUMARRAY_SPLIT_BYTES};

void numarray_split_configure(const numarray_split_t *split) {
  static const numarray_split_t initial = {.min_bytes = NUMARRAY_SPLIT_BYTES};
  default_split = split != NULL ? *split : initial;
}

int numarray_extract(const char *json, size_t len, numarrays_t *out) {
  return numarray_extract_split(json, len, &default_split, out);
}

void numarray_free(numarrays_t *a) {
  free(a->skeleton);
  blocks_free(a->values);
  free(a->arrays);
  memset(a, 0, sizeof *a);
}

const numarray_t *numarray_of(const numarrays_t *a, const json_t *v) {
  if (a == NULL || a->count == 0 || !json_is_string(v)) return NULL;
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  size_t marks = (size_t)a->mark_len;
  if (n <= marks) return NULL;
  for (size_t i = 0; i < marks; i++)
    if (s[i] != PLACEHOLDER_MARK) return NULL;
  size_t index = 0;
  for (size_t i = marks; i < n; i++) {
    if (!is_digit(s[i]) || index > a->count) return NULL;
    index = index * 10 + (size_t)(s[i] - '0');
  }
  return index < a->count ? &a->arrays[index] : NULL;
}

/* The elements straight from the text, for a float32, float16 or
 * bfloat16 array whose doubles cannot all stand for it: one of them is a
 * midpoint between two neighbours in the dtype (fmt_*_from_double_exact),
 * where rounding the double again could round the other way than the
 * text. */
static void fill_from_text(const numarray_t *a, norm_tensor_t *t) {
  const char *p = a->text, *end = a->text + a->len;
  size_t i = 0;
  while (p < end) {
    char c = *p;
    if (c == '[' || c == ']' || c == ',' || is_ws(c)) {
      p++;
      continue;
    }
    size_t left = (size_t)(end - p);
    if (c == '"') { /* a non-finite spelling: its double is exact */
      norm_tensor_set(t, i, a->values[i]);
      p = memchr(p + 1, '"', left - 1) + 1;
    } else if (t->dtype == NORM_F32) {
      p += fmt_parse_float(p, left, (float *)t->data + i);
    } else if (t->dtype == NORM_F16) {
      p += fmt_parse_f16(p, left, (uint16_t *)t->data + i);
    } else {
      p += fmt_parse_bf16(p, left, (uint16_t *)t->data + i);
    }
    i++;
  }
}

/* f[i] = (float)v[i] while fmt_float_from_double_exact(v[i]); returns how
 * many (n: all). With SSE2 (every x86-64) four at a time: the same test on
 * the bits (a midpoint's last 29 bits, which lie in the low dword, so a
 * 32-bit compare of the masked values is the 64-bit one; a magnitude below
 * 2^-126 and not 0) and cvtpd2ps, which rounds as the cast does. The
 * scalar loop cost ~1.3 ns per number, 3% of the daemon's CPU under
 * 512x2048 float32 JSON requests. */
static size_t fill_f32(const double *v, float *f, size_t n) {
  size_t i = 0;
#ifdef __SSE2__
  const __m128i low29 = _mm_set1_epi64x((1ll << 29) - 1), mid = _mm_set1_epi64x(1ll << 28);
  const __m128d sign = _mm_set1_pd(-0.0), tiny = _mm_set1_pd(0x1p-126), zero = _mm_setzero_pd();
  for (; i + 4 <= n; i += 4) {
    __m128d a = _mm_loadu_pd(v + i), b = _mm_loadu_pd(v + i + 2);
    __m128i ma = _mm_cmpeq_epi32(_mm_and_si128(_mm_castpd_si128(a), low29), mid);
    __m128i mb = _mm_cmpeq_epi32(_mm_and_si128(_mm_castpd_si128(b), low29), mid);
    __m128d aa = _mm_andnot_pd(sign, a), ab = _mm_andnot_pd(sign, b);
    __m128d sa = _mm_and_pd(_mm_cmplt_pd(aa, tiny), _mm_cmpneq_pd(aa, zero));
    __m128d sb = _mm_and_pd(_mm_cmplt_pd(ab, tiny), _mm_cmpneq_pd(ab, zero));
    /* the low dword of each lane says midpoint (the high one, masked to
     * zero, always compares equal) */
    int bad = ((_mm_movemask_ps(_mm_castsi128_ps(ma)) | _mm_movemask_ps(_mm_castsi128_ps(mb))) & 5) |
              _mm_movemask_pd(_mm_or_pd(sa, sb));
    if (bad) break;
    _mm_storeu_ps(f + i, _mm_movelh_ps(_mm_cvtpd_ps(a), _mm_cvtpd_ps(b)));
  }
#endif
  for (; i < n; i++) {
    if (!fmt_float_from_double_exact(v[i])) return i;
    f[i] = (float)v[i];
  }
  return n;
}

void numarray_fill(const numarray_t *a, norm_tensor_t *t) {
  const double *v = a->values;
  switch (t->dtype) {
  case NORM_F64:
    memcpy(t->data, v, a->count * sizeof *v);
    return;
  case NORM_F32:
    if (fill_f32(v, t->data, a->count) < a->count) fill_from_text(a, t);
    return;
  case NORM_F16: {
    uint16_t *h = t->data;
    for (size_t i = 0; i < a->count; i++) {
      if (!fmt_f16_from_double_exact(v[i])) {
        fill_from_text(a, t);
        return;
      }
      h[i] = norm_f16_from_double(v[i]);
    }
    return;
  }
  case NORM_BF16: {
    uint16_t *h = t->data;
    for (size_t i = 0; i < a->count; i++) {
      if (!fmt_bf16_from_double_exact(v[i])) {
        fill_from_text(a, t);
        return;
      }
      h[i] = norm_bf16_from_double(v[i]);
    }
    return;
  }
  case NORM_DTYPE_COUNT: /* not a dtype: decode_tensor never makes one */
    return;
  }
}
