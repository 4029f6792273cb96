/* http_clock.c -- each connection's request clock (conn_t) and the sweeper
 * thread that cuts requests still arriving past request_timeout_s, and
 * trims the heap once idle.
 *
 * DESIGN. MHD's connection timeout is an idle timeout: a client sending one
 * byte every few seconds is never idle. So each connection carries a request
 * clock, and the sweeper looks at every connection four times a second: a
 * request still arriving request_timeout_s after its first byte is cut
 * (shutdown() of the socket, which MHD then sees and closes; the handler
 * also checks the deadline on every body chunk). No answer is sent on a
 * cut: MHD 0.9 cannot queue a response before the whole body is in, and the
 * sweeper does not own the socket's output. (A client that leaves, FIN,
 * mid-request or between requests needs no sweep: MHD's poll loop reads
 * the end of the stream and closes the connection itself.)
 */
#include <malloc.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "http_internal.h"
#include "log.h"

enum { SWEEP_MS = 250, IDLE_TRIM_MS = 1000 };

long long http__now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static long long clock_make(int phase, long long since_ms) {
  return since_ms * 8 + phase;
}
static int clock_phase(long long c) { return (int)(c & 7); }
static long long clock_since(long long c) { return c >> 3; }

/* glibc's struct tcp_info stops at tcpi_total_retrans; the kernel's goes
 * on (include/uapi/linux/tcp.h, an append-only ABI; tcpi_bytes_received
 * since Linux 4.1). <linux/tcp.h> clashes with <netinet/tcp.h>, which uv.h
 * includes, hence the tail spelled out here. */
typedef struct {
  struct tcp_info base;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked;
  uint64_t bytes_received;
} tcp_info_ext_t;
_Static_assert(offsetof(tcp_info_ext_t, bytes_received) == 128,
               "struct tcp_info no longer matches the kernel's layout");

/* What the kernel knows of a connection: the bytes received so far and
 * (fin not NULL) whether the peer has sent its FIN. -1 when it cannot
 * tell. */
static int tcp_look(MHD_socket fd, unsigned long long *rx, int *fin) {
  tcp_info_ext_t ti;
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < sizeof ti)
    return -1;
  *rx = ti.bytes_received;
  if (fin) *fin = ti.base.tcpi_state == TCP_CLOSE_WAIT;
  return 0;
}

/* MHD's connection notifications: link a new connection in server.conns
 * with its clock running if request bytes came before accept, and unlink
 * a closed one. */
void http__on_connection(void *cls, struct MHD_Connection *c,
                         void **socket_context,
                         enum MHD_ConnectionNotificationCode code) {
  server_t *srv = cls;
  conn_t *conn = *socket_context;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL || (conn = calloc(1, sizeof *conn)) == NULL)
      return; /* then only MHD's idle timeout applies to it */
    unsigned long long rx = 0;
    conn->fd = ci->connect_fd;
    if (tcp_look(conn->fd, &rx, NULL) != 0) rx = 0;
    atomic_init(&conn->clock, clock_make(rx > 0 ? CONN_RECEIVING : CONN_WAITING,
                                         http__now_ms()));
    atomic_init(&conn->rx_mark, rx);
    pthread_mutex_lock(&srv->conns_lock);
    conn->next = srv->conns;
    if (srv->conns) srv->conns->prev = conn;
    srv->conns = conn;
    pthread_mutex_unlock(&srv->conns_lock);
    *socket_context = conn;
    return;
  }
  if (conn == NULL) return;
  pthread_mutex_lock(&srv->conns_lock);
  if (conn->prev)
    conn->prev->next = conn->next;
  else
    srv->conns = conn->next;
  if (conn->next) conn->next->prev = conn->prev;
  pthread_mutex_unlock(&srv->conns_lock);
  free(conn);
  *socket_context = NULL;
}

static int past_deadline(request_state_t *rs, long long now) {
  if (rs->deadline_ms == 0 || now <= rs->deadline_ms) return 0;
  rs->timed_out = 1;
  return 1;
}

/* The request's headers are in: its deadline counts from its first byte,
 * as the sweeper saw it (at most a sweep late), else from now. -1 when the
 * deadline has passed or the sweeper cut the connection. */
int http__deadline_begin(request_state_t *rs) {
  long long now = http__now_ms(), since = now;
  conn_t *conn = rs->conn;
  if (conn != NULL) {
    long long c = atomic_load(&conn->clock);
    for (;;) {
      int phase = clock_phase(c);
      if (phase >= CONN_CUT_LATE) return -1;
      if (phase == CONN_RECEIVING) {
        since = clock_since(c);
        break;
      }
      if (atomic_compare_exchange_weak(&conn->clock, &c,
                                       clock_make(CONN_RECEIVING, now)))
        break;
    }
  }
  int64_t timeout_s = rs->srv->cfg->request_timeout_s;
  rs->deadline_ms = timeout_s > 0 ? since + timeout_s * 1000 : 0;
  return past_deadline(rs, now) ? -1 : 0;
}

/* The whole request is in, or is answered before its body is read: its
 * clock stops. -1 when it came too late or the sweeper cut it meanwhile. */
int http__request_received(request_state_t *rs) {
  if (rs->received) return 0;
  if (past_deadline(rs, http__now_ms())) return -1;
  if (rs->conn != NULL) {
    long long c = atomic_load(&rs->conn->clock);
    do {
      if (clock_phase(c) >= CONN_CUT_LATE) return -1;
    } while (!atomic_compare_exchange_weak(&rs->conn->clock, &c,
                                           clock_make(CONN_BUSY, 0)));
  }
  rs->received = 1;
  return 0;
}

/* The request is over; the connection waits for the next one (or closes).
 * Records the bytes received so far, so that the sweeper can tell when the
 * next request's first byte comes. Returns the phase it leaves. */
int http__request_over(request_state_t *rs) {
  conn_t *conn = rs->conn;
  if (conn == NULL) return CONN_BUSY;
  unsigned long long rx = 0;
  if (tcp_look(conn->fd, &rx, NULL) != 0) rx = ~0ULL; /* sweeper: unknown */
  atomic_store(&conn->rx_mark, rx);
  long long c = atomic_load(&conn->clock);
  do {
    if (clock_phase(c) >= CONN_CUT_LATE) return clock_phase(c);
  } while (!atomic_compare_exchange_weak(
      &conn->clock, &c, clock_make(CONN_WAITING, http__now_ms())));
  return clock_phase(c);
}

/* Moves the clock from c to a cut (CONN_CUT_*) and shuts the socket down
 * both ways; MHD sees that, closes the connection and ends its request.
 * 0, or -1 when the clock had moved from c meanwhile. */
static int conn_cut(conn_t *conn, long long c, int why, long long now) {
  if (!atomic_compare_exchange_strong(&conn->clock, &c, clock_make(why, now)))
    return -1;
  shutdown(conn->fd, SHUT_RDWR);
  return 0;
}

/* A body chunk past the deadline is cut as the sweeper does: MHD_NO would
 * close too, but MHD would log an "application error" for every slow
 * client. */
int http__chunk_late(request_state_t *rs) {
  long long now = http__now_ms();
  if (!past_deadline(rs, now)) return 0;
  if (rs->conn == NULL) return -1;
  long long clk = atomic_load(&rs->conn->clock);
  if (clock_phase(clk) == CONN_RECEIVING)
    conn_cut(rs->conn, clk, CONN_CUT_LATE, now);
  return 1;
}

/* One look at one connection, conns_lock held (so conn->fd is open).
 * Returns 1 when it cut the connection (its request came too late). */
static int sweep_one(const server_t *srv, conn_t *conn, long long now) {
  long long timeout_ms = srv->cfg->request_timeout_s * 1000;
  long long c = atomic_load(&conn->clock);
  int phase = clock_phase(c);
  if (timeout_ms <= 0 || (phase != CONN_WAITING && phase != CONN_RECEIVING))
    return 0;
  unsigned long long rx = 0;
  if (phase == CONN_WAITING && (tcp_look(conn->fd, &rx, NULL) != 0 ||
                                rx > atomic_load(&conn->rx_mark))) {
    /* A request's first byte came since the previous look. Its clock
     * starts now: never before the byte, at most one sweep after it. */
    long long armed = clock_make(CONN_RECEIVING, now);
    if (!atomic_compare_exchange_strong(&conn->clock, &c, armed))
      return 0; /* it moved meanwhile: look again next time */
    c = armed;
    phase = CONN_RECEIVING;
  }
  return phase == CONN_RECEIVING && now - clock_since(c) > timeout_ms &&
         conn_cut(conn, c, CONN_CUT_LATE, now) == 0;
}

/* Big buffers (bodies, tensors, replies) stay in malloc's heap between
 * requests (main.c raises the mmap threshold: no page faults and zeroing
 * per request); once no compute request has been accepted or answered for
 * IDLE_TRIM_MS, and none is in flight, the heap's free memory goes back to
 * the system. */
static void trim_when_idle(server_t *srv, long long now) {
  long long last = atomic_load(&srv->last_busy_ms);
  if (last > srv->trimmed_ms && now - last >= IDLE_TRIM_MS &&
      atomic_load(&srv->accepted) == 0) {
    malloc_trim(0);
    srv->trimmed_ms = now;
  }
}

static void *sweeper_main(void *arg) {
  server_t *srv = arg;
  pthread_mutex_lock(&srv->conns_lock);
  while (!srv->sweeper_stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += SWEEP_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&srv->sweeper_wake, &srv->conns_lock, &until);
    if (srv->sweeper_stop) break;
    long long now = http__now_ms();
    trim_when_idle(srv, now);
    int late = 0;
    for (conn_t *conn = srv->conns; conn != NULL; conn = conn->next)
      late += sweep_one(srv, conn, now);
    if (late && log_enabled(LOG_INFO)) {
      pthread_mutex_unlock(&srv->conns_lock);
      log_msg(LOG_INFO,
              "closed %d connection%s: request not in within "
              "request_timeout_s (%llds)",
              late, late == 1 ? "" : "s",
              (long long)srv->cfg->request_timeout_s);
      pthread_mutex_lock(&srv->conns_lock);
    }
  }
  pthread_mutex_unlock(&srv->conns_lock);
  return NULL;
}

int http__sweeper_start(server_t *srv) {
  if (pthread_create(&srv->sweeper, NULL, sweeper_main, srv) != 0) return -1;
  srv->sweeper_running = 1;
  return 0;
}

void http__sweeper_stop(server_t *srv) {
  if (!srv->sweeper_running) return;
  pthread_mutex_lock(&srv->conns_lock);
  srv->sweeper_stop = 1;
  pthread_cond_signal(&srv->sweeper_wake);
  pthread_mutex_unlock(&srv->conns_lock);
  pthread_join(srv->sweeper, NULL);
  srv->sweeper_running = 0;
}

/* Connections with a request on its way in that no handler has seen yet:
 * its first bytes came (perhaps since the sweeper's last look) and it has
 * not been cut. The drain waits for these too, so that such a request is
 * answered (503 draining, from its headers) rather than reset by the exit. */
long http__requests_arriving(server_t *srv) {
  long n = 0;
  pthread_mutex_lock(&srv->conns_lock);
  for (conn_t *conn = srv->conns; conn != NULL; conn = conn->next) {
    int phase = clock_phase(atomic_load(&conn->clock));
    unsigned long long rx = 0;
    int fin = 0;
    if (phase == CONN_RECEIVING ||
        (phase == CONN_WAITING && tcp_look(conn->fd, &rx, &fin) == 0 && !fin &&
         rx > atomic_load(&conn->rx_mark)))
      n++;
  }
  pthread_mutex_unlock(&srv->conns_lock);
  return n;
}
