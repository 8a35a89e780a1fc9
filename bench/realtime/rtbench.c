// rtbench: load generator for Parley's realtime socket (/v1/socket).
//
//   rtbench throughput --port P --tokens FILE [--pairs 500] [--window 8] [--rate R] [--size 100]
//                      [--warmup 5] [--duration 20] [--ack-every 32]
//       Pair i is a sender (token line 2i) and a recipient (line 2i+1), each its own connection.
//       Without --rate every sender keeps `window` message.send requests in flight to its
//       recipient (closed loop: the highest throughput); with --rate the senders together send R
//       messages/s at a steady pace (open loop: latency at that load), at most 256 in flight
//       each. Recipients acknowledge every `ack-every` messages (and at least every 20 ms).
//       Reports delivered messages/s and the send→receive latency percentiles measured in the
//       window after the warm-up, and the send→ok (commit) latency.
//   rtbench idle --port P --tokens FILE --count N [--offset K] [--hold S]
//       Opens N authenticated connections (token lines K..K+N-1), answers pings, prints
//       "ready N" once every welcome arrived, then holds them for S seconds (default: until
//       stdin closes).
//
// One thread, epoll, non-blocking sockets; WebSocket frames masked as RFC 6455 requires. JSON is
// not parsed in general: the few fields needed are found by string search in the server's
// compact frames. Connection i uses source address 127.0.0.(2 + i % 60), so that tens of thousands
// of connections (and runs right after each other) do not run out of one address's local ports.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum phase { CONNECTING, HANDSHAKE, HELLO, OPEN, WAITING, CLOSED };
enum role { SENDER, RECIPIENT, IDLE };

typedef struct {
    char *data;
    size_t len, cap, off;
} buffer;

typedef struct conn {
    int fd;
    int index;
    enum phase phase;
    enum role role;
    char user[64];
    char token[96];
    char device[48];
    const char *peer;  // recipient user id (senders)
    buffer in, out;
    int outstanding;
    uint64_t next_id;
    uint64_t sent_total;
    uint64_t paced;  // messages sent by the open-loop pacer
    int64_t last_seq, acked_seq;
    int retries;           // hellos refused with `unavailable` (idle mode retries them)
    uint64_t retry_at_ns;  // when a WAITING connection reconnects
    uint64_t last_ack_ns;
    uint64_t *send_times;  // ring of send timestamps by request id (senders)
} conn;

static int epfd;
static conn *conns;
static int nconns;
static const char *host = "127.0.0.1";
static int port = 8080;
static int window_size = 8, msg_size = 100, ack_every = 32;
static double warmup_s = 5, duration_s = 20;
static double rate = 0;  // total messages/s in open-loop mode
static uint64_t pace_start;
static uint64_t measure_start, measure_end;
static uint64_t delivered_in_window, sent_in_window, oks_in_window, errors_seen;
static uint32_t *latencies;  // microseconds, send→receive
static size_t nlat, caplat;
static uint32_t *ok_latencies;  // microseconds, send→ok
static size_t nok, capok;
static int open_count, closed_count, retried_count;
static uint32_t mask_state = 0x9e3779b9u;
static unsigned long long run_id;  // makes clientMessageIds unique across runs (re-sends are deduplicated)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void buf_reserve(buffer *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    if (b->off > 0 && b->off >= b->len / 2) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->len + extra <= b->cap) return;
    }
    size_t cap = b->cap ? b->cap : 512;
    while (cap < b->len + extra) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) die("realloc");
    b->cap = cap;
}

static void buf_consume(buffer *b, size_t n) {
    b->off += n;
    if (b->off == b->len) b->off = b->len = 0;
}

static void want_write(conn *c, int on) {
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void close_conn(conn *c, const char *why) {
    if (c->phase == CLOSED) return;
    if (c->phase == OPEN) open_count--;
    c->phase = CLOSED;
    closed_count++;
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (why) fprintf(stderr, "connection %d (%s) closed: %s\n", c->index, c->user, why);
}

static void flush_out(conn *c) {
    while (c->out.len > c->out.off) {
        ssize_t n = send(c->fd, c->out.data + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                want_write(c, 1);
                return;
            }
            if (errno == EINTR) continue;
            close_conn(c, strerror(errno));
            return;
        }
        buf_consume(&c->out, (size_t)n);
    }
    want_write(c, 0);
}

// Queues one masked frame; the caller flushes.
static void queue_frame(conn *c, int opcode, const char *payload, size_t len) {
    buf_reserve(&c->out, len + 14);
    unsigned char *p = (unsigned char *)c->out.data + c->out.len;
    size_t h = 0;
    p[h++] = 0x80 | (unsigned char)opcode;
    if (len < 126) {
        p[h++] = 0x80 | (unsigned char)len;
    } else if (len <= 0xFFFF) {
        p[h++] = 0x80 | 126;
        p[h++] = (unsigned char)(len >> 8);
        p[h++] = (unsigned char)len;
    } else {
        p[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--) p[h++] = (unsigned char)((uint64_t)len >> (8 * i));
    }
    mask_state = mask_state * 1664525u + 1013904223u;
    unsigned char key[4] = {(unsigned char)(mask_state >> 24), (unsigned char)(mask_state >> 16),
                            (unsigned char)(mask_state >> 8), (unsigned char)mask_state};
    memcpy(p + h, key, 4);
    h += 4;
    for (size_t i = 0; i < len; i++) p[h + i] = (unsigned char)payload[i] ^ key[i & 3];
    c->out.len += h + len;
}

static void send_text(conn *c, const char *text, size_t len) {
    queue_frame(c, 1, text, len);
}

static void send_message(conn *c) {
    char text[4096];
    char body[2048];
    uint64_t id = ++c->next_id;
    uint64_t t = now_ns();
    int n = snprintf(body, sizeof body, "t=%llu;", (unsigned long long)t);
    while (n < msg_size && n < (int)sizeof body - 1) body[n++] = 'x';
    body[n] = 0;
    int len = snprintf(text, sizeof text,
                       "{\"type\":\"message.send\",\"id\":%llu,\"clientMessageId\":\"%llx-%d-%llu\",\"to\":[\"%s\"],\"text\":\"%s\"}",
                       (unsigned long long)id, run_id, c->index, (unsigned long long)id, c->peer, body);
    c->send_times[id % 1024] = t;
    c->outstanding++;
    c->sent_total++;
    if (t >= measure_start && t < measure_end) sent_in_window++;
    send_text(c, text, (size_t)len);
}

static void send_ack(conn *c) {
    if (c->last_seq <= c->acked_seq) return;
    char text[96];
    int len = snprintf(text, sizeof text, "{\"type\":\"ack\",\"upTo\":%lld}", (long long)c->last_seq);
    c->acked_seq = c->last_seq;
    c->last_ack_ns = now_ns();
    send_text(c, text, (size_t)len);
}

static long long field_int(const char *json, size_t len, const char *key) {
    char *p = memmem(json, len, key, strlen(key));
    if (!p) return -1;
    return strtoll(p + strlen(key), NULL, 10);
}

static void record(uint32_t **array, size_t *count, size_t *cap, uint64_t ns) {
    if (*count == *cap) {
        *cap = *cap ? *cap * 2 : 1 << 16;
        *array = realloc(*array, *cap * sizeof(uint32_t));
        if (!*array) die("realloc");
    }
    (*array)[(*count)++] = (uint32_t)(ns / 1000);
}

static void on_text(conn *c, const char *json, size_t len) {
    uint64_t t = now_ns();
    if (c->phase == HELLO) {
        if (!memmem(json, len, "\"type\":\"welcome\"", 16)) {
            if (c->role == IDLE && c->retries < 8 && memmem(json, len, "\"code\":\"unavailable\"", strlen("\"code\":\"unavailable\""))) {
                // The server is overloaded (a reconnect storm): back off and retry, as the
                // reconnect algorithm in docs/realtime-protocol.md tells clients to.
                epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->in.len = c->in.off = c->out.len = c->out.off = 0;
                c->retries++;
                c->phase = WAITING;
                c->retry_at_ns = t + (500ull << (c->retries < 4 ? c->retries : 4)) * 1000000ull
                                 + (uint64_t)(rand() % 1000) * 1000000ull;
                retried_count++;
                return;
            }
            fprintf(stderr, "hello refused: %.*s\n", (int)len, json);
            close_conn(c, "hello refused");
            return;
        }
        c->phase = OPEN;
        open_count++;
        c->last_seq = field_int(json, len, "\"lastSeq\":");
        c->acked_seq = c->last_seq;
        return;
    }
    if (memmem(json, len, "\"type\":\"message\"", 16)) {
        long long seq = field_int(json, len, "\"seq\":");
        if (seq > c->last_seq) c->last_seq = seq;
        char *p = memmem(json, len, "\"text\":\"t=", 10);
        if (p) {
            uint64_t sent = strtoull(p + 10, NULL, 10);
            if (t >= measure_start && t < measure_end && sent >= measure_start) {
                delivered_in_window++;
                record(&latencies, &nlat, &caplat, t - sent);
            }
        }
        if (c->last_seq - c->acked_seq >= ack_every) send_ack(c);
        return;
    }
    if (memmem(json, len, "\"type\":\"receipt\"", 16)) {
        long long seq = field_int(json, len, "\"seq\":");
        if (seq > c->last_seq) c->last_seq = seq;
        if (c->last_seq - c->acked_seq >= ack_every) send_ack(c);
        return;
    }
    if (memmem(json, len, "\"type\":\"ok\"", 11) && c->role == SENDER) {
        long long re = field_int(json, len, "\"re\":");
        if (re > 0 && memmem(json, len, "\"messageId\"", 11)) {
            c->outstanding--;
            uint64_t sent = c->send_times[re % 1024];
            if (t >= measure_start && t < measure_end && sent >= measure_start) {
                oks_in_window++;
                record(&ok_latencies, &nok, &capok, t - sent);
            }
            if (t < measure_end && rate == 0) send_message(c);
        }
        return;
    }
    if (memmem(json, len, "\"type\":\"error\"", 14)) {
        if (errors_seen++ < 5) fprintf(stderr, "error frame: %.*s\n", (int)len, json);
        if (c->role == SENDER) {
            c->outstanding--;
            if (t < measure_end && rate == 0) send_message(c);
        }
    }
}

static void start_session(conn *c) {
    char text[512];
    int len = snprintf(text, sizeof text, "{\"type\":\"hello\",\"sessionToken\":\"%s\",\"deviceId\":\"%s\",\"resumeAfter\":0}",
                       c->token, c->device);
    c->phase = HELLO;
    send_text(c, text, (size_t)len);
}

static void on_readable(conn *c) {
    for (;;) {
        buf_reserve(&c->in, 65536);
        ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
        if (n == 0) {
            close_conn(c, "peer closed");
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            close_conn(c, strerror(errno));
            return;
        }
        c->in.len += (size_t)n;
        if ((size_t)n < 65536) break;
    }
    if (c->phase == HANDSHAKE) {
        char *end = memmem(c->in.data + c->in.off, c->in.len - c->in.off, "\r\n\r\n", 4);
        if (!end) return;
        if (strncmp(c->in.data + c->in.off, "HTTP/1.1 101", 12) != 0) {
            close_conn(c, "upgrade refused");
            return;
        }
        buf_consume(&c->in, (size_t)(end + 4 - (c->in.data + c->in.off)));
        start_session(c);
    }
    while (c->phase != CLOSED) {
        unsigned char *p = (unsigned char *)c->in.data + c->in.off;
        size_t avail = c->in.len - c->in.off;
        if (avail < 2) break;
        int opcode = p[0] & 0x0F;
        uint64_t len = p[1] & 0x7F;
        size_t h = 2;
        if (len == 126) {
            if (avail < 4) break;
            len = ((uint64_t)p[2] << 8) | p[3];
            h = 4;
        } else if (len == 127) {
            if (avail < 10) break;
            len = 0;
            for (int i = 0; i < 8; i++) len = (len << 8) | p[2 + i];
            h = 10;
        }
        if (avail < h + len) break;
        const char *payload = (const char *)p + h;
        if (opcode == 1) {
            on_text(c, payload, (size_t)len);
        } else if (opcode == 9) {
            queue_frame(c, 10, payload, (size_t)len);
        } else if (opcode == 8) {
            char why[160];
            int code = len >= 2 ? (p[h] << 8 | p[h + 1]) : 0;
            snprintf(why, sizeof why, "close %d %.*s", code, (int)(len > 2 ? len - 2 : 0), payload + 2);
            close_conn(c, why);
            return;
        }
        buf_consume(&c->in, h + (size_t)len);
    }
    if (c->phase != CLOSED) flush_out(c);
}

static void on_writable(conn *c) {
    if (c->phase == CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err) {
            close_conn(c, strerror(err));
            return;
        }
        c->phase = HANDSHAKE;
        char req[256];
        int len = snprintf(req, sizeof req,
                           "GET /v1/socket HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                           host, port);
        buf_reserve(&c->out, (size_t)len);
        memcpy(c->out.data + c->out.len, req, (size_t)len);
        c->out.len += (size_t)len;
    }
    flush_out(c);
}

static void open_conn(conn *c) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = 0};
    local.sin_addr.s_addr = htonl(0x7F000002u + (uint32_t)(c->index % 60));
    if (bind(fd, (struct sockaddr *)&local, sizeof local) < 0) die("bind");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &addr.sin_addr);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) die("connect");
    c->fd = fd;
    c->phase = CONNECTING;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
}

static void run_loop(uint64_t until, int (*done)(void)) {
    struct epoll_event events[1024];
    while (now_ns() < until && !(done && done())) {
        int n = epoll_wait(epfd, events, 1024, rate > 0 ? 1 : 5);
        for (int i = 0; i < n; i++) {
            conn *c = events[i].data.ptr;
            if (c->phase == CLOSED) continue;
            if (events[i].events & EPOLLOUT) on_writable(c);
            if (c->phase != CLOSED && events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
        }
        uint64_t t = now_ns();
        if (rate > 0 && pace_start && t < measure_end) {
            // Open loop: each sender's share of `rate`, evenly spread.
            double per_sender = rate / (nconns / 2);
            double elapsed = (double)(t - pace_start) / 1e9 * per_sender;
            for (int k = 0; k < nconns; k += 2) {
                conn *c = &conns[k];
                if (c->phase != OPEN) continue;
                // Senders are spread over the interval, not all due at the same instant.
                uint64_t due = (uint64_t)(elapsed + (double)k / (double)nconns);
                int sent = 0;
                while (c->paced < due && c->outstanding < 256) {
                    c->paced++;
                    send_message(c);
                    sent = 1;
                }
                if (sent) flush_out(c);
            }
        }
        // Time-based acks, so a recipient's last messages do not wait for `ack_every` more.
        static uint64_t last_sweep;
        if (t - last_sweep > 20000000ull) {
            last_sweep = t;
            if (retried_count > 0) {
                for (int k = 0; k < nconns; k++) {
                    if (conns[k].phase == WAITING && t >= conns[k].retry_at_ns) open_conn(&conns[k]);
                }
            }
            for (int k = 0; k < nconns; k++) {
                conn *c = &conns[k];
                if (c->phase == OPEN && c->last_seq > c->acked_seq && t - c->last_ack_ns > 20000000ull) {
                    send_ack(c);
                    flush_out(c);
                }
            }
        }
    }
}

static int connected_all(void) {
    return open_count + closed_count >= nconns;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile(uint32_t *v, size_t n, double p) {
    if (n == 0) return 0;
    size_t i = (size_t)(p * (double)(n - 1));
    return v[i] / 1000.0;
}

static char **read_tokens(const char *path, int *count) {
    FILE *f = fopen(path, "r");
    if (!f) die(path);
    char **lines = NULL;
    int n = 0, cap = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            lines = realloc(lines, (size_t)cap * sizeof *lines);
        }
        lines[n++] = strdup(line);
    }
    fclose(f);
    *count = n;
    return lines;
}

static void set_identity(conn *c, const char *line, const char *device_prefix) {
    // "userId token"
    const char *space = strchr(line, ' ');
    if (!space) {
        fprintf(stderr, "bad token line: %s\n", line);
        exit(1);
    }
    snprintf(c->user, sizeof c->user, "%.*s", (int)(space - line), line);
    snprintf(c->token, sizeof c->token, "%s", space + 1);
    snprintf(c->device, sizeof c->device, "%s-%d", device_prefix, c->index);
}

static void raise_nofile(void) {
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: rtbench throughput|idle [options]\n");
        return 2;
    }
    const char *mode = argv[1];
    const char *tokens_path = NULL;
    int pairs = 500, count = 1000, offset = 0;
    double hold = -1;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--host")) host = v;
        else if (!strcmp(k, "--port")) port = atoi(v);
        else if (!strcmp(k, "--tokens")) tokens_path = v;
        else if (!strcmp(k, "--pairs")) pairs = atoi(v);
        else if (!strcmp(k, "--window")) window_size = atoi(v);
        else if (!strcmp(k, "--size")) msg_size = atoi(v);
        else if (!strcmp(k, "--warmup")) warmup_s = atof(v);
        else if (!strcmp(k, "--duration")) duration_s = atof(v);
        else if (!strcmp(k, "--ack-every")) ack_every = atoi(v);
        else if (!strcmp(k, "--rate")) rate = atof(v);
        else if (!strcmp(k, "--count")) count = atoi(v);
        else if (!strcmp(k, "--offset")) offset = atoi(v);
        else if (!strcmp(k, "--hold")) hold = atof(v);
        else {
            fprintf(stderr, "unknown option %s\n", k);
            return 2;
        }
    }
    if (!tokens_path) {
        fprintf(stderr, "--tokens is required\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();
    run_id = (unsigned long long)now_ns() ^ ((unsigned long long)getpid() << 40);
    int ntokens;
    char **tokens = read_tokens(tokens_path, &ntokens);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");

    if (!strcmp(mode, "idle")) {
        if (offset + count > ntokens) {
            fprintf(stderr, "need %d token lines, have %d\n", offset + count, ntokens);
            return 1;
        }
        nconns = count;
        conns = calloc((size_t)nconns, sizeof *conns);
        for (int i = 0; i < nconns; i++) {
            conns[i].index = offset + i;
            conns[i].role = IDLE;
            set_identity(&conns[i], tokens[offset + i], "idle");
        }
        uint64_t started = now_ns();
        // Open in waves so the listen backlog is not overrun.
        for (int i = 0; i < nconns; i++) {
            open_conn(&conns[i]);
            if (i % 500 == 499) run_loop(now_ns() + 20000000ull, NULL);
        }
        run_loop(now_ns() + 300ull * 1000000000ull, connected_all);
        printf("ready %d open %d closed %d retried in %.1f s\n", open_count, closed_count, retried_count,
               (double)(now_ns() - started) / 1e9);
        fflush(stdout);
        if (hold >= 0) {
            run_loop(now_ns() + (uint64_t)(hold * 1e9), NULL);
        } else {
            // Hold until stdin closes (the driving script ends us).
            fcntl(0, F_SETFL, O_NONBLOCK);
            for (;;) {
                run_loop(now_ns() + 200000000ull, NULL);
                char b[64];
                ssize_t n = read(0, b, sizeof b);
                if (n == 0) break;
            }
        }
        printf("still open %d of %d\n", open_count, nconns);
        return open_count == nconns ? 0 : 1;
    }

    if (strcmp(mode, "throughput") != 0) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (2 * pairs > ntokens) {
        fprintf(stderr, "need %d token lines, have %d\n", 2 * pairs, ntokens);
        return 1;
    }
    nconns = 2 * pairs;
    conns = calloc((size_t)nconns, sizeof *conns);
    for (int i = 0; i < nconns; i++) {
        conn *c = &conns[i];
        c->index = i;
        c->role = i % 2 == 0 ? SENDER : RECIPIENT;
        set_identity(c, tokens[i], c->role == SENDER ? "bench-tx" : "bench-rx");
        if (c->role == SENDER) c->send_times = calloc(1024, sizeof(uint64_t));
    }
    for (int i = 0; i < nconns; i += 2) conns[i].peer = conns[i + 1].user;
    measure_start = measure_end = UINT64_MAX;
    for (int i = 0; i < nconns; i++) {
        open_conn(&conns[i]);
        if (i % 200 == 199) run_loop(now_ns() + 10000000ull, NULL);
    }
    run_loop(now_ns() + 120ull * 1000000000ull, connected_all);
    if (open_count != nconns) {
        fprintf(stderr, "only %d of %d connections opened\n", open_count, nconns);
        return 1;
    }
    uint64_t t0 = now_ns();
    measure_start = t0 + (uint64_t)(warmup_s * 1e9);
    measure_end = measure_start + (uint64_t)(duration_s * 1e9);
    if (rate > 0) {
        pace_start = t0;
    } else {
        for (int i = 0; i < nconns; i += 2) {
            for (int w = 0; w < window_size; w++) send_message(&conns[i]);
            flush_out(&conns[i]);
        }
    }
    run_loop(measure_end, NULL);
    // Let the in-flight messages land (not counted), then stop.
    run_loop(now_ns() + 2000000000ull, NULL);
    qsort(latencies, nlat, sizeof *latencies, cmp_u32);
    qsort(ok_latencies, nok, sizeof *ok_latencies, cmp_u32);
    double seconds = duration_s;
    printf("{\"pairs\":%d,\"window\":%d,\"rate\":%.0f,\"size\":%d,\"seconds\":%.1f,"
           "\"delivered_per_s\":%.0f,\"sent_per_s\":%.0f,\"acked_per_s\":%.0f,"
           "\"latency_ms\":{\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"max\":%.2f},"
           "\"ok_latency_ms\":{\"p50\":%.2f,\"p99\":%.2f},\"errors\":%llu,\"closed\":%d}\n",
           pairs, rate > 0 ? 0 : window_size, rate, msg_size, seconds, delivered_in_window / seconds, sent_in_window / seconds,
           oks_in_window / seconds, percentile(latencies, nlat, 0.50), percentile(latencies, nlat, 0.90),
           percentile(latencies, nlat, 0.99), nlat ? latencies[nlat - 1] / 1000.0 : 0, percentile(ok_latencies, nok, 0.50),
           percentile(ok_latencies, nok, 0.99), (unsigned long long)errors_seen, closed_count);
    return closed_count == 0 ? 0 : 1;
}
