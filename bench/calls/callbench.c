// callbench: call-setup load generator for Parley's /v1/socket.
//
//   callbench --port P --users FILE [--rate 1000] [--warmup 2] [--duration 10]
//
// FILE has one "userId|sessionToken" line per user; pair i is a caller (line 2i) and a callee
// (line 2i+1), each one device on its own connection. Calls start open-loop at `rate` per second,
// round robin over the pairs (a pair still busy with its previous call skips the slot). Each
// call: caller sends call.invite; the callee device, on call.incoming, acknowledges it and sends
// call.ringing and call.answer; the caller, on call.answered, sends call.hangup; the call is done
// when both got call.ended. Measured on CLOCK_MONOTONIC: invite sent → incoming received, and
// answer sent → answered received, for calls started after the warm-up. Prints completed calls,
// skips, errors and p50/p90/p99/max of both.
//
// One thread, epoll, non-blocking sockets, masked client frames (RFC 6455). The server's compact
// JSON is not parsed in general: the few fields needed are found by string search.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum phase { HANDSHAKE, HELLO, OPEN, CLOSED };

typedef struct {
    char *data;
    size_t len, cap, off;
} buffer;

typedef struct {
    int fd;
    int pair;
    int is_caller;
    enum phase phase;
    char user[64];
    char token[128];
    buffer in, out;
    unsigned long long next_id;
} conn;

typedef struct {
    double invited, incoming, answer_sent, answered;
    int pair;
    char measured, ended_caller, ended_callee, started;
} call;

static conn *conns;
static int pair_count;
static int *pair_busy;
static call *calls;
static long call_capacity;
static int epfd;
static long errors_seen, completed, skipped, open_calls;
static char first_error[256];

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *message) {
    perror(message);
    exit(1);
}

static void reserve(buffer *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->len + extra <= b->cap) return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) die("realloc");
    b->cap = cap;
}

static void flush(conn *c) {
    while (c->out.off < c->out.len) {
        ssize_t n = write(c->fd, c->out.data + c->out.off, c->out.len - c->out.off);
        if (n < 0) {
            if (errno == EAGAIN) break;
            if (errno == EINTR) continue;
            c->phase = CLOSED;
            return;
        }
        c->out.off += (size_t)n;
    }
    if (c->out.off == c->out.len) c->out.off = c->out.len = 0;
    struct epoll_event ev = {.events = EPOLLIN | (c->out.len ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void send_raw(conn *c, const char *data, size_t len) {
    reserve(&c->out, len);
    memcpy(c->out.data + c->out.len, data, len);
    c->out.len += len;
}

// A masked text frame.
static void send_text(conn *c, const char *text, size_t len, int opcode) {
    unsigned char header[14];
    size_t h = 0;
    header[h++] = 0x80 | opcode;
    if (len < 126) {
        header[h++] = 0x80 | (unsigned char)len;
    } else if (len < 65536) {
        header[h++] = 0x80 | 126;
        header[h++] = (unsigned char)(len >> 8);
        header[h++] = (unsigned char)len;
    } else {
        header[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--) header[h++] = (unsigned char)((unsigned long long)len >> (8 * i));
    }
    unsigned char mask[4] = {0x3c, 0xa1, 0x5e, 0x07};
    memcpy(header + h, mask, 4);
    h += 4;
    reserve(&c->out, h + len);
    memcpy(c->out.data + c->out.len, header, h);
    c->out.len += h;
    unsigned char *payload = (unsigned char *)c->out.data + c->out.len;
    for (size_t i = 0; i < len; i++) payload[i] = (unsigned char)text[i] ^ mask[i & 3];
    c->out.len += len;
}

__attribute__((format(printf, 2, 3))) static void send_request(conn *c, const char *format, ...) {
    char text[1024];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(text, sizeof text, format, args);
    va_end(args);
    send_text(c, text, (size_t)n, 1);
}

static void call_id_text(long index, char *out) {
    snprintf(out, 40, "00000000-0000-4000-8000-%012lx", (unsigned long)index & 0xffffffffffffUL);
}

// The value of "key":"…" in `text` (copied into out), or 0.
static int string_field(const char *text, size_t len, const char *key, char *out, size_t cap) {
    char needle[64];
    int n = snprintf(needle, sizeof needle, "\"%s\":\"", key);
    const char *at = memmem(text, len, needle, (size_t)n);
    if (!at) return 0;
    at += n;
    const char *end = memchr(at, '"', len - (size_t)(at - text));
    if (!end || (size_t)(end - at) >= cap) return 0;
    memcpy(out, at, (size_t)(end - at));
    out[end - at] = 0;
    return 1;
}

static long long int_field(const char *text, size_t len, const char *key) {
    char needle[64];
    int n = snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *at = memmem(text, len, needle, (size_t)n);
    return at ? strtoll(at + n, NULL, 10) : -1;
}

static void finish_if_done(long index) {
    call *k = &calls[index];
    if (!k->ended_caller || !k->ended_callee) return;
    pair_busy[k->pair] = 0;
    open_calls--;
    if (k->measured && k->incoming > 0 && k->answered > 0) completed++;
}

static void handle_text(conn *c, const char *text, size_t len) {
    char type[40];
    if (!string_field(text, len, "type", type, sizeof type)) return;
    if (c->phase == HELLO) {
        if (strcmp(type, "welcome") == 0) {
            c->phase = OPEN;
        } else {
            fprintf(stderr, "hello refused: %.*s\n", (int)len, text);
            exit(1);
        }
        return;
    }
    if (strcmp(type, "error") == 0) {
        if (errors_seen++ == 0) snprintf(first_error, sizeof first_error, "%.*s", (int)(len < 200 ? len : 200), text);
        return;
    }
    if (strncmp(type, "call.", 5) != 0) return;
    char id[40];
    if (!string_field(text, len, "callId", id, sizeof id) || strlen(id) != 36) return;
    long index = strtol(id + 24, NULL, 16);
    if (index < 0 || index >= call_capacity) return;
    call *k = &calls[index];
    double now = now_seconds();
    if (strcmp(type, "call.incoming") == 0) {
        k->incoming = now;
        long long seq = int_field(text, len, "seq");
        if (seq > 0) send_request(c, "{\"type\":\"ack\",\"upTo\":%lld}", seq);
        send_request(c, "{\"type\":\"call.ringing\",\"callId\":\"%s\",\"id\":%llu}", id, ++c->next_id);
        k->answer_sent = now_seconds();
        send_request(c, "{\"type\":\"call.answer\",\"callId\":\"%s\",\"sdp\":\"v=0 answer\",\"id\":%llu}", id, ++c->next_id);
        flush(c);
    } else if (strcmp(type, "call.answered") == 0) {
        k->answered = now;
        send_request(c, "{\"type\":\"call.hangup\",\"callId\":\"%s\",\"id\":%llu}", id, ++c->next_id);
        flush(c);
    } else if (strcmp(type, "call.ended") == 0) {
        if (c->is_caller) {
            k->ended_caller = 1;
        } else {
            k->ended_callee = 1;
        }
        finish_if_done(index);
    }
}

static void handle_readable(conn *c) {
    for (;;) {
        reserve(&c->in, 65536);
        ssize_t n = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            c->phase = CLOSED;
            epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
            return;
        }
        if (n < 0) break;
        c->in.len += (size_t)n;
    }
    if (c->phase == HANDSHAKE) {
        char *end = memmem(c->in.data + c->in.off, c->in.len - c->in.off, "\r\n\r\n", 4);
        if (!end) return;
        if (strncmp(c->in.data + c->in.off, "HTTP/1.1 101", 12) != 0) {
            fprintf(stderr, "upgrade refused: %.*s\n", (int)(end - c->in.data - c->in.off), c->in.data + c->in.off);
            exit(1);
        }
        c->in.off = (size_t)(end + 4 - c->in.data);
        c->phase = HELLO;
        send_request(c, "{\"type\":\"hello\",\"sessionToken\":\"%s\",\"deviceId\":\"%s\",\"resumeAfter\":0}", c->token,
                     c->is_caller ? "bench-caller" : "bench-callee");
        flush(c);
    }
    for (;;) {
        size_t available = c->in.len - c->in.off;
        unsigned char *p = (unsigned char *)c->in.data + c->in.off;
        if (available < 2) break;
        int opcode = p[0] & 0x0f;
        size_t length = p[1] & 0x7f, header = 2;
        if (length == 126) {
            if (available < 4) break;
            length = ((size_t)p[2] << 8) | p[3];
            header = 4;
        } else if (length == 127) {
            if (available < 10) break;
            length = 0;
            for (int i = 0; i < 8; i++) length = (length << 8) | p[2 + i];
            header = 10;
        }
        if (available < header + length) break;
        const char *payload = (const char *)p + header;
        if (opcode == 1) {
            handle_text(c, payload, length);
        } else if (opcode == 9) {
            send_text(c, payload, length, 10);
            flush(c);
        } else if (opcode == 8) {
            c->phase = CLOSED;
        }
        c->in.off += header + length;
    }
    if (c->in.off == c->in.len) c->in.off = c->in.len = 0;
}

static void open_connection(conn *c, int port) {
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) die("socket");
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&address, sizeof address) != 0) die("connect");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) != 0) die("fcntl");
    char request[512];
    int n = snprintf(request, sizeof request,
                     "GET /v1/socket HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", port);
    send_raw(c, request, (size_t)n);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
    flush(c);
}

/* Waits up to `timeout` seconds (0: just looks), to the microsecond: the pacing loop sleeps until
   the next call is due instead of spinning, so the client leaves the CPU to the server. */
static void poll_once(double timeout) {
    struct epoll_event events[256];
    if (timeout < 0) timeout = 0;
    struct timespec wait = {.tv_sec = (time_t)timeout, .tv_nsec = (long)((timeout - (double)(time_t)timeout) * 1e9)};
    int n = epoll_pwait2(epfd, events, 256, &wait, NULL);
    for (int i = 0; i < n; i++) {
        conn *c = events[i].data.ptr;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) handle_readable(c);
        if (c->phase != CLOSED && (events[i].events & EPOLLOUT)) flush(c);
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *values, long count) {
    qsort(values, (size_t)count, sizeof(double), compare_doubles);
    printf("%-16s p50 %6.2f ms   p90 %6.2f ms   p99 %6.2f ms   max %7.2f ms\n", name, values[count / 2] * 1e3,
           values[(long)(count * 0.90)] * 1e3, values[(long)(count * 0.99)] * 1e3, values[count - 1] * 1e3);
}

int main(int argc, char **argv) {
    int port = 0;
    const char *users_path = NULL;
    double rate = 1000, warmup = 2, duration = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0) port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--users") == 0) users_path = argv[i + 1];
        else if (strcmp(argv[i], "--rate") == 0) rate = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0) warmup = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--duration") == 0) duration = atof(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!port || !users_path || rate <= 0 || duration <= 0) {
        fprintf(stderr, "usage: callbench --port P --users FILE [--rate R] [--warmup S] [--duration S]\n");
        return 2;
    }
    FILE *file = fopen(users_path, "r");
    if (!file) die(users_path);
    int capacity = 1024, count = 0;
    conns = calloc((size_t)capacity, sizeof(conn));
    char line[256];
    while (fgets(line, sizeof line, file)) {
        char *bar = strchr(line, '|');
        if (!bar) continue;
        *bar = 0;
        line[strcspn(line, "\n")] = 0;
        bar[1 + strcspn(bar + 1, "\n")] = 0;
        if (count == capacity) {
            capacity *= 2;
            conns = realloc(conns, (size_t)capacity * sizeof(conn));
            memset(conns + count, 0, (size_t)(capacity - count) * sizeof(conn));
        }
        snprintf(conns[count].user, sizeof conns[count].user, "%.63s", line);
        snprintf(conns[count].token, sizeof conns[count].token, "%.127s", bar + 1);
        count++;
    }
    fclose(file);
    pair_count = count / 2;
    if (pair_count == 0) {
        fprintf(stderr, "no users\n");
        return 2;
    }
    pair_busy = calloc((size_t)pair_count, sizeof(int));
    call_capacity = (long)(rate * (warmup + duration)) + 1;
    calls = calloc((size_t)call_capacity, sizeof(call));
    epfd = epoll_create1(0);

    for (int i = 0; i < 2 * pair_count; i++) {
        conns[i].pair = i / 2;
        conns[i].is_caller = i % 2 == 0;
        open_connection(&conns[i], port);
    }
    double deadline = now_seconds() + 60;
    for (;;) {
        int open = 0;
        for (int i = 0; i < 2 * pair_count; i++) open += conns[i].phase == OPEN;
        if (open == 2 * pair_count) break;
        if (now_seconds() > deadline) {
            fprintf(stderr, "only %d of %d connections opened\n", open, 2 * pair_count);
            return 1;
        }
        poll_once(0.01);
    }

    long total = call_capacity - 1, warmup_calls = (long)(rate * warmup), next = 0;
    double start = now_seconds();
    while (next < total) {
        double now = now_seconds();
        while (next < total && start + next / rate <= now) {
            int pair = (int)(next % pair_count);
            call *k = &calls[next];
            k->measured = next >= warmup_calls;
            if (pair_busy[pair]) {
                skipped += k->measured;
            } else {
                pair_busy[pair] = 1;
                open_calls++;
                k->pair = pair;
                k->started = 1;
                char id[40];
                call_id_text(next, id);
                conn *caller = &conns[2 * pair];
                k->invited = now_seconds();
                send_request(caller, "{\"type\":\"call.invite\",\"callId\":\"%s\",\"to\":\"%s\",\"sdp\":\"v=0 offer\",\"id\":%llu}",
                             id, conns[2 * pair + 1].user, ++caller->next_id);
                flush(caller);
            }
            next++;
        }
        double wait = start + next / rate - now_seconds();
        poll_once(wait);
    }
    double finish = now_seconds() + 10;
    while (open_calls > 0 && now_seconds() < finish) poll_once(0.01);

    double *incoming = malloc(sizeof(double) * (size_t)total), *answered = malloc(sizeof(double) * (size_t)total);
    long measured = 0;
    for (long i = warmup_calls; i < total; i++) {
        call *k = &calls[i];
        if (!k->started || !k->ended_caller || !k->ended_callee || k->incoming <= 0 || k->answered <= 0) continue;
        incoming[measured] = k->incoming - k->invited;
        answered[measured] = k->answered - k->answer_sent;
        measured++;
    }
    printf("calls measured: %ld of %ld slots (%.0f/s); skipped (pair busy): %ld; unfinished: %ld; errors: %ld%s%s\n", measured,
           total - warmup_calls, measured / duration, skipped, open_calls, errors_seen, errors_seen ? " e.g. " : "", first_error);
    if (measured > 0) {
        report("invite→incoming", incoming, measured);
        report("answer→answered", answered, measured);
    }
    return measured > 0 ? 0 : 1;
}
